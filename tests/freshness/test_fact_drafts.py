"""Fact drafts and fact contradictions (docs/freshness.md, "Fact drafts" and "Fact
contradictions"): the extractor proposes `(entity, key) -> value`; a new fact becomes
a pending fact draft (accepted through the fact service, the draft its provenance), the
same value confirms the team's fact, another value opens a fact_contradiction nudge.
Another team's token and ids get 404 and nothing of the team."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from freshness.draft_extraction.fact_rules import extract_fact_candidates
from freshness.draft_extraction.llm import ExtractorBadAnswer, parse_facts
from freshness.draft_extraction.transcript import PreparedTranscript
from freshness.models import Draft, DraftKind, DraftState, Nudge, NudgeKind, NudgeState
from memories.facts.models import Fact
from memories.facts.services import set_fact
from teams.scope import team_scope
from tests.conftest import Agent, operator_view

pytestmark = pytest.mark.django_db

SECRET_VALUE = "alpha-only-Vault-9931"
TRANSCRIPTS = Path(__file__).parent / "extraction_transcripts"


def extract(agent: Agent, transcript: str, session: str = "", team: str | None = None) -> Any:
    body = {"transcript": transcript, "source_session": session}
    return agent.client.post(agent.url("drafts/extract/", team=team), body, format="json")


def review(agent: Agent, draft_id: object, verb: str, body: Any = None, team: str | None = None) -> Any:
    return agent.client.post(agent.url(f"drafts/{draft_id}/{verb}/", team=team), body or {}, format="json")


def resolve(agent: Agent, nudge_id: object, action: str, team: str | None = None) -> Any:
    url = agent.url(f"nudges/{nudge_id}/resolve/", team=team)
    return agent.client.post(url, {"action": action}, format="json")


def a_fact(agent: Agent, entity: str, key: str, value: str, **extra: Any) -> Fact:
    with team_scope(agent.team.id):
        return set_fact(team=agent.team, entity=entity, key=key, value=value, actor="t", **extra).fact


def facts_of(text: str) -> list[tuple[str, str, str]]:
    return [(c.entity, c.key, c.value) for c in extract_fact_candidates(text)]


# --------------------------------------------------------------------------- the rules


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("We use Paddle for payments.", [("payments", "provider", "Paddle")]),
        ("Project Alpha's database is Postgres 16.", [("project-alpha", "database", "Postgres 16")]),
        ("our payments provider is Paddle, for now.", [("payments", "provider", "Paddle")]),
        ("Our database is Postgres 16.", [("team", "database", "Postgres 16")]),
        ("We switched our CI from Jenkins to GitHub Actions.", [("ci", "provider", "GitHub Actions")]),
        ("we moved from Heroku to Fly.io for hosting", [("hosting", "provider", "Fly.io")]),
        ("We currently use Sentry for error tracking", [("error-tracking", "provider", "Sentry")]),
        ("project-alpha's region is `eu-west-1`.", [("project-alpha", "region", "eu-west-1")]),
        (
            "We moved the static assets from S3 to Cloudflare R2 in March; egress dropped.",
            [("static-assets", "provider", "Cloudflare R2")],
        ),
    ],
)
def test_the_rules_propose_plainly_stated_facts(text: str, expected: list[tuple[str, str, str]]) -> None:
    assert facts_of(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "Our database is slow.",  # a plain word is no value
        "Should we use Paddle for payments?",
        "If we use Stripe for billing, the fees go up.",
        "Maybe we use Stripe for billing.",
        "We don't use Stripe for billing.",
        "Our problem is Kafka.",
        "It's database is Foo.",
        "We migrated from MySQL to Postgres 16 last week.",  # no subject: about what?
        "We switched our CI from Jenkins to Buildkite for deploys.",  # two subjects
        "Project Alpha's database is not Postgres.",
        "We switched the scheduler from pytz to zoneinfo.",  # a plain word is no value
        "We migrated the nightly jobs from cron to Celery beat so they show up.",
    ],
)
def test_the_rules_stay_quiet_on_questions_hypotheticals_and_vague_text(text: str) -> None:
    assert facts_of(text) == []


def test_the_fifty_sample_transcripts_propose_one_fact_and_it_is_right() -> None:
    found = [
        (path.name, fact) for path in sorted(TRANSCRIPTS.glob("*.md")) for fact in facts_of(path.read_text())
    ]
    assert found == [("04-migration-notes.md", ("static-assets", "provider", "Cloudflare R2"))]


def test_the_first_statement_of_a_fact_wins_and_the_rules_are_linear_in_the_text() -> None:
    text = "We use Paddle for payments. Later: we use Stripe for payments."
    assert facts_of(text) == [("payments", "provider", "Paddle")]
    hostile = ("We use A" + " A" * 3 + " for" * 5) * 20_000 + "Our x's y is " * 20_000
    started = time.monotonic()
    extract_fact_candidates(hostile[:250_000])
    assert time.monotonic() - started < 5


def test_the_language_model_answer_carries_facts_checked_and_bounded() -> None:
    text = PreparedTranscript("We use Paddle for payments.")
    answer = (
        '{"candidates": [], "facts": [{"entity": "Payments", "key": "provider", "value": " Paddle ",'
        ' "why": "stated"}, {"entity": "payments", "key": "provider", "value": "Stripe"}]}'
    )
    (fact,) = parse_facts(answer, text)
    assert (fact.entity, fact.key, fact.value, fact.source_span) == (
        "payments",
        "provider",
        "Paddle",
        (7, 13),
    )
    assert parse_facts('[{"type": "decision", "content": "x y z"}]', text) == []
    for bad in (
        '{"facts": [{"entity": "a b/c", "key": "k", "value": "v"}]}',
        '{"facts": [{"entity": "a", "key": "k", "value": ""}]}',
        '{"facts": "many"}',
        '{"facts": [3]}',
    ):
        with pytest.raises(ExtractorBadAnswer):
            parse_facts(bad, text)


# --------------------------------------------------------------------------- drafts


def test_a_new_fact_becomes_a_pending_fact_draft_and_accepting_sets_it_with_provenance(
    member: Agent,
) -> None:
    body = extract(member, "user: We use Paddle for payments.", session="sess-1").json()
    (draft,) = body["drafts"]
    assert draft["kind"] == "fact" and draft["type"] == "fact"
    assert (draft["entity"], draft["fact_key"], draft["value"]) == ("payments", "provider", "Paddle")
    assert draft["key"] == "payments/provider" and body["fact_nudges"] == [] and body["confirmed_facts"] == []

    accepted = review(member, draft["id"], "accept", {"value": "Paddle Billing"})

    assert accepted.status_code == 200, accepted.content
    assert accepted.json()["state"] == "accepted" and accepted.json()["value"] == "Paddle Billing"
    with operator_view():
        fact = Fact.objects.get(team=member.team, entity="payments", key="provider", is_active=True)
    assert fact.value == "Paddle Billing" and str(fact.source_draft) == draft["id"]
    assert fact.session == "sess-1" and fact.updated_by == "writer-bot"
    assert accepted.json()["fact_entry"]["id"] == str(fact.id)
    assert review(member, draft["id"], "accept").json()["error"] == "draft_not_pending"


def test_a_fact_draft_is_rejected_not_merged_and_a_memory_draft_takes_no_value(member: Agent) -> None:
    body = extract(member, "We use Paddle for payments.\n\nWe decided to ship on Tuesdays only.").json()
    fact_draft = next(d for d in body["drafts"] if d["kind"] == "fact")
    memory_draft = next(d for d in body["drafts"] if d["kind"] == "memory")
    assert review(member, fact_draft["id"], "merge", {"into_key": "x"}).status_code == 400
    assert review(member, memory_draft["id"], "accept", {"value": "x"}).status_code == 400
    assert review(member, fact_draft["id"], "accept", {"value": "   "}).status_code == 400
    assert review(member, fact_draft["id"], "reject").json()["state"] == "rejected"
    with operator_view():
        assert not Fact.objects.filter(team=member.team).exists()


def test_a_pending_fact_draft_seen_again_is_corroborated(member: Agent) -> None:
    (draft,) = extract(member, "We use Paddle for payments.", session="a").json()["drafts"]
    again = extract(member, "we use  PADDLE for payments", session="b").json()
    assert again["drafts"] == [] and [d["id"] for d in again["corroborated"]] == [draft["id"]]
    assert again["corroborated"][0]["corroborated"] == 1


def test_accepting_after_the_fact_got_another_value_is_a_409_that_names_no_value(member: Agent) -> None:
    (draft,) = extract(member, "We use Paddle for payments.").json()["drafts"]
    a_fact(member, "payments", "provider", SECRET_VALUE, sensitivity="high")
    answer = review(member, draft["id"], "accept")
    assert answer.status_code == 409 and answer.json()["error"] == "draft_fact_exists"
    assert SECRET_VALUE.encode() not in answer.content


# --------------------------------------------------------------------------- contradictions


def test_the_same_value_confirms_the_fact_without_a_draft(member: Agent) -> None:
    fact = a_fact(member, "payments", "provider", "Paddle")
    body = extract(member, "we use   paddle for payments? no: We use PADDLE for payments.").json()
    assert body["drafts"] == [] and body["fact_nudges"] == []
    assert [f["id"] for f in body["confirmed_facts"]] == [str(fact.id)]


def test_another_value_opens_a_fact_contradiction_and_supersede_sets_it_from_the_conversation(
    member: Agent, readonly_member: Agent
) -> None:
    old = a_fact(member, "payments", "provider", "Paddle")
    body = extract(member, "We switched from Paddle to Stripe for payments.", session="sess-9").json()
    assert [d for d in body["drafts"] if d["kind"] == "fact"] == []  # the switch is a memory draft too
    (nudge,) = body["fact_nudges"]
    assert nudge["kind"] == "fact_contradiction" and nudge["keys"] == ["payments/provider"]
    assert nudge["fact"]["current_value"] == "Paddle" and nudge["fact"]["extracted_value"] == "Stripe"
    assert "'Paddle'" in nudge["message"] and "'Stripe'" in nudge["message"]
    # Extracting it again opens no second nudge.
    assert extract(member, "We switched from Paddle to Stripe for payments.").json()["fact_nudges"] == []
    assert resolve(member, nudge["id"], "confirm").json()["error"] == "action_not_applicable"

    resolved = resolve(member, nudge["id"], "supersede")

    assert resolved.status_code == 200, resolved.content
    assert resolved.json()["state"] == "resolved" and resolved.json()["resolution"] == "supersede"
    with operator_view():
        new = Fact.objects.get(team=member.team, entity="payments", key="provider", is_active=True)
    assert new.value == "Stripe" and new.supersedes_id == old.id
    assert new.supersede_reason == "from conversation sess-9" and new.updated_by == "writer-bot"
    assert resolve(member, nudge["id"], "dismiss").json()["error"] == "nudge_closed"


def test_dismiss_keeps_the_fact_and_a_fact_that_moved_on_is_not_overwritten(member: Agent) -> None:
    a_fact(member, "payments", "provider", "Paddle")
    first = extract(member, "We use Stripe for payments.").json()["fact_nudges"][0]
    assert resolve(member, first["id"], "dismiss").json()["state"] == "dismissed"
    second = extract(member, "We use Adyen for payments.").json()["fact_nudges"][0]
    a_fact(member, "payments", "provider", "Mollie", reason="changed on the facts page")
    answer = resolve(member, second["id"], "supersede")
    assert answer.status_code == 400 and answer.json()["error"] == "action_not_applicable"
    with operator_view():
        assert Fact.objects.get(team=member.team, entity="payments", is_active=True).value == "Mollie"


def test_a_high_facts_values_never_reach_read_only_tokens_or_injection(
    member: Agent, readonly_member: Agent
) -> None:
    a_fact(member, "vault", "region", SECRET_VALUE, sensitivity="high")
    (nudge,) = extract(member, "Our vault region is Hunter-Blue-42.").json()["fact_nudges"]
    assert nudge["fact"]["current_value"] == SECRET_VALUE  # a writer may see it
    assert SECRET_VALUE not in nudge["message"] and "Hunter-Blue-42" not in nudge["message"]

    listed = readonly_member.client.get(readonly_member.url("nudges/"))
    injected = readonly_member.client.get(readonly_member.url("injection/"), {"format": "json"})

    assert listed.status_code == 200 and injected.status_code == 200
    (shown,) = listed.json()["results"]
    assert shown["fact"]["current_value"] is None and shown["fact"]["extracted_value"] is None
    for response in (listed, injected):
        assert SECRET_VALUE.encode() not in response.content
        assert b"Hunter-Blue-42" not in response.content
    assert "vault/region" in [k for item in injected.json()["review"] for k in item["keys"]]


def test_another_teams_token_and_ids_get_404_and_nothing_of_the_team(member: Agent, outsider: Agent) -> None:
    a_fact(member, "payments", "provider", SECRET_VALUE)
    body = extract(member, "We use Stripe for payments.\n\nWe use Paddle for billing.").json()
    (nudge,) = body["fact_nudges"]
    (draft,) = body["drafts"]
    alpha = member.team.slug
    answers = [
        resolve(outsider, nudge["id"], "supersede", team=alpha),
        resolve(outsider, nudge["id"], "supersede"),
        review(outsider, draft["id"], "accept", team=alpha),
        review(outsider, draft["id"], "accept", {"value": "x"}),
        outsider.client.get(outsider.url(f"drafts/{draft['id']}/")),
    ]
    for response in answers:
        assert response.status_code == 404, response.content
        assert SECRET_VALUE.encode() not in response.content and b"Paddle" not in response.content
    # bravo's own extraction sees none of alpha's facts: a draft, no nudge.
    own = extract(outsider, "We use Stripe for payments.").json()
    assert own["fact_nudges"] == [] and len(own["drafts"]) == 1
    with operator_view():
        assert Nudge.objects.get(id=nudge["id"]).state == NudgeState.OPEN
        assert Draft.objects.get(id=draft["id"]).state == DraftState.PENDING
        assert Draft.objects.filter(kind=DraftKind.FACT).count() == 2
        assert Nudge.objects.filter(kind=NudgeKind.FACT_CONTRADICTION).count() == 1
