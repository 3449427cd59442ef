"""The memory browser, detail page and its actions, through the Django test client."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from memories.models import Annotation, Memory
from teams.models import Team
from tests.conftest import operator_view
from tests.dashboard.conftest import Cast, save


def url(name: str, **kwargs: Any) -> str:
    return reverse(f"dashboard:{name}", kwargs={"slug": "alpha", **kwargs})


@pytest.fixture
def mia(cast: Cast) -> Client:
    return cast.client("member")


def active(team: Team, key: str) -> Memory:
    with operator_view():
        return Memory.objects.get(team=team, key=key, is_active=True)


def test_member_creates_a_memory_attributed_to_them(mia: Client, team: Team) -> None:
    response = mia.post(
        url("memory_create"),
        {
            "key": "deploy:friday",
            "content": "Never deploy on Fridays.",
            "type": "lesson",
            "tags": "ops, #release",
        },
    )

    assert response.status_code == 302
    assert response["Location"] == url("memory", key="deploy:friday")
    memory = active(team, "deploy:friday")
    assert (memory.type, memory.updated_by) == ("lesson", "user:mia")
    assert memory.metadata["tags"] == ["ops", "release"]
    page = mia.get(response["Location"])
    assert "Never deploy on Fridays." in page.content.decode()


def test_edit_supersedes_with_the_reason_and_the_timeline_shows_both_versions_and_the_diff(
    mia: Client, team: Team
) -> None:
    first = save(team, "deploy", "Deploy with the old script on Mondays.")

    response = mia.post(
        url("memory_edit", key="deploy"),
        {
            "content": "Deploy with the new pipeline on Mondays.",
            "type": "context",
            "project": "",
            "kind": "hard",
            "reason": "pipeline replaced the script",
            "base_version": str(first.id),
        },
    )

    assert response.status_code == 302
    current = active(team, "deploy")
    assert (current.supersede_reason, current.supersede_kind, current.supersedes_id) == (
        "pipeline replaced the script",
        "hard",
        first.id,
    )
    page = mia.get(url("memory", key="deploy"))
    timeline = page.context["story"].timeline
    assert [(e.event.kind, e.event.by) for e in timeline] == [("hard", "user:mia"), ("created", "agent")]
    body = page.content.decode()
    assert "pipeline replaced the script" in body
    assert "<del>old script</del>" in body and "<ins>new pipeline</ins>" in body


def test_minor_correction_needs_no_reason_and_is_a_soft_supersede(mia: Client, team: Team) -> None:
    first = save(team, "deploy", "Deploy with teh pipeline.")

    response = mia.post(
        url("memory_edit", key="deploy"),
        {
            "content": "Deploy with the pipeline.",
            "type": "context",
            "kind": "soft",
            "reason": "",
            "base_version": str(first.id),
        },
    )

    assert response.status_code == 302
    current = active(team, "deploy")
    assert (current.supersede_kind, current.supersede_reason) == ("soft", "minor correction")


def test_an_older_version_is_shown_with_its_state(mia: Client, team: Team) -> None:
    first = save(team, "deploy", "Old way.")
    save(team, "deploy", "New way.", reason="changed")

    page = mia.get(url("memory", key="deploy"), {"version": str(first.id)})

    assert page.status_code == 200
    assert page.context["shown"].id == first.id
    assert "You are looking at a <strong>superseded</strong> version" in page.content.decode()
    assert mia.get(url("memory", key="deploy"), {"version": "0" * 32}).status_code == 404


def test_delete_then_unknown_key_then_save_again(mia: Client, team: Team) -> None:
    save(team, "temp", "Temporary note.")

    confirm = mia.get(url("memory_delete", key="temp"))
    assert confirm.status_code == 200 and "Delete memory" in confirm.content.decode()
    response = mia.post(url("memory_delete", key="temp"))

    assert response.status_code == 302
    with operator_view():
        memory = Memory.objects.get(team=team, key="temp")
    assert (memory.state, memory.deleted_by) == ("deleted", "user:mia")
    page = mia.get(url("memory", key="temp"))
    assert page.status_code == 200
    assert "Save again" in page.content.decode()
    assert mia.get(url("memory", key="never-saved")).status_code == 404
    assert mia.get(url("memory", key="bad key!")).status_code == 404


def test_unsupersede_restores_the_previous_content_as_a_new_version(mia: Client, team: Team) -> None:
    save(team, "deploy", "Old way.")
    save(team, "deploy", "New way.", reason="changed")

    response = mia.post(url("memory_unsupersede", key="deploy"), {"reason": "the new way broke staging"})

    assert response.status_code == 302
    current = active(team, "deploy")
    assert (current.content, current.supersede_kind, current.supersede_reason) == (
        "Old way.",
        "unsupersede",
        "the new way broke staging",
    )


def test_annotate_and_rate_the_active_version(mia: Client, team: Team) -> None:
    save(team, "deploy", "Deploy on Mondays.")

    assert (
        mia.post(url("memory_annotate", key="deploy"), {"note": "Confirmed in the retro."}).status_code == 302
    )
    assert mia.post(url("memory_rate", key="deploy"), {"direction": "up"}).status_code == 302

    memory = active(team, "deploy")
    assert memory.upvotes == 1
    with operator_view():
        note = Annotation.objects.get(memory=memory)
    assert (note.note, note.created_by) == ("Confirmed in the retro.", "user:mia")
    page = mia.get(url("memory", key="deploy")).content.decode()
    assert "Confirmed in the retro." in page


def test_browser_filters_by_type_state_project_and_tags(mia: Client, team: Team) -> None:
    save(team, "a", "Alpha lesson #ops.", type_name="lesson", project="web")
    save(team, "b", "Decision about the db.", type_name="decision")
    save(team, "b", "Decision about the database.", reason="clarified")
    save(team, "c", "Context about #ops and #db.", project="web")

    def keys(**params: str) -> list[tuple[str, str]]:
        response = mia.get(url("memories"), params)
        assert response.status_code == 200
        return [(m.key, m.state) for m in response.context["page"].object_list]

    assert keys() == [("c", "active"), ("b", "active"), ("a", "active")]
    assert keys(type="lesson") == [("a", "active")]
    assert keys(state="superseded") == [("b", "superseded")]
    assert keys(project="web") == [("c", "active"), ("a", "active")]
    assert keys(tag="ops, db") == [("c", "active")]
    assert len(keys(state="all")) == 4


def test_browser_paginates(mia: Client, team: Team) -> None:
    for n in range(30):
        save(team, f"note-{n:02d}", f"Note number {n}.")

    first = mia.get(url("memories"))
    second = mia.get(url("memories"), {"page": 2})

    assert len(first.context["page"].object_list) == 25
    assert len(second.context["page"].object_list) == 5
    assert 'rel="next"' in first.content.decode()


def test_browser_search_uses_the_search_pipeline(
    mia: Client, team: Team, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        save(team, "deploy:friday", "Never deploy to production on Fridays.")
        save(team, "lunch", "The team has lunch at noon.")

    response = mia.get(url("memories"), {"q": "production deploy"})

    assert response.status_code == 200
    assert response.context["search_mode"] in ("hybrid", "keyword")
    assert response.context["page"].object_list[0].key == "deploy:friday"


def test_htmx_filter_requests_get_only_the_results_fragment(mia: Client, team: Team) -> None:
    save(team, "deploy", "Deploy on Mondays.")

    response = mia.get(url("memories"), {"type": "context"}, headers={"HX-Request": "true"})

    body = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in body and "deploy" in body


def test_overview_shows_counts_health_budget_and_charts(mia: Client, team: Team) -> None:
    save(team, "who", "We are the platform team.", type_name="identity")
    save(team, "deploy", "Deploy on Mondays.")
    save(team, "deploy", "Deploy on Tuesdays.", reason="moved")

    response = mia.get(url("overview"))

    assert response.status_code == 200
    body = response.content.decode()
    totals = response.context["totals"]
    assert (totals["active"], totals["superseded"], totals["deleted"]) == (2, 1, 0)
    assert response.context["health"]["pending"] == 3
    assert response.context["injection"].tokens_used > 0
    # Writes per day, active by type, confirmed per week (the freshness panel).
    assert body.count('<svg class="chart"') == 3
    assert "Writes per day" in body and "Recent changes" in body


def test_secret_that_predates_the_vault_is_scrubbed_from_pages(cast: Cast, team: Team) -> None:
    from teams import services as team_services
    from teams.scope import team_scope

    # Worded so no credential rule redacts it when saved (`The staging password is …` is).
    save(team, "old-note", "Staging answers to tr0ub4dor&3-horse, keep it safe.")
    with team_scope(team.id):
        team_services.set_vault_entry(
            team=team, key="staging-password", value="tr0ub4dor&3-horse", is_secret=True, actor="olivia"
        )

    body = cast.client("viewer").get(url("memory", key="old-note")).content.decode()

    assert "tr0ub4dor" not in body
    assert "[REDACTED:vault_secret]" in body


def test_a_text_the_team_already_holds_is_not_saved_twice_unless_asked(mia: Client, team: Team) -> None:
    save(team, "deploy", "Never deploy on Fridays.")
    data = {"key": "deploy-copy", "content": "Never deploy on Fridays.", "type": "context"}

    refused = mia.post(url("memory_create"), data)

    body = refused.content.decode()
    assert refused.status_code == 400
    assert "already holds this text" in body
    assert url("memory", key="deploy") in body
    with operator_view():
        assert not Memory.objects.filter(team=team, key="deploy-copy").exists()

    forced = mia.post(url("memory_create"), {**data, "allow_duplicate": "on"})

    assert forced.status_code == 302
    assert active(team, "deploy-copy").content == "Never deploy on Fridays."


def test_search_playground_shows_every_part_of_a_hybrid_score(
    mia: Client, team: Team, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        save(team, "deploy:friday", "Ada says: never deploy to production on Fridays.")
        save(team, "lunch", "The team has lunch at noon.")

    response = mia.get(url("search"), {"q": "Did Ada say when to deploy?", "mode": "hybrid"})

    assert response.status_code == 200
    assert response.context["outcome"].search_mode == "hybrid"
    first = response.context["rows"][0]
    assert first["result"].key == "deploy:friday"
    assert [bar["name"] for bar in first["bars"]] == ["vector", "keyword", "decay"]
    bars = {bar["name"]: bar["value"] for bar in first["parts"]}
    assert list(bars) == [
        "vector",
        "vector_relative",
        "keyword",
        "evidence",
        "merged",
        "entity",
        "decay",
        "rating",
        "mmr",
    ]
    assert bars["entity"] == pytest.approx(0.05)
    assert bars["merged"] == pytest.approx(
        (team.hybrid_vector_weight * bars["vector_relative"] + team.hybrid_keyword_weight * bars["keyword"])
        * bars["evidence"],
        abs=1e-5,
    )
    assert "Vector, relative" in response.content.decode()


def _rendered_results(body: str) -> list[dict[str, Any]]:
    """Each rendered result, top to bottom: its memory id, printed score and lead bars."""
    rendered = []
    for article in body.split("<article")[1:]:
        article = article.split("</article>")[0]
        lead = article.split("<details")[0]
        rendered.append(
            {
                "id": re.search(r'data-memory-id="([^"]+)"', article).group(1),  # type: ignore[union-attr]
                "score": float(re.search(r'class="rank-score"[^>]*>score ([0-9.]+)<', article).group(1)),  # type: ignore[union-attr]
                "bars": re.findall(r'class="bar lead-bar"', lead),
                "labels": re.findall(r'<span role="listitem"[^>]*>(\w+)</span>', lead),
                "folded": "<details" in article,
            }
        )
    return rendered


def test_search_playground_lists_results_in_rank_order_with_one_score_and_three_bars(
    mia: Client, team: Team, django_capture_on_commit_callbacks: Any
) -> None:
    # Near-duplicates: diversification lets the rollback entry past two of them, so the
    # rank order is not the order of the relevance scores.
    base = "The release checklist: run the migrations, tag the release, announce the release in #eng"
    with django_capture_on_commit_callbacks(execute=True):
        for n, end in enumerate([".", " channel.", " today."], start=1):
            save(team, f"checklist-{n}", base + end, allow_duplicate=True)
        save(
            team,
            "rollback",
            "To roll back a bad release, redeploy the previous tag and restore the release notes.",
        )

    response = mia.get(url("search"), {"q": "release checklist tag", "mode": "hybrid", "max_results": 4})

    results = response.context["outcome"].results
    scores = [r.score for r in results]
    assert scores != sorted(scores, reverse=True)  # the case this page used to get wrong
    rendered = _rendered_results(response.content.decode())
    assert [r["id"] for r in rendered] == [str(r.memory_id) for r in results]
    printed = [r["score"] for r in rendered]
    assert printed == sorted(printed, reverse=True)
    assert printed[0] == pytest.approx(results[0].score, abs=1e-3)
    for row in rendered:
        assert len(row["bars"]) == 3
        assert row["labels"] == ["Meaning", "Words", "Freshness"]
        assert row["folded"]


def test_search_playground_shows_a_key_once_unless_old_versions_are_asked_for(
    mia: Client, team: Team, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        old = save(team, "deploy-friday", "Never deploy on Fridays.")
        new = save(team, "deploy-friday", "Never deploy on Fridays or before holidays.", reason="holidays")

    default = _rendered_results(mia.get(url("search"), {"q": "deploy on a Friday?"}).content.decode())
    asked = mia.get(url("search"), {"q": "deploy on a Friday?", "include_superseded": "on"})

    assert [r["id"] for r in default] == [str(new.id)]
    rendered = _rendered_results(asked.content.decode())
    assert [r["id"] for r in rendered] == [str(new.id), str(old.id)]
    assert all(len(r["bars"]) == 3 for r in rendered)
    assert rendered[1]["score"] <= rendered[0]["score"]
    assert "superseded-version" in asked.content.decode()
