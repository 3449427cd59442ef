"""The injection block's "Please review" section: at most three open nudges,
contradictions first, only from what is left of the budget, never displacing an entry,
within the project asked for, and never another team's."""

from __future__ import annotations

from typing import Any

import pytest

from agents.injection import build_injection
from agents.injection.review import REVIEW_HEADING, REVIEW_MAX
from freshness.contradictions import INJECT_CONFIDENCE
from freshness.fact_contradictions import open_fact_contradiction
from freshness.models import Nudge, NudgeKind
from memories.facts.services import set_fact
from memories.writes import save_memory
from teams.models import Team
from teams.scope import team_scope
from tests.conftest import Agent

pytestmark = pytest.mark.django_db


def entry(team: Team, key: str, content: str, type_name: str = "context", project: str = "") -> Any:
    with team_scope(team.id):
        return save_memory(
            team=team, key=key, content=content, type_name=type_name, project=project, updated_by="t"
        ).memory


def nudge(
    team: Team, kind: str, memory: Any, message: str, other: Any = None, confidence: float | None = None
) -> Nudge:
    if kind == NudgeKind.CONTRADICTION and confidence is None:
        confidence = INJECT_CONFIDENCE
    with team_scope(team.id):
        return Nudge.objects.create(
            team=team, kind=kind, memory=memory, other_memory=other, message=message, confidence=confidence
        )


def test_the_block_ends_with_up_to_three_nudges_contradictions_first(team: Team, member: Agent) -> None:
    memories = [entry(team, f"fact-{n}", f"Fact number {n} about the build.") for n in range(5)]
    for n in range(4):
        nudge(team, NudgeKind.DUE, memories[n], f"'fact-{n}' was last confirmed 40 days ago. Still true?")
    clash = nudge(
        team, NudgeKind.CONTRADICTION, memories[4], "You previously recorded X. Update to Y?", memories[0]
    )

    body = member.client.get(member.url("injection/"), {"format": "json"}).json()

    assert [item["kind"] for item in body["review"]] == ["contradiction", "due", "due"]
    assert len(body["review"]) == REVIEW_MAX
    assert body["review"][0]["keys"] == ["fact-4", "fact-0"]
    text = body["text"]
    assert text.index(REVIEW_HEADING) > text.index("fact-4")
    assert f"(nudge {clash.id})" in text
    assert text.rstrip().endswith(")")


def test_a_tight_budget_drops_the_review_never_an_entry(team: Team) -> None:
    who = entry(team, "who", "I am the build agent of the platform team.", "identity")
    lesson = entry(team, "lesson", "Always pin the compiler version in CI images.", "lesson")
    nudge(
        team, NudgeKind.DUE, lesson, "'lesson' was last confirmed 95 days ago. " + "Is it still true? " * 20
    )

    with team_scope(team.id):
        roomy = build_injection(team=team)
        tight = build_injection(team=team, max_tokens=60)

    assert [item.kind for item in roomy.review] == ["due"]
    assert tight.review == [] and REVIEW_HEADING not in tight.text
    assert [e.key for e in tight.included] == [who.key, lesson.key]
    assert tight.tokens_used <= 60 or tight.included[-1].type == "identity"


def test_a_project_injection_reviews_only_that_project_and_team_wide_entries(team: Team) -> None:
    web = entry(team, "web-db", "The web database is db-9.", project="web")
    api = entry(team, "api-db", "The api database is db-4.", project="api")
    shared = entry(team, "shared", "Deploys go through the pipeline.")
    nudge(team, NudgeKind.DUE, web, "'web-db' is due: db-9?")
    nudge(team, NudgeKind.DUE, api, "'api-db' is due: db-4?")
    nudge(team, NudgeKind.DUE, shared, "'shared' is due.")

    with team_scope(team.id):
        for_api = build_injection(team=team, project="api")

    assert sorted(item.keys[0] for item in for_api.review) == ["api-db", "shared"]
    assert "db-9" not in for_api.text


def test_another_teams_nudges_never_show(team: Team, other_team: Team, member: Agent) -> None:
    entry(team, "ours", "Our build runs nightly.")
    theirs = entry(other_team, "theirs", "Bravo's secret launch date is the ninth.")
    nudge(other_team, NudgeKind.DUE, theirs, "'theirs' launch on the ninth: still true?")

    body = member.client.get(member.url("injection/"), {"format": "json"}).json()

    assert body["review"] == [] and "ninth" not in body["text"] and REVIEW_HEADING not in body["text"]


def test_only_contradictions_confident_enough_are_asked_about(team: Team, member: Agent) -> None:
    memories = [entry(team, f"fact-{n}", f"Fact number {n} about the build.") for n in range(4)]
    sure = nudge(team, NudgeKind.CONTRADICTION, memories[1], "Sure clash?", memories[0], INJECT_CONFIDENCE)
    unsure = nudge(
        team, NudgeKind.CONTRADICTION, memories[3], "Unsure clash?", memories[2], INJECT_CONFIDENCE - 0.01
    )
    unknown = nudge(team, NudgeKind.CONTRADICTION, memories[2], "Older clash?", memories[0], None)
    with team_scope(team.id):
        Nudge.objects.filter(id=unknown.id).update(confidence=None)  # raised before confidence was kept

    body = member.client.get(member.url("injection/"), {"format": "json"}).json()

    assert [item["id"] for item in body["review"]] == [str(sure.id)]
    assert "Unsure clash?" not in body["text"] and "Older clash?" not in body["text"]
    assert str(unsure.id) in {n["id"] for n in member.client.get(member.url("nudges/")).json()["results"]}


def test_a_fact_contradiction_follows_the_contradictions_and_names_no_high_value(
    team: Team, member: Agent
) -> None:
    memories = [entry(team, f"fact-{n}", f"Fact number {n} about the build.") for n in range(2)]
    nudge(team, NudgeKind.DUE, memories[0], "'fact-0' was last confirmed 40 days ago. Still true?")
    with team_scope(team.id):
        secret = set_fact(
            team=team, entity="vault", key="region", value="alpha-Hidden-5", actor="t", sensitivity="high"
        ).fact
        open_fact_contradiction(team=team, fact=secret, extracted_value="Other-Value-6", source_session="")

    body = member.client.get(member.url("injection/"), {"format": "json"}).json()

    assert [item["kind"] for item in body["review"]] == ["fact_contradiction", "due"]
    assert body["review"][0]["keys"] == ["vault/region"]
    assert "alpha-Hidden-5" not in body["text"] and "Other-Value-6" not in body["text"]
