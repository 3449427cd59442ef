"""The team settings page: admins change every per-team setting within the model's
limits, each change in the audit trail; previews show the effect without saving; the
embedding profile goes through a re-index; lower roles and other teams are kept out."""

from __future__ import annotations

import re
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse

from memories.models import Memory
from search import services as search_services
from teams.models import AuditEvent, Team
from teams.scope import team_scope
from teams.team_settings import EDITABLE_SETTINGS, update_team_settings
from tests.conftest import operator_view
from tests.dashboard.conftest import BravoData, Cast, save


def url(team: Team) -> str:
    return reverse("dashboard:team_settings", kwargs={"slug": team.slug})


def shown(team: Team) -> dict[str, str]:
    """What the page's form holds for `team`: each value and the hidden copy of it."""
    values = {}
    for name in EDITABLE_SETTINGS:
        value = getattr(team, name)
        values[name] = values[f"initial-{name}"] = "" if value is None else str(value)
    return values


def post(client: Client, team: Team, form: dict[str, str], **changes: Any) -> Any:
    data = {**form, **{name: str(value) for name, value in changes.items()}}
    return client.post(url(team), data)


def fresh(team: Team) -> Team:
    with operator_view():
        return Team.objects.get(pk=team.pk)


def settings_events(team: Team) -> list[AuditEvent]:
    with operator_view():
        return list(AuditEvent.objects.filter(team=team, action="team.settings").order_by("id"))


def test_admin_changes_every_kind_of_setting_and_the_audit_trail_has_old_and_new(
    cast: Cast, team: Team
) -> None:
    admin = cast.client("admin")
    response = post(
        admin,
        team,
        shown(team),
        name="Alpha squad",
        injection_max_entries=10,
        injection_max_tokens=800,
        decay_half_life_days=7.5,
        hybrid_vector_weight=0.5,
        hybrid_keyword_weight=0.5,
        dedup_threshold=0.95,
        freshness_context_days="",
        freshness_identity_days=365,
    )

    assert response.status_code == 302
    saved = fresh(team)
    assert (saved.name, saved.injection_max_entries, saved.injection_max_tokens) == ("Alpha squad", 10, 800)
    assert (saved.decay_half_life_days, saved.hybrid_vector_weight, saved.hybrid_keyword_weight) == (
        7.5,
        0.5,
        0.5,
    )
    assert saved.dedup_threshold == 0.95
    assert (saved.freshness_context_days, saved.freshness_identity_days) == (None, 365)
    assert saved.freshness_lesson_days == 90  # untouched
    [event] = settings_events(team)
    assert event.actor == "user:adam"
    for change in [
        "name: Alpha → Alpha squad",
        "injection_max_entries: 50 → 10",
        "injection_max_tokens: 2000 → 800",
        "decay_half_life_days: 30.0 → 7.5",
        "hybrid_vector_weight: 0.7 → 0.5",
        "hybrid_keyword_weight: 0.3 → 0.5",
        "dedup_threshold: 0.92 → 0.95",
        "freshness_context_days: 30 → never",
        "freshness_identity_days: never → 365",
    ]:
        assert change in event.target
    assert "freshness_lesson_days" not in event.target
    assert "Saved: Name, Injection: most entries" in admin.get(url(team)).content.decode()


def test_saving_without_a_change_records_nothing(cast: Cast, team: Team) -> None:
    response = post(cast.client("admin"), team, shown(team))

    assert response.status_code == 302
    assert settings_events(team) == []


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("injection_max_entries", "201", "less than or equal to 200"),
        ("injection_max_entries", "-1", "Ensure this value is greater than or equal to 0"),
        ("injection_max_tokens", "10", "greater than or equal to 50"),
        ("injection_max_tokens", "ten", "Enter a whole number"),
        ("decay_half_life_days", "nan", "Enter a number"),
        ("decay_half_life_days", "1e9", "less than or equal to 36500"),
        ("hybrid_vector_weight", "1.5", "less than or equal to 1.0"),
        ("hybrid_keyword_weight", "-0.1", "greater than or equal to 0.0"),
        ("dedup_threshold", "0", "above 0 and at most 1"),
        ("freshness_context_days", "0", "greater than or equal to 1"),
        ("scope_window_user_days", "0", "greater than or equal to 1"),
        ("scope_window_team_days", "99999", "less than or equal to"),
        ("name", "Al\x00pha", "Null characters are not allowed"),
        ("name", "", "This field is required"),
    ],
)
def test_invalid_values_are_refused_next_to_their_field_and_nothing_is_saved(
    cast: Cast, team: Team, field: str, value: str, message: str
) -> None:
    response = post(cast.client("admin"), team, shown(team), **{field: value})

    assert response.status_code == 400
    body = response.content.decode()
    errors = re.search(rf'<ul class="errors" id="id_{field}_errors">(.*?)</ul>', body, re.S)
    assert errors is not None and message in errors.group(1)
    assert fresh(team).injection_max_tokens == 2000
    assert fresh(team).name == "Alpha"
    assert settings_events(team) == []


def test_both_weights_zero_is_refused(cast: Cast, team: Team) -> None:
    response = post(cast.client("admin"), team, shown(team), hybrid_vector_weight=0, hybrid_keyword_weight=0)

    assert response.status_code == 400
    assert "at least one hybrid weight must be above 0" in response.content.decode()
    assert fresh(team).hybrid_vector_weight == 0.7


@pytest.mark.parametrize("role", ["member", "viewer"])
def test_roles_below_admin_see_the_settings_but_cannot_change_them(cast: Cast, team: Team, role: str) -> None:
    client = cast.client(role)

    page = client.get(url(team))
    response = post(client, team, shown(team), injection_max_entries=1)
    preview = post(client, team, shown(team), action="preview", injection_max_entries=1)

    assert page.status_code == 200
    body = page.content.decode()
    assert 'name="injection_max_entries" value="50"' in body and "disabled" in body
    assert "Save settings" not in body
    assert (response.status_code, preview.status_code) == (403, 403)
    assert fresh(team).injection_max_entries == 50
    assert settings_events(team) == []


def test_another_teams_user_gets_404_with_nothing_of_the_team(
    cast: Cast, team: Team, other_team: Team, bravo: BravoData
) -> None:
    with operator_view():
        Team.objects.filter(pk=team.pk).update(name="Alpha Quokka Division")
    outsider = cast.client("outsider")  # bob, owner of bravo

    responses = [
        outsider.get(url(team)),
        post(outsider, team, shown(team), injection_max_entries=1),
        post(outsider, team, shown(team), action="preview", injection_max_entries=1),
    ]

    for response in responses:
        assert response.status_code == 404
        body = response.content.decode()
        assert "alpha" not in body.lower() and "Quokka" not in body
    assert fresh(team).injection_max_entries == 50


def test_injection_preview_with_a_smaller_cap_lists_fewer_entries_and_saves_nothing(
    cast: Cast, team: Team
) -> None:
    for n in range(4):
        save(team, f"fact-{n}", f"Fact number {n} about the build.")

    response = post(cast.client("admin"), team, shown(team), action="preview", injection_max_entries=2)

    assert response.status_code == 200
    body = response.content.decode()
    assert re.search(r'id="injection-now">4 entries', body)
    assert re.search(r'id="injection-proposed">2 entries, \d+ of 2000 tokens \(cap 2\)', body)
    assert fresh(team).injection_max_entries == 50
    assert settings_events(team) == []


def test_search_preview_with_keyword_only_weights_ranks_differently(
    cast: Cast, team: Team, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):  # indexed, vectors included
        save(team, "car-care", "Our car needs new tyres and an oil change before winter.")
        save(team, "word-match", "Ledger column automobile: a spreadsheet heading nobody reads.")
    with team_scope(team.id):
        assert Memory.objects.filter(team=team, index_state="indexed").count() == 2
        update_team_settings(
            team=team, changes={"hybrid_vector_weight": 1.0, "hybrid_keyword_weight": 0.0}, by="test"
        )
    form = shown(fresh(team))

    response = post(
        cast.client("admin"),
        team,
        form,
        action="preview",
        preview_query="automobile maintenance",
        hybrid_vector_weight=0.0,
        hybrid_keyword_weight=1.0,
    )

    assert response.status_code == 200
    body = response.content.decode()

    def ranking(list_id: str) -> list[str]:
        listed = re.search(rf'<ol id="{list_id}">(.*?)</ol>', body, re.S)
        assert listed is not None
        return re.findall(r'<span class="mono">([^<]+)</span>', listed.group(1))

    assert ranking("search-now")[0] == "car-care"
    assert ranking("search-proposed")[0] == "word-match"
    assert fresh(team).hybrid_keyword_weight == 0.0


def test_an_invalid_preview_is_refused_like_a_save(cast: Cast, team: Team) -> None:
    response = post(cast.client("admin"), team, shown(team), action="preview", injection_max_entries=500)

    assert response.status_code == 400
    assert 'id="id_injection_max_entries_errors"' in response.content.decode()


def test_switching_the_embedding_profile_queues_a_reindex_and_keeps_the_old_one_meanwhile(
    cast: Cast, team: Team
) -> None:
    client = cast.client("admin")

    unknown = client.post(url(team), {"action": "switch_profile", "embedding_profile": "no-such-model"})
    same = client.post(url(team), {"action": "switch_profile", "embedding_profile": "local"})
    switched = client.post(url(team), {"action": "switch_profile", "embedding_profile": "none"})

    assert (unknown.status_code, same.status_code, switched.status_code) == (400, 400, 302)
    assert "already uses the profile" in same.content.decode()
    # The team switches when the re-index is done (search.reindexing.reindex_team), not now.
    assert fresh(team).embedding_profile == "local"
    with operator_view():
        [event] = AuditEvent.objects.filter(team=team, action="team.reindex")
    assert event.target.startswith("embedding_profile: local → none")


def test_a_stale_form_keeps_the_other_admins_change_or_refuses_the_same_setting(
    cast: Cast, team: Team
) -> None:
    loaded = shown(team)  # both admins opened the page now
    first = post(cast.client("owner"), team, loaded, injection_max_entries=10)

    other_field = post(cast.client("admin"), team, loaded, decay_half_life_days=5)
    same_field = post(cast.client("admin"), team, loaded, injection_max_entries=20)

    assert (first.status_code, other_field.status_code, same_field.status_code) == (302, 302, 400)
    assert "someone else changed this setting meanwhile" in same_field.content.decode()
    saved = fresh(team)
    assert (saved.injection_max_entries, saved.decay_half_life_days) == (10, 5.0)
    assert len(settings_events(team)) == 2


@pytest.mark.django_db(transaction=True)
def test_concurrent_updates_of_different_settings_both_land(team: Team) -> None:
    start = threading.Barrier(2)

    def change(name: str, value: Any) -> None:
        try:
            start.wait(timeout=30)
            with team_scope(team.id):
                update_team_settings(team=Team.objects.get(pk=team.pk), changes={name: value}, by=name)
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [
            pool.submit(change, "injection_max_entries", 7),
            pool.submit(change, "hybrid_keyword_weight", 0.9),
        ]
        for future in futures:
            future.result(timeout=60)

    saved = fresh(team)
    assert (saved.injection_max_entries, saved.hybrid_keyword_weight) == (7, 0.9)
    assert len(settings_events(team)) == 2


def test_profile_switch_refuses_an_unknown_profile_in_the_service(team: Team) -> None:
    from core.errors import InvalidInput

    with team_scope(team.id), pytest.raises(InvalidInput, match="unknown embedding profile"):
        search_services.request_profile_switch(team=team, profile="no-such-model", actor="test")


def test_admin_turns_captures_straight_to_memory_on_and_off(cast: Cast, team: Team) -> None:
    admin = cast.client("admin")
    page = admin.get(url(team)).content.decode()
    assert "Captures straight to memory" in page and 'name="capture_to_memory"' in page

    form = shown(team)
    on = post(admin, team, {**form, "capture_to_memory": "on"})
    assert on.status_code == 302 and fresh(team).capture_to_memory is True

    checked = {**shown(fresh(team))}
    checked.pop("capture_to_memory")  # an unticked checkbox posts nothing
    off = admin.post(url(team), checked)
    assert off.status_code == 302 and fresh(team).capture_to_memory is False
    assert [event.target for event in settings_events(team)] == [
        "capture_to_memory: False → True",
        "capture_to_memory: True → False",
    ]


def test_the_windows_by_scope_are_edited_like_the_other_windows(cast: Cast, team: Team) -> None:
    admin = cast.client("admin")
    page = admin.get(url(team)).content.decode()
    assert "Window: personal scope (days)" in page and "Window: project scope (days)" in page

    response = post(
        admin,
        team,
        shown(team),
        scope_window_project_days=14,
        scope_window_user_days="",
        scope_window_team_days=60,
    )

    assert response.status_code == 302
    saved = fresh(team)
    assert (saved.scope_window_team_days, saved.scope_window_project_days, saved.scope_window_user_days) == (
        60,
        14,
        None,
    )
    [event] = settings_events(team)
    for change in [
        "scope_window_team_days: 90 → 60",
        "scope_window_project_days: never → 14",
        "scope_window_user_days: 30 → never",
    ]:
        assert change in event.target
