"""Skills: a memory with a `skill_trigger` is loaded by name, fires in search when one
of its keywords is in the query, and is injected when always_on. Only active entries
fire; a name is unique among the team's active entries."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.db import IntegrityError, transaction

from memories.models import Memory
from memories.skills import matching_keyword
from teams.models import Team
from tests.conftest import Agent, operator_view
from tests.factories import MemoryFactory

CHECKLIST = "Release checklist: run the migrations, tag the release, announce it in #eng."
ROLLBACK = "To roll back, redeploy the previous tag and restore the database snapshot."


@pytest.fixture
def post(django_capture_on_commit_callbacks: Any):  # type: ignore[no-untyped-def]
    """POST memories/ and run the indexing it enqueued."""

    def post(agent: Agent, key: str, content: str, **extra: Any) -> Any:
        with django_capture_on_commit_callbacks(execute=True):
            return agent.client.post(
                agent.url("memories/"), {"key": key, "content": content, **extra}, format="json"
            )

    return post


def skill(name: str, *keywords: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "keywords": list(keywords), **extra}


def search(agent: Agent, query: str, **extra: Any) -> list[dict[str, Any]]:
    response = agent.client.post(agent.url("search/"), {"query": query, **extra}, format="json")
    assert response.status_code == 200, response.content
    return response.json()["results"]


def skill_results(results: list[dict[str, Any]]) -> list[str]:
    return [r["key"] for r in results if r["via_skill_trigger"]]


def stored_triggers(team: Team, key: str) -> list[tuple[bool, str | None]]:
    """(is_active, skill name) of every version of the key, oldest first."""
    with operator_view():
        rows = Memory.objects.filter(team=team, key=key).order_by("created_at")
        return [(m.is_active, m.skill_trigger["name"] if m.skill_trigger else None) for m in rows]


def inject(agent: Agent, **params: Any) -> dict[str, Any]:
    response = agent.client.get(agent.url("injection/"), {"format": "json", **params})
    assert response.status_code == 200, response.content
    return response.json()


# --------------------------------------------------------------------------- saving


def test_a_skill_trigger_is_stored_normalised_and_shown(member: Agent, post) -> None:  # type: ignore[no-untyped-def]
    response = post(
        member,
        "release",
        CHECKLIST,
        skill_trigger={"name": "release-checklist", "keywords": ["Release", " release  Train ", "release"]},
    )

    assert response.status_code == 201, response.content
    assert response.json()["skill_trigger"] == {
        "name": "release-checklist",
        "keywords": ["release", "release train"],
        "projects": [],
        "always_on": False,
    }
    with operator_view():
        assert Memory.objects.get(key="release").skill_trigger["keywords"] == ["release", "release train"]


@pytest.mark.parametrize(
    ("trigger", "field"),
    [
        ("release", None),
        ({"keywords": ["x"]}, "name"),
        ({"name": "Release"}, "name"),
        ({"name": "release checklist"}, "name"),
        ({"name": "-release"}, "name"),
        ({"name": "x" * 64}, "name"),
        ({"name": "r", "keywords": "release"}, "keywords"),
        ({"name": "r", "keywords": [" "]}, "keywords"),
        ({"name": "r", "keywords": [3]}, "keywords"),
        ({"name": "r", "keywords": ["x"] * 21}, "keywords"),
        ({"name": "r", "projects": [""]}, "projects"),
        ({"name": "r", "always_on": "yes"}, "always_on"),
        ({"name": "r", "trigger": "x"}, "trigger"),
    ],
)
def test_a_bad_skill_trigger_is_refused(member: Agent, post, trigger: Any, field: str | None) -> None:  # type: ignore[no-untyped-def]
    response = post(member, "release", CHECKLIST, skill_trigger=trigger)

    assert response.status_code == 400
    assert response.json()["error"] == "invalid"
    errors = response.json()["fields"]["skill_trigger"]
    if field is not None:
        assert field in errors
    with operator_view():
        assert not Memory.objects.filter(team=member.team).exists()


def test_a_keyword_of_punctuation_only_is_refused(member: Agent, post) -> None:  # type: ignore[no-untyped-def]
    response = post(member, "release", CHECKLIST, skill_trigger=skill("r", "!!"))

    assert response.status_code == 400
    assert response.json()["error"] == "invalid"
    assert "letter or digit" in str(response.json()["fields"]["skill_trigger"])
    with operator_view():
        assert not Memory.objects.filter(team=member.team).exists()


def test_a_second_active_skill_of_the_same_name_is_409(member: Agent, post) -> None:  # type: ignore[no-untyped-def]
    first = post(member, "release", CHECKLIST, skill_trigger=skill("release-checklist", "release"))

    response = post(member, "rollback", ROLLBACK, skill_trigger=skill("release-checklist", "rollback"))

    assert response.status_code == 409
    body = response.json()
    assert body["error"] == "skill_exists"
    assert "release-checklist" in body["detail"] and "'release'" in body["detail"]
    assert body["current"]["id"] == first.json()["id"]
    with operator_view():
        assert not Memory.objects.filter(team=member.team, key="rollback").exists()


def test_another_team_may_use_the_same_skill_name(member: Agent, outsider: Agent, post) -> None:  # type: ignore[no-untyped-def]
    ours = post(member, "release", CHECKLIST, skill_trigger=skill("release-checklist")).json()

    response = post(outsider, "release", CHECKLIST, skill_trigger=skill("release-checklist"))

    assert response.status_code == 201
    theirs = response.json()
    assert theirs["skill_trigger"]["name"] == "release-checklist" and theirs["id"] != ours["id"]
    assert stored_triggers(member.team, "release") == [(True, "release-checklist")]
    assert stored_triggers(outsider.team, "release") == [(True, "release-checklist")]
    assert member.client.get(member.url("skills/release-checklist/")).json()["id"] == ours["id"]
    assert outsider.client.get(outsider.url("skills/release-checklist/")).json()["id"] == theirs["id"]


def test_a_supersede_carries_the_skill_over_unless_given(member: Agent, post) -> None:  # type: ignore[no-untyped-def]
    post(member, "release", CHECKLIST, skill_trigger=skill("release-checklist", "release"))

    kept = post(member, "release", CHECKLIST + " Then close the milestone.", supersede_reason="one more step")
    changed = post(
        member, "release", CHECKLIST, supersede_reason="renamed", skill_trigger=skill("shipping", "ship")
    )
    removed = post(member, "release", CHECKLIST, supersede_reason="not a skill", skill_trigger=None)

    assert kept.status_code == changed.status_code == 201
    assert kept.json()["skill_trigger"]["name"] == "release-checklist"
    assert changed.json()["skill_trigger"] == {
        "name": "shipping",
        "keywords": ["ship"],
        "projects": [],
        "always_on": False,
    }
    assert removed.status_code == 201 and removed.json()["skill_trigger"] is None
    gone = member.client.get(member.url("skills/shipping/"))
    assert gone.status_code == 404
    assert gone.json() == {"error": "not_found", "detail": "no active entry carries this skill"}
    assert stored_triggers(member.team, "release") == [
        (False, "release-checklist"),
        (False, "release-checklist"),
        (False, "shipping"),
        (True, None),
    ]


def test_a_superseded_skill_gives_its_name_up(member: Agent, post) -> None:  # type: ignore[no-untyped-def]
    post(member, "release", CHECKLIST, skill_trigger=skill("release-checklist"))
    post(member, "release", CHECKLIST, supersede_reason="renamed", skill_trigger=skill("shipping"))

    response = post(member, "rollback", ROLLBACK, skill_trigger=skill("release-checklist"))

    assert response.status_code == 201
    assert (response.json()["key"], response.json()["skill_trigger"]["name"]) == (
        "rollback",
        "release-checklist",
    )
    loaded = member.client.get(member.url("skills/release-checklist/")).json()
    assert (loaded["key"], loaded["id"]) == ("rollback", response.json()["id"])
    assert stored_triggers(member.team, "release") == [(False, "release-checklist"), (True, "shipping")]
    assert stored_triggers(member.team, "rollback") == [(True, "release-checklist")]


def test_unsupersede_refuses_to_restore_a_skill_name_now_taken(member: Agent, post) -> None:  # type: ignore[no-untyped-def]
    post(member, "release", CHECKLIST, skill_trigger=skill("release-checklist"))
    post(member, "release", CHECKLIST, supersede_reason="not a skill", skill_trigger=None)
    post(member, "rollback", ROLLBACK, skill_trigger=skill("release-checklist"))

    response = member.client.post(
        member.url("memories/release/unsupersede/"), {"reason": "it was a skill"}, format="json"
    )

    assert response.status_code == 409
    assert response.json()["error"] == "skill_exists"
    assert response.json()["current"]["key"] == "rollback"
    assert "release-checklist" in response.json()["detail"]
    # Nothing was restored: the key keeps its two versions, the newest (no skill) active.
    assert stored_triggers(member.team, "release") == [(False, "release-checklist"), (True, None)]
    assert stored_triggers(member.team, "rollback") == [(True, "release-checklist")]


def test_unsupersede_restores_the_skill_of_the_version(member: Agent, post) -> None:  # type: ignore[no-untyped-def]
    first = post(member, "release", CHECKLIST, skill_trigger=skill("release-checklist", "release")).json()
    second = post(member, "release", CHECKLIST, supersede_reason="not a skill", skill_trigger=None).json()

    response = member.client.post(
        member.url("memories/release/unsupersede/"), {"reason": "it was a skill"}, format="json"
    )

    assert response.status_code == 201
    body = response.json()
    assert body["skill_trigger"] == first["skill_trigger"]
    assert (body["supersedes_id"], body["supersede_reason"]) == (second["id"], "it was a skill")
    assert member.client.get(member.url("skills/release-checklist/")).json()["id"] == body["id"]
    assert stored_triggers(member.team, "release") == [
        (False, "release-checklist"),
        (False, None),
        (True, "release-checklist"),
    ]
    with operator_view():
        restored = Memory.objects.get(id=body["id"])
    assert restored.restored_from_id == uuid.UUID(first["id"]) and restored.content == CHECKLIST


def test_the_database_keeps_one_active_skill_per_name(team: Team) -> None:
    trigger = {"name": "release-checklist", "keywords": [], "projects": [], "always_on": False}
    MemoryFactory(team=team, key="a", skill_trigger=trigger)
    MemoryFactory(team=team, key="b", skill_trigger=trigger, is_active=False)  # superseded: allowed

    with operator_view(), pytest.raises(IntegrityError), transaction.atomic():
        Memory.objects.create(team=team, key="c", content="x", content_hash="h", skill_trigger=trigger)


def test_the_database_refuses_a_trigger_without_a_name(team: Team) -> None:
    with operator_view(), pytest.raises(IntegrityError), transaction.atomic():
        Memory.objects.create(
            team=team, key="c", content="x", content_hash="h", skill_trigger={"keywords": []}
        )


# --------------------------------------------------------------------------- GET skills/{name}/


def test_get_skill_loads_the_active_entry_and_counts_an_access(
    member: Agent,
    readonly_member: Agent,
    post,  # type: ignore[no-untyped-def]
) -> None:
    saved = post(member, "release", CHECKLIST, skill_trigger=skill("release-checklist", "release")).json()

    response = readonly_member.client.get(readonly_member.url("skills/release-checklist/"))

    assert response.status_code == 200
    body = response.json()
    assert (body["id"], body["key"], body["content"]) == (saved["id"], "release", CHECKLIST)
    assert body["skill_trigger"]["name"] == "release-checklist"
    assert body["access_count"] == 1 and body["annotations"] == []
    with operator_view():
        assert Memory.objects.get(id=saved["id"]).access_count == 1


def test_get_skill_follows_the_active_version(member: Agent, post) -> None:  # type: ignore[no-untyped-def]
    post(member, "release", CHECKLIST, skill_trigger=skill("release-checklist"))
    new = post(member, "release", CHECKLIST + " Then close the milestone.", supersede_reason="one more step")

    body = member.client.get(member.url("skills/release-checklist/")).json()

    assert body["id"] == new.json()["id"] and body["is_active"] is True


def test_get_skill_is_404_for_unknown_deleted_or_superseded_skills(member: Agent, post) -> None:  # type: ignore[no-untyped-def]
    post(member, "release", CHECKLIST, skill_trigger=skill("release-checklist"))
    post(member, "rollback", ROLLBACK, skill_trigger=skill("rollback"))
    member.client.delete(member.url("memories/release/"))
    post(member, "rollback", ROLLBACK, supersede_reason="not a skill", skill_trigger=None)

    for name in ("release-checklist", "rollback", "never-saved"):
        response = member.client.get(member.url(f"skills/{name}/"))
        assert response.status_code == 404
        assert response.json() == {"error": "not_found", "detail": "no active entry carries this skill"}


def test_get_skill_refuses_a_malformed_name(member: Agent) -> None:
    response = member.client.get(member.url("skills/Not%20A%20Name/"))

    assert response.status_code == 400
    assert response.json()["error"] == "invalid"
    assert "name" in response.json()["fields"]


def test_another_teams_token_gets_404_and_nothing_of_the_team(member: Agent, outsider: Agent, post) -> None:  # type: ignore[no-untyped-def]
    post(member, "alpha-release", "alpha ships on the ninth", skill_trigger=skill("alpha-ship", "ship"))

    on_alpha = outsider.client.get(member.url("skills/alpha-ship/"))
    on_own = outsider.client.get(outsider.url("skills/alpha-ship/"))

    for response in (on_alpha, on_own):
        assert response.status_code == 404
        for marker in (b"alpha", b"Alpha", b"ninth", b"ships"):
            assert marker not in response.content
    assert on_alpha.json() == {"error": "not_found", "detail": "not found"}
    assert on_own.json() == {"error": "not_found", "detail": "no active entry carries this skill"}
    with operator_view():
        assert Memory.objects.get(key="alpha-release").access_count == 0


# --------------------------------------------------------------------------- search


@pytest.fixture
def skills(member: Agent, post) -> None:  # type: ignore[no-untyped-def]
    post(
        member,
        "release",
        CHECKLIST,
        type="lesson",
        skill_trigger=skill("release-checklist", "deploy", "release train"),
    )
    post(member, "rollback", ROLLBACK, type="reference", skill_trigger=skill("rollback", "roll back"))
    post(
        member,
        "web-deploy",
        "The web app deploys with fly deploy.",
        skill_trigger=skill("web", "fly", projects=["web"]),
    )
    post(member, "notes", "Deploy notes: the deploy pipeline runs on every merge to main.")


def test_a_skill_fires_when_a_keyword_is_in_the_query(member: Agent, skills: None) -> None:
    results = search(member, "How do I deploy today?", max_results=5)

    top = results[0]
    assert top["key"] == "release"
    assert top["via_skill_trigger"] is True
    assert top["source"] == "skill_trigger"
    assert (top["skill"], top["matched_keyword"]) == ("release-checklist", "deploy")
    assert skill_results(results) == ["release"]
    others = results[1:]
    assert others and all(r["via_skill_trigger"] is False and "skill" not in r for r in others)
    assert [r["key"] for r in results].count("release") == 1  # never twice


def test_a_phrase_matches_whatever_its_case_and_spacing(member: Agent, skills: None) -> None:
    results = search(member, "When does the Release   TRAIN leave?")

    assert skill_results(results) == ["release"]
    assert results[0]["matched_keyword"] == "release train"


def test_a_keyword_matches_only_as_a_whole_word(member: Agent, skills: None) -> None:
    results = search(member, "redeployment and deployments of the trainee")

    assert skill_results(results) == []


def test_no_keyword_in_the_query_fires_nothing(member: Agent, skills: None) -> None:
    results = search(member, "release checklist migrations")

    assert skill_results(results) == []
    assert all(r["source"] != "skill_trigger" for r in results)


def test_a_skill_with_projects_fires_only_in_those_projects(member: Agent, skills: None) -> None:
    assert skill_results(search(member, "use fly", project="web")) == ["web-deploy"]
    assert skill_results(search(member, "use fly", project="api")) == []
    assert skill_results(search(member, "use fly")) == []


def test_a_superseded_or_deleted_skill_never_fires(member: Agent, skills: None, post) -> None:  # type: ignore[no-untyped-def]
    post(member, "release", CHECKLIST, supersede_reason="not a skill", skill_trigger=None)
    member.client.delete(member.url("memories/rollback/"))

    deploy = search(member, "deploy", max_results=10)
    roll_back = search(member, "how to roll back", max_results=10)

    assert skill_results(deploy) == [] and skill_results(roll_back) == []
    assert all(not r["via_skill_trigger"] for r in deploy + roll_back)
    assert "rollback" not in [r["key"] for r in roll_back]


def test_the_type_filter_applies_to_skills(member: Agent, skills: None) -> None:
    assert skill_results(search(member, "deploy", types=["decision"])) == []
    assert skill_results(search(member, "deploy", types=["lesson"])) == ["release"]


def test_skills_come_on_top_of_max_results(member: Agent, skills: None) -> None:
    results = search(member, "deploy or roll back", max_results=1)

    assert skill_results(results) == ["rollback", "release"]  # the longer keyword first
    assert len(results) == 3 and results[2]["via_skill_trigger"] is False


def test_at_most_the_configured_number_of_skills_fire(member: Agent, post, settings: Any) -> None:  # type: ignore[no-untyped-def]
    for n in range(7):
        post(
            member,
            f"tip-{n}",
            f"Tip number {n} about kubernetes pods.",
            skill_trigger=skill(f"tip-{n}", "pods"),
            allow_duplicate=True,
        )

    default = search(member, "pods are crashing")
    settings.MEMORYHUB_SKILLS_PER_SEARCH = 2
    fewer = search(member, "pods are crashing")

    assert len(skill_results(default)) == 5
    assert len(skill_results(fewer)) == 2


def test_the_most_specific_keyword_wins_the_order(member: Agent, post) -> None:  # type: ignore[no-untyped-def]
    post(member, "general", "General deploy advice.", skill_trigger=skill("general", "deploy"))
    post(member, "db", "Deploying database changes safely.", skill_trigger=skill("db", "deploy the database"))

    results = search(member, "how to deploy the database")

    assert skill_results(results) == ["db", "general"]


def test_matching_keyword_rule() -> None:
    assert matching_keyword(["c++"], "is c++ fast") == "c++"
    assert matching_keyword(["c++"], "is c++11 fast") is None
    assert matching_keyword(["deploy", "deploy now"], "please deploy now") == "deploy now"
    assert matching_keyword(["deploy"], "deploying") is None


# --------------------------------------------------------------------------- injection


def test_always_on_skills_are_injected_after_identity_and_before_lessons(member: Agent, post) -> None:  # type: ignore[no-untyped-def]
    post(member, "who", "I am the release agent.", type="identity")
    post(member, "fridays", "Never deploy on Fridays.", type="lesson")
    post(
        member,
        "release",
        CHECKLIST,
        type="reference",
        skill_trigger=skill("release-checklist", always_on=True),
    )
    post(member, "rollback", ROLLBACK, type="lesson", skill_trigger=skill("rollback"))  # not always_on

    body = inject(member)

    assert [(e["key"], e["section"], e["reason"], e["rank"]) for e in body["entries"]] == [
        ("who", "core", "identity", 1),
        ("release", "skill", "skill", 2),
        ("rollback", "core", "ranked", 3),  # newest lesson first
        ("fridays", "core", "ranked", 4),
    ]
    text = body["text"]
    assert text.index("### Identity") < text.index("### Skills") < text.index("### Lessons")
    assert "[REFERENCE] [release]:" in text
    assert text.count("[release]") == 1
    assert body["counts"]["candidates"] == 4


def test_an_always_on_skill_counts_against_the_budget(member: Agent, post) -> None:  # type: ignore[no-untyped-def]
    post(member, "who", "I am the release agent.", type="identity")
    long_text = " ".join(["Check the dashboards, the error rates and the queue depth."] * 40)
    post(member, "watch", long_text, skill_trigger=skill("watch", always_on=True))
    post(member, "fridays", "Never deploy on Fridays.", type="lesson")

    body = inject(member, max_tokens=100)

    assert [e["key"] for e in body["entries"]] == ["who", "fridays"]
    assert {e["key"]: (e["section"], e["reason"]) for e in body["left_out"]} == {"watch": ("skill", "budget")}
    assert "### Skills" not in body["text"]


def test_an_always_on_skill_counts_against_the_cap(member: Agent, post) -> None:  # type: ignore[no-untyped-def]
    post(member, "watch", "Check the dashboards.", skill_trigger=skill("watch", always_on=True))
    post(member, "fridays", "Never deploy on Fridays.", type="lesson")

    body = inject(member, max_entries=1)

    assert [e["key"] for e in body["entries"]] == ["watch"]
    assert [(e["key"], e["reason"]) for e in body["left_out"]] == [("fridays", "cap")]


def test_an_always_on_skill_with_projects_is_injected_only_there(member: Agent, post) -> None:  # type: ignore[no-untyped-def]
    post(
        member,
        "web-deploy",
        "The web app deploys with fly deploy.",
        skill_trigger=skill("web", always_on=True, projects=["web"]),
    )

    assert [e["key"] for e in inject(member, project="web")["entries"]] == ["web-deploy"]
    assert inject(member, project="api")["entries"] == []
    # Not a lesson, decision or context entry: out of the other sections as well.
    assert inject(member)["entries"] == []


def test_an_identity_skill_stays_in_identity(member: Agent, post) -> None:  # type: ignore[no-untyped-def]
    post(member, "who", "I am the release agent.", type="identity", skill_trigger=skill("me", always_on=True))

    body = inject(member, max_tokens=50, max_entries=1)

    assert [(e["key"], e["section"], e["reason"]) for e in body["entries"]] == [("who", "core", "identity")]
    assert "### Skills" not in body["text"]


def test_a_superseded_always_on_skill_is_not_injected(member: Agent, post) -> None:  # type: ignore[no-untyped-def]
    post(
        member,
        "watch",
        "Check the dashboards.",
        type="reference",
        skill_trigger=skill("watch", always_on=True),
    )
    post(
        member, "watch", "Check the dashboards.", supersede_reason="not always", skill_trigger=skill("watch")
    )

    body = inject(member)

    assert body["entries"] == [] and body["counts"]["candidates"] == 0


def test_a_query_brings_a_triggered_skill_into_the_relevant_section(member: Agent, post) -> None:  # type: ignore[no-untyped-def]
    post(member, "rollback", ROLLBACK, type="reference", skill_trigger=skill("rollback", "roll back"))

    body = inject(member, query="we need to roll back")

    assert [(e["key"], e["section"]) for e in body["entries"]] == [("rollback", "relevant")]
