"""The drafts API (docs/freshness.md, "Extraction drafts"): POST drafts/extract/
makes pending drafts from a transcript (scrubbed, code excluded, flagged with their
conflicts), GET drafts/ lists them, and accept (optionally edited), reject and merge
review one. Another team's token and ids get 404 and nothing of the team.

Entries are embedded by the bundled local model and indexed after commit in process
(the `save` fixture), as the broker-less default does."""

from __future__ import annotations

import json
from typing import Any

import pytest

from freshness.models import Draft, DraftState, Nudge, NudgeKind
from memories.models import Memory
from teams.scope import team_scope
from teams.services import set_vault_entry
from tests.conftest import Agent, operator_view

TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
VAULT_SECRET = "hunter2-vault-zq81x"
TRANSCRIPT = f"""user: Our CI token is {TOKEN} and the staging password is {VAULT_SECRET}, keep it safe.
assistant: Noted.

user: We decided to use Paddle for the EU storefront after the long review.

user: We decided to rotate the staging password {VAULT_SECRET} and the CI token {TOKEN} monthly.

```python
# Never run this migration twice in production.
def migrate():
    pass
```

assistant: Lesson learned: the cache must be warmed before the deploy, or latency spikes for an hour.
"""
SECRET_OF_ALPHA = "alpha-only-wombat-7311"


def extract(agent: Agent, body: Any, team: str | None = None, **extra: Any) -> Any:
    return agent.client.post(agent.url("drafts/extract/", team=team), body, format="json", **extra)


def review(agent: Agent, draft_id: object, verb: str, body: Any = None, team: str | None = None) -> Any:
    return agent.client.post(agent.url(f"drafts/{draft_id}/{verb}/", team=team), body or {}, format="json")


@pytest.fixture
def vault_secret(member: Agent) -> str:
    with team_scope(member.team.id):
        set_vault_entry(
            team=member.team, key="staging-password", value=VAULT_SECRET, is_secret=True, actor="t"
        )
    return VAULT_SECRET


@pytest.fixture
def drafted(member: Agent, vault_secret: str) -> list[dict[str, Any]]:
    response = extract(member, {"transcript": TRANSCRIPT, "source_session": "sess-42"})
    assert response.status_code == 201, response.content
    return list(response.json()["drafts"])


def by_content(drafts: list[dict[str, Any]], words: str) -> dict[str, Any]:
    (found,) = [d for d in drafts if words in d["content"]]
    return found


def test_extract_makes_pending_drafts_scrubbed_and_without_code(member: Agent, drafted: list[dict]) -> None:
    contents = [d["content"] for d in drafted]
    assert any("Paddle" in c for c in contents) and any("cache must be warmed" in c for c in contents)
    decision = by_content(drafted, "Paddle")
    assert decision["type"] == "decision" and decision["state"] == "pending"
    assert decision["key"].startswith("mem:") and decision["extractor"] == "rules"
    assert decision["source_session"] == "sess-42" and decision["created_by"] == "writer-bot"
    assert "Paddle" in decision["source_excerpt"]
    start, end = decision["source_span"]
    assert 0 <= start < end
    lesson = by_content(drafted, "cache must be warmed")
    assert lesson["type"] == "lesson"
    with operator_view():
        stored = list(Draft.objects.filter(team=member.team).values())
    raw = json.dumps(drafted) + json.dumps(stored, default=str)
    assert TOKEN not in raw and VAULT_SECRET not in raw
    assert "[REDACTED:" in by_content(drafted, "monthly")["content"]
    assert "migration twice" not in raw  # the code block's comment is no candidate
    listed = member.client.get(member.url("drafts/")).json()["results"]
    assert {d["id"] for d in listed} == {d["id"] for d in drafted}


def test_extracting_the_same_transcript_again_drafts_nothing_new_and_corroborates(
    member: Agent, drafted: list[dict]
) -> None:
    again = extract(member, {"transcript": TRANSCRIPT, "source_session": "sess-43"})
    assert again.status_code == 201 and again.json()["drafts"] == []
    seen = again.json()["corroborated"]
    assert {d["id"] for d in seen} == {d["id"] for d in drafted}
    assert all(d["corroborated"] == 1 and d["last_corroborated_at"] for d in seen)
    assert all(d["corroborated"] == 0 and d["last_corroborated_at"] is None for d in drafted)
    with operator_view():
        assert Draft.objects.filter(team=member.team).count() == len(drafted)


LESSON = "Lesson learned: `make build` fails at Makefile:{line}: protoc is not installed on the runners."


def test_a_lesson_seen_again_with_other_numbers_corroborates_but_the_same_session_is_a_retry(
    member: Agent,
) -> None:
    (first,) = extract(member, {"transcript": LESSON.format(line=12), "source_session": "s1"}).json()[
        "drafts"
    ]
    retry = extract(member, {"transcript": LESSON.format(line=12), "source_session": "s1"}).json()
    other = extract(member, {"transcript": LESSON.format(line=31), "source_session": "s2"}).json()
    unnamed = extract(member, {"transcript": LESSON.format(line=40).upper()}).json()

    assert (retry["drafts"], retry["corroborated"]) == ([], [])
    assert other["drafts"] == [] and [d["id"] for d in other["corroborated"]] == [first["id"]]
    assert unnamed["drafts"] == [] and unnamed["corroborated"][0]["corroborated"] == 2
    listed = member.client.get(member.url("drafts/")).json()["results"]
    assert [(d["id"], d["corroborated"], d["content"]) for d in listed] == [
        (first["id"], 2, first["content"])  # the first wording is kept
    ]
    # Accepted, the count goes into the stored version's provenance.
    assert review(member, first["id"], "accept").status_code == 200
    entry = member.client.get(member.url(f"memories/{first['key']}/")).json()
    assert entry["metadata"]["draft"]["corroborated"] == 2
    # Reviewed, it is no longer pending: the next sighting is a new draft.
    (fresh,) = extract(member, {"transcript": LESSON.format(line=12), "source_session": "s3"}).json()[
        "drafts"
    ]
    assert fresh["id"] != first["id"] and fresh["corroborated"] == 0


def test_a_fact_with_other_numbers_is_another_draft(member: Agent) -> None:
    extract(member, {"transcript": "We decided to cap uploads at 10 MB.", "source_session": "s1"})
    again = extract(member, {"transcript": "We decided to cap uploads at 25 MB.", "source_session": "s2"})
    assert len(again.json()["drafts"]) == 1 and again.json()["corroborated"] == []


def test_accept_edited_stores_a_memory_with_provenance(member: Agent, drafted: list[dict]) -> None:
    draft = by_content(drafted, "Paddle")
    response = review(
        member,
        draft["id"],
        "accept",
        {
            "key": "eu-storefront-billing",
            "content": "The EU storefront bills through Paddle.",
            "type": "choice",
        },
    )

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["state"] == "accepted" and body["reviewed_by"] == "writer-bot" and body["reviewed_at"]
    assert body["key"] == "eu-storefront-billing" and body["type"] == "decision"
    entry = member.client.get(member.url("memories/eu-storefront-billing/")).json()
    assert entry["content"] == "The EU storefront bills through Paddle." and entry["type"] == "decision"
    assert entry["metadata"]["draft"] == {
        "draft": draft["id"],
        "source_session": "sess-42",
        "extractor": "rules",
        "reviewed_by": "writer-bot",
        "corroborated": 0,
        # The transcript kept as a conversation, and the lines the draft came from.
        "conversation": draft["source_conversation"]["id"],
        "first_line": draft["source_conversation"]["first_line"],
        "last_line": draft["source_conversation"]["last_line"],
    }
    assert body["memory_entry"]["id"] == entry["id"]
    with operator_view():
        assert (
            Draft.objects.get(id=draft["id"]).memory_id == Memory.objects.get(key="eu-storefront-billing").id
        )
    # Reviewed: not pending any more, and a second review is a conflict.
    assert draft["id"] not in {d["id"] for d in member.client.get(member.url("drafts/")).json()["results"]}
    for verb in ("accept", "reject"):
        again = review(member, draft["id"], verb)
        assert again.status_code == 409 and again.json()["error"] == "draft_not_pending"


def test_accept_unedited_keeps_the_drafts_key_type_and_text(member: Agent, drafted: list[dict]) -> None:
    draft = by_content(drafted, "cache must be warmed")
    response = review(member, draft["id"], "accept")
    assert response.status_code == 200, response.content
    entry = member.client.get(member.url(f"memories/{draft['key']}/")).json()
    assert entry["content"] == draft["content"] and entry["type"] == "lesson"


def test_reject_stores_nothing(member: Agent, drafted: list[dict]) -> None:
    draft = by_content(drafted, "Paddle")
    response = review(member, draft["id"], "reject")
    assert response.status_code == 200 and response.json()["state"] == "rejected"
    with operator_view():
        assert not Memory.objects.filter(team=member.team).exists()
    rejected = member.client.get(member.url("drafts/"), {"state": "rejected"}).json()["results"]
    assert [d["id"] for d in rejected] == [draft["id"]]
    assert review(member, draft["id"], "merge", {"into_key": "anything"}).status_code == 409


def test_merge_supersedes_the_entry_with_a_reason_naming_the_draft(
    member: Agent, drafted: list[dict], save: Any
) -> None:
    save(member, "deploy-checklist", "Before a deploy, run the smoke tests.")
    draft = by_content(drafted, "cache must be warmed")

    response = review(member, draft["id"], "merge", {"into_key": "deploy-checklist"})

    assert response.status_code == 200, response.content
    assert response.json()["state"] == "merged"
    entry = member.client.get(member.url("memories/deploy-checklist/")).json()
    assert entry["content"] == f"Before a deploy, run the smoke tests.\n\n{draft['content']}"
    assert entry["supersede_reason"] == f"merged draft {draft['id']}"
    assert entry["metadata"]["draft"]["draft"] == draft["id"]
    assert response.json()["memory_entry"]["id"] == entry["id"]


def test_merge_with_given_text_and_into_a_missing_key(member: Agent, drafted: list[dict], save: Any) -> None:
    save(member, "billing", "We bill in euros.")
    draft = by_content(drafted, "Paddle")
    missing = review(member, draft["id"], "merge", {"into_key": "no-such-key"})
    assert missing.status_code == 404
    merged = review(
        member, draft["id"], "merge", {"into_key": "billing", "content": "We bill in euros via Paddle."}
    )
    assert merged.status_code == 200, merged.content
    assert (
        member.client.get(member.url("memories/billing/")).json()["content"] == "We bill in euros via Paddle."
    )


def test_accept_on_a_key_with_an_active_entry_asks_to_merge(
    member: Agent, drafted: list[dict], save: Any
) -> None:
    save(member, "storefront", "The storefront is in Berlin.")
    draft = by_content(drafted, "Paddle")
    response = review(member, draft["id"], "accept", {"key": "storefront"})
    assert response.status_code == 409 and response.json()["error"] == "draft_key_exists"
    with operator_view():
        assert Draft.objects.get(id=draft["id"]).state == DraftState.PENDING
        assert Memory.objects.get(team=member.team, key="storefront", is_active=True).content.endswith(
            "Berlin."
        )


def test_a_draft_an_entry_already_holds_is_flagged_duplicate(member: Agent, save: Any) -> None:
    held = save(member, "eu-billing", "We decided to use Paddle for the EU storefront after the long review.")
    response = extract(
        member, {"transcript": "We decided to use Paddle for the EU storefront after the long review."}
    )
    (draft,) = response.json()["drafts"]
    assert draft["conflict"] == "duplicate"
    assert draft["conflict_entry"]["id"] == held["id"] and draft["conflict_entry"]["key"] == "eu-billing"
    accepted = review(member, draft["id"], "accept")
    assert accepted.status_code == 409 and accepted.json()["error"] == "draft_duplicate"


def test_a_near_duplicate_by_meaning_is_flagged_duplicate(member: Agent, save: Any) -> None:
    held = save(member, "friday-deploys", "Never deploy to production on Fridays.")
    response = extract(member, {"transcript": "Never deploy to production on a Friday afternoon."})
    (draft,) = response.json()["drafts"]
    assert draft["content"] != "Never deploy to production on Fridays."
    assert draft["conflict"] == "duplicate" and draft["conflict_entry"]["id"] == held["id"]


def test_a_draft_that_disagrees_is_flagged_and_accepting_it_raises_the_contradiction(
    member: Agent, save: Any, django_capture_on_commit_callbacks: Any
) -> None:
    old = save(member, "billing-provider", "We use Stripe for billing.")
    response = extract(member, {"transcript": "Last week we moved billing from Stripe to Paddle."})
    (draft,) = response.json()["drafts"]
    assert draft["conflict"] == "contradiction", draft
    assert draft["conflict_entry"]["id"] == old["id"]

    with django_capture_on_commit_callbacks(execute=True):
        accepted = review(member, draft["id"], "accept")
    assert accepted.status_code == 200, accepted.content
    with operator_view():
        (nudge,) = Nudge.objects.filter(team=member.team, kind=NudgeKind.CONTRADICTION)
        assert str(nudge.other_memory_id) == old["id"]
        assert str(nudge.memory_id) == accepted.json()["memory_entry"]["id"]


def test_an_unrelated_draft_has_no_conflict(member: Agent, save: Any) -> None:
    save(member, "office", "The office plants are watered on Fridays.")
    (draft,) = extract(member, {"transcript": "We decided to use Paddle for the EU storefront."}).json()[
        "drafts"
    ]
    assert draft["conflict"] == "" and draft["conflict_entry"] is None


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"transcript": 42}, "transcript"),
        ({"transcript": ["a"]}, "transcript"),
        ({"transcript": ""}, "transcript"),
        ({"transcript": "   "}, "transcript"),
        ({}, "transcript"),
        ({"transcript": "We decided X.", "source_session": 7}, "source_session"),
        ({"transcript": "We decided X.", "source_session": "s" * 201}, "source_session"),
        ({"transcript": "We decided X.", "extra": 1}, "extra"),
    ],
)
def test_bad_extract_input_is_a_400(member: Agent, body: dict[str, Any], field: str) -> None:
    response = extract(member, body)
    assert response.status_code == 400, response.content
    assert field in response.json()["fields"]


def test_malformed_json_nul_and_oversized_bodies_are_refused(member: Agent) -> None:
    malformed = member.client.post(
        member.url("drafts/extract/"), '{"transcript": ', content_type="application/json"
    )
    assert malformed.status_code == 400 and malformed.json()["error"] == "malformed_json"
    nul = member.client.post(
        member.url("drafts/extract/"), '{"transcript": "a\\u0000b"}', content_type="application/json"
    )
    assert nul.status_code == 400 and nul.json()["error"] == "invalid_characters"
    huge = extract(member, {"transcript": "x" * (1024 * 1024 + 10)})
    assert huge.status_code == 413 and huge.json()["error"] == "body_too_large"


def test_bad_review_input_is_a_4xx(member: Agent, drafted: list[dict]) -> None:
    draft_id = drafted[0]["id"]
    cases = [
        ("accept", {"type": "banana"}, 400, "unknown_type"),
        ("accept", {"type": 3}, 400, "invalid"),
        ("accept", {"key": "has spaces"}, 400, "invalid"),
        ("accept", {"key": "k" * 201}, 400, "invalid"),
        ("accept", {"content": "   "}, 400, "invalid"),
        ("accept", {"colour": "red"}, 400, "invalid"),
        ("merge", {}, 400, "invalid"),
        ("merge", {"into_key": 5}, 400, "invalid"),
    ]
    for verb, body, status, code in cases:
        response = review(member, draft_id, verb, body)
        assert response.status_code == status, (verb, body, response.content)
        assert response.json()["error"] == code, (verb, body, response.json())
    assert review(member, "not-a-uuid", "accept").status_code == 404
    assert member.client.get(member.url("drafts/"), {"state": "maybe"}).status_code == 400
    with operator_view():
        assert Draft.objects.get(id=draft_id).state == DraftState.PENDING


def test_a_read_token_lists_but_cannot_extract_or_review(
    member: Agent, readonly_member: Agent, drafted: list[dict]
) -> None:
    assert readonly_member.client.get(readonly_member.url("drafts/")).status_code == 200
    assert extract(readonly_member, {"transcript": "We decided to use Paddle."}).status_code == 403
    assert review(readonly_member, drafted[0]["id"], "reject").status_code == 403


def test_drafts_page_newest_first(member: Agent) -> None:
    for n in range(3):
        extract(member, {"transcript": f"We decided to use tool number {n} for the deploys."})
    first = member.client.get(member.url("drafts/"), {"limit": 2}).json()
    assert [d["content"][-25:] for d in first["results"]] == [
        "number 2 for the deploys.",
        "number 1 for the deploys.",
    ]
    rest = member.client.get(first["next"]).json()
    assert [d["content"][-25:] for d in rest["results"]] == ["number 0 for the deploys."]


def test_another_teams_token_and_ids_get_404_and_nothing_of_the_team(
    member: Agent, outsider: Agent, save: Any
) -> None:
    save(member, "alpha-secret-thing", f"The code word is {SECRET_OF_ALPHA}.")
    (draft,) = extract(
        member, {"transcript": f"We decided to use {SECRET_OF_ALPHA} as the code word."}
    ).json()["drafts"]
    alpha = member.team.slug

    answers = [
        outsider.client.get(outsider.url("drafts/", team=alpha)),
        outsider.client.get(outsider.url(f"drafts/{draft['id']}/", team=alpha)),
        extract(outsider, {"transcript": "We decided to use Paddle."}, team=alpha),
        review(outsider, draft["id"], "accept", team=alpha),
        # alpha's draft id in bravo's own URLs
        outsider.client.get(outsider.url(f"drafts/{draft['id']}/")),
        review(outsider, draft["id"], "accept"),
        review(outsider, draft["id"], "reject"),
        review(outsider, draft["id"], "merge", {"into_key": "alpha-secret-thing"}),
    ]
    for response in answers:
        assert response.status_code == 404, response.content
        assert SECRET_OF_ALPHA.encode() not in response.content
        assert draft["id"].encode() not in response.content
    own = outsider.client.get(outsider.url("drafts/"), {"state": "all"})
    assert own.status_code == 200 and own.json()["results"] == []
    # bravo's extraction is not deduplicated or flagged against alpha's drafts and entries
    (bravo_draft,) = extract(
        outsider, {"transcript": f"We decided to use {SECRET_OF_ALPHA} as the code word."}
    ).json()["drafts"]
    assert bravo_draft["conflict"] == "" and bravo_draft["id"] != draft["id"]
    with operator_view():
        assert Draft.objects.get(id=draft["id"]).state == DraftState.PENDING
        assert Draft.objects.get(id=draft["id"]).corroborated == 0  # bravo's sighting is not alpha's
        assert Memory.objects.get(key="alpha-secret-thing").is_active
