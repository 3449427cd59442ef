"""Who sees which dashboard page: outsiders get 404 for every team page and action of a
team they are not in (existing or not), with nothing of that team in the body; members
whose role is too low get 403; anonymous visitors are sent to sign in."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pytest
from django.test import Client
from django.urls import URLPattern, reverse

from dashboard import urls as dashboard_urls
from memories.models import Memory
from teams.models import AgentToken, Membership, Team, VaultEntry
from teams.scope import team_scope
from tests.conftest import operator_view
from tests.dashboard.conftest import BravoData, Cast, client_for, save


@dataclass(frozen=True)
class Endpoint:
    name: str
    method: str  # GET or POST
    min_role: str
    data: dict[str, Any] | None = None


def _edit_data(base_version: str) -> dict[str, Any]:
    return {
        "content": "Changed by someone who should not.",
        "type": "context",
        "project": "",
        "kind": "hard",
        "reason": "trying",
        "base_version": base_version,
    }


# Every team URL of the dashboard with every method it answers; the last test below
# fails when a new team URL is added without being listed here.
ENDPOINTS = [
    Endpoint("overview", "GET", "viewer"),
    Endpoint("reindex", "POST", "admin", {"scope": "all"}),
    Endpoint("search", "GET", "viewer", {"q": "launch zeppelin"}),
    Endpoint("injection", "GET", "viewer"),
    Endpoint("sessions", "GET", "viewer"),
    Endpoint("daily_log", "GET", "viewer"),
    Endpoint("review", "GET", "viewer"),
    Endpoint("review_resolve", "POST", "member", {"action": "dismiss"}),
    Endpoint("review_draft", "POST", "member", {"action": "reject"}),
    Endpoint("memories", "GET", "viewer"),
    Endpoint("memories", "GET", "viewer", {"q": "zeppelin launch", "state": "all"}),
    Endpoint("memory_create", "GET", "member"),
    Endpoint(
        "memory_create",
        "POST",
        "member",
        {"key": "intruder", "content": "Written by an outsider.", "type": "context"},
    ),
    Endpoint("memory", "GET", "viewer"),
    Endpoint("memory_edit", "GET", "member"),
    Endpoint("memory_edit", "POST", "member", {"_edit": True}),
    Endpoint("memory_delete", "GET", "member"),
    Endpoint("memory_delete", "POST", "member", {}),
    Endpoint("memory_unsupersede", "GET", "member"),
    Endpoint("memory_unsupersede", "POST", "member", {"reason": "outsider wants the old one"}),
    Endpoint("memory_annotate", "POST", "member", {"note": "outsider note"}),
    Endpoint("memory_rate", "POST", "member", {"direction": "down"}),
    Endpoint("facts", "GET", "viewer"),
    Endpoint("facts", "GET", "viewer", {"entity": "bravo-launch-plan"}),
    Endpoint("fact_reveal", "POST", "member", {}),
    Endpoint("vault", "GET", "viewer"),
    Endpoint("vault", "POST", "admin", {"key": "intruder-key", "value": "x", "is_secret": "on"}),
    Endpoint("vault_rotate", "GET", "admin"),
    Endpoint("vault_rotate", "POST", "admin", {"value": "rotated-by-outsider"}),
    Endpoint("vault_delete", "GET", "admin"),
    Endpoint("vault_delete", "POST", "admin", {}),
    Endpoint("vault_reveal", "POST", "admin", {}),
    # Everyone manages their own tokens there; a team's token needs an admin.
    Endpoint("tokens", "GET", "viewer"),
    Endpoint("tokens", "POST", "viewer", {"name": "intruder-token", "scopes": ["admin"]}),
    Endpoint("token_revoke", "GET", "admin"),
    Endpoint("token_revoke", "POST", "admin", {}),
    Endpoint("members", "GET", "viewer"),
    Endpoint("members", "POST", "admin", {"username": "olivia", "role": "owner"}),
    Endpoint(
        "members",
        "POST",
        "admin",
        {"username": "intruder@example.com", "role": "owner", "create_account": "on"},
    ),
    Endpoint("member_role", "POST", "admin", {"role": "viewer"}),
    Endpoint("member_remove", "GET", "admin"),
    Endpoint("member_remove", "POST", "admin", {}),
    Endpoint("audit_log", "GET", "admin"),
    Endpoint("team_settings", "GET", "viewer"),
    Endpoint("team_settings", "POST", "admin", {"name": "Taken over", "injection_max_entries": "1"}),
    Endpoint("team_settings", "POST", "admin", {"action": "switch_profile", "embedding_profile": "openai"}),
    Endpoint("shutdown", "GET", "owner"),
    Endpoint("shutdown", "POST", "owner", {"confirm": "bravo"}),
]
ROLES = ["viewer", "member", "admin", "owner"]


@dataclass
class TeamTargets:
    memory_key: str
    memory_id: str
    vault_key: str
    token_id: int
    membership_id: int
    # No nudge or draft needed: outsiders and low roles are stopped before it is looked
    # up (tests/dashboard/test_review.py covers real nudges and drafts of both teams).
    nudge_id: str = "00000000-0000-4000-8000-000000000000"


def url_of(name: str, slug: str, targets: TeamTargets) -> str:
    kwargs: dict[str, Any] = {"slug": slug}
    if (name.startswith("memory_") and name != "memory_create") or name == "memory":
        kwargs["key"] = targets.memory_key
    elif name.startswith("vault_"):
        kwargs["key"] = targets.vault_key
    elif name == "fact_reveal":
        # No fact needed: outsiders and viewers are stopped before it is looked up
        # (tests/dashboard/test_facts_page.py reveals real ones).
        kwargs["entity"], kwargs["key"] = targets.memory_key, targets.vault_key
    elif name == "token_revoke":
        kwargs["token_id"] = targets.token_id
    elif name.startswith("member_"):
        kwargs["membership_id"] = targets.membership_id
    elif name == "review_resolve":
        kwargs["nudge_id"] = targets.nudge_id
    elif name == "review_draft":
        kwargs["draft_id"] = targets.nudge_id  # no draft needed either: see nudge_id
    return reverse(f"dashboard:{name}", kwargs=kwargs)


def call(client: Client, endpoint: Endpoint, url: str, targets: TeamTargets) -> Any:
    data = dict(endpoint.data or {})
    if data.pop("_edit", False):
        data = _edit_data(targets.memory_id)
    if endpoint.method == "GET":
        return client.get(url, data)
    return client.post(url, data)


@pytest.fixture
def bravo_targets(other_team: Team, bravo: BravoData) -> TeamTargets:
    with team_scope(other_team.id):
        memory = Memory.objects.get(team=other_team, key=bravo.memory_key, is_active=True)
    return TeamTargets(bravo.memory_key, str(memory.id), bravo.vault_key, bravo.token.pk, bravo.membership_id)


@pytest.fixture
def alpha_targets(team: Team, cast: Cast) -> TeamTargets:
    from teams import services as team_services

    save(team, "deploy", "Deploy with the old script.")
    memory = save(team, "deploy", "Deploy with the new pipeline.", reason="pipeline replaced the script")
    with team_scope(team.id):
        team_services.set_vault_entry(
            team=team, key="api-key", value="alpha-secret-value", is_secret=True, actor="olivia"
        )
        membership_id = Membership.objects.get(team=team, user=cast.viewer).pk
    token = team_services.create_token(team=team, name="alpha-bot", scopes=["read"], actor="test").token
    return TeamTargets("deploy", str(memory.id), "api-key", token.pk, membership_id)


_CSRF = re.compile(r'(csrfmiddlewaretoken" value="|X-CSRFToken": ")[^"]+')


def without_csrf(body: str) -> str:
    return _CSRF.sub(r"\1", body)


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=lambda e: f"{e.method}-{e.name}")
def test_team_a_user_gets_404_for_every_team_b_page_and_action(
    endpoint: Endpoint, cast: Cast, bravo: BravoData, bravo_targets: TeamTargets, other_team: Team
) -> None:
    # The owner of alpha: the strongest role there must not carry over to bravo.
    client = cast.client("owner")

    bodies = []
    for slug in [other_team.slug, "no-such-team", "Not_A_Slug"]:
        response = call(client, endpoint, url_of(endpoint.name, slug, bravo_targets), bravo_targets)
        assert response.status_code == 404, (slug, response.status_code)
        body = response.content.decode()
        for leaked in [
            "bravo",
            "Bravo",
            bravo.memory_content,
            "zeppelin",
            bravo.secret,
            bravo.vault_key,
            bravo.token.prefix,
            bravo.session_task,
        ]:
            assert leaked not in body, (slug, leaked)
        bodies.append(without_csrf(body))
    # An existing team of someone else and a team that does not exist look the same.
    assert bodies[0] == bodies[1] == bodies[2]


def test_outsider_actions_change_nothing_in_team_b(
    cast: Cast, bravo: BravoData, bravo_targets: TeamTargets, other_team: Team
) -> None:
    client = cast.client("owner")
    for endpoint in ENDPOINTS:
        if endpoint.method == "POST":
            call(client, endpoint, url_of(endpoint.name, other_team.slug, bravo_targets), bravo_targets)

    with operator_view():
        assert Team.objects.filter(pk=other_team.pk, name="Bravo", injection_max_entries=50).exists()
        active = Memory.objects.get(team=other_team, key=bravo.memory_key, is_active=True)
        assert active.content.endswith("on Wednesday.")
        assert (active.upvotes, active.downvotes) == (0, 0)
        assert not active.annotations.exists()
        assert not Memory.objects.filter(key="intruder").exists()
        assert VaultEntry.objects.filter(team=other_team, key=bravo.vault_key).exists()
        assert not VaultEntry.objects.filter(key="intruder-key").exists()
        assert AgentToken.objects.get(pk=bravo.token.pk).revoked_at is None
        assert not AgentToken.objects.filter(name="intruder-token").exists()
        assert Membership.objects.filter(pk=bravo.membership_id, role="owner").exists()
        assert not Membership.objects.filter(team=other_team, user=cast.owner).exists()
        assert not Membership.objects.filter(user__username="intruder@example.com").exists()


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=lambda e: f"{e.method}-{e.name}")
def test_roles_below_the_minimum_get_403(
    endpoint: Endpoint, cast: Cast, team: Team, alpha_targets: TeamTargets
) -> None:
    url = url_of(endpoint.name, team.slug, alpha_targets)
    for role in ROLES[: ROLES.index(endpoint.min_role)]:
        response = call(cast.client(role), endpoint, url, alpha_targets)
        assert response.status_code == 403, (role, response.status_code)
        body = response.content.decode()
        assert f"this needs the <strong>{endpoint.min_role}</strong> role" in body
    if endpoint.method == "GET":
        response = call(cast.client(endpoint.min_role), endpoint, url, alpha_targets)
        assert response.status_code == 200, (endpoint.min_role, response.status_code)


def test_role_denials_change_nothing(cast: Cast, team: Team, alpha_targets: TeamTargets) -> None:
    viewer = cast.client("viewer")
    for endpoint in ENDPOINTS:
        if endpoint.method == "POST":
            call(viewer, endpoint, url_of(endpoint.name, team.slug, alpha_targets), alpha_targets)

    with operator_view():
        assert Memory.objects.filter(team=team).count() == 2
        assert (
            Memory.objects.get(team=team, key="deploy", is_active=True).content
            == "Deploy with the new pipeline."
        )
        assert VaultEntry.objects.filter(team=team).count() == 1
        assert AgentToken.objects.filter(team=team, revoked_at__isnull=True).count() == 1
        assert Membership.objects.filter(team=team).count() == 4


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=lambda e: f"{e.method}-{e.name}")
def test_anonymous_visitors_are_sent_to_sign_in(
    endpoint: Endpoint, team: Team, alpha_targets: TeamTargets
) -> None:
    response = call(Client(), endpoint, url_of(endpoint.name, team.slug, alpha_targets), alpha_targets)

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("dashboard:login") + "?next=")


def test_every_team_url_of_the_dashboard_is_in_the_access_table() -> None:
    team_urls = {
        p.name
        for p in dashboard_urls.urlpatterns
        if isinstance(p, URLPattern) and "<str:slug>" in str(p.pattern)
    }
    assert team_urls == {e.name for e in ENDPOINTS}


def test_team_picker_lists_only_the_users_own_teams(cast: Cast, team: Team, other_team: Team) -> None:
    response = client_for(cast.viewer).get(reverse("dashboard:home"))

    body = response.content.decode()
    assert response.status_code == 200
    assert [m.team.slug for m in response.context["memberships"]] == ["alpha"]
    assert reverse("dashboard:overview", args=["alpha"]) in body
    assert "bravo" not in body and "Bravo" not in body


def test_team_picker_of_a_person_without_teams_is_empty(django_user_model: Any, team: Team) -> None:
    loner = django_user_model.objects.create_user("loner", password="pw")

    response = client_for(loner).get(reverse("dashboard:home"))

    assert response.status_code == 200
    assert response.context["memberships"] == []
    assert "not a member of any team" in response.content.decode()


def test_memberships_of_other_people_stay_invisible_to_the_picker_scope(cast: Cast, team: Team) -> None:
    from teams.scope import own_memberships_scope

    with own_memberships_scope(cast.viewer.pk):
        visible = list(Membership.objects.values_list("user__username", flat=True))
    assert visible == ["vera"]


def test_the_audit_table_is_under_row_level_security(db: None) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relrowsecurity, relforcerowsecurity FROM pg_class WHERE relname = 'teams_auditevent'"
        )
        assert cursor.fetchone() == (True, True)
