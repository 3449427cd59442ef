"""Open Brain's capture model: its types accepted as aliases with the name kept, topics
beside people, tags and action items, whether a version was captured or saved on
purpose, and a hint to use the vault for what looks like an operational value."""

from __future__ import annotations

from typing import Any

import pytest

from memories.cache_hint import VAULT_HINT, vault_hint
from memories.metadata_extraction import extract_metadata
from memories.types import OPEN_BRAIN_TYPES, resolve_type
from tests.conftest import Agent
from tests.linear_time import assert_linear_time
from tests.mcp.conftest import call_in_process


def save(agent: Agent, **body: Any) -> dict[str, Any]:
    response = agent.client.post(agent.url("memories/"), body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def get(agent: Agent, key: str) -> dict[str, Any]:
    response = agent.client.get(agent.url(f"memories/{key}/"))
    assert response.status_code == 200, response.content
    return response.json()


# --- types -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        ("idea", "context"),
        ("meeting", "historical"),
        ("person", "reference"),
        ("task", "context"),
        ("journal", "historical"),
        ("procedural", "lesson"),
        ("episodic", "historical"),
        ("Note", "context"),
    ],
)
def test_an_open_brain_type_is_saved_as_its_canonical_type_and_kept(
    member: Agent, name: str, canonical: str
) -> None:
    saved = save(member, key="k", content="Standup moved to 9:30 for everyone.", type=name)

    assert saved["type"] == canonical and saved["original_type"] == name.lower()
    assert get(member, "k")["original_type"] == name.lower()


def test_every_open_brain_type_resolves() -> None:
    assert {name: resolve_type(name) for name in OPEN_BRAIN_TYPES} == OPEN_BRAIN_TYPES


def test_a_supersede_keeps_the_original_type_unless_it_names_another(member: Agent) -> None:
    save(member, key="k", content="Standup at 9:30.", type="meeting")
    kept = save(member, key="k", content="Standup at 10:00.", supersede_reason="moved")
    renamed = save(
        member, key="k", content="We decided: standup at 10:00.", type="decision", supersede_reason="x"
    )

    assert kept["type"] == "historical" and kept["original_type"] == "meeting"
    assert renamed["type"] == "decision" and renamed["original_type"] == ""


def test_a_canonical_type_has_no_original_type(member: Agent) -> None:
    assert save(member, key="k", content="Write short functions.", type="lesson")["original_type"] == ""


def test_an_unknown_type_is_still_refused(member: Agent) -> None:
    response = member.client.post(
        member.url("memories/"), {"key": "k", "content": "x", "type": "dream"}, format="json"
    )

    assert response.status_code == 400 and response.json()["error"] == "unknown_type"


# --- auto_captured ------------------------------------------------------------------------


def test_an_accepted_draft_is_auto_captured_and_a_hand_correction_is_not(member: Agent) -> None:
    extracted = member.client.post(
        member.url("drafts/extract/"), {"transcript": "We decided to use Paddle for payments."}, format="json"
    )
    assert extracted.status_code in (200, 201), extracted.content
    [draft] = extracted.json()["drafts"]
    accepted = member.client.post(member.url(f"drafts/{draft['id']}/accept/"), {}, format="json")
    assert accepted.status_code == 200, accepted.content
    key = accepted.json()["key"]

    assert get(member, key)["auto_captured"] is True
    corrected = save(
        member, key=key, content="We use Paddle for payments, and Stripe in the US.", supersede_reason="US"
    )
    assert corrected["auto_captured"] is False
    assert save(member, key="typed", content="Typed on purpose.")["auto_captured"] is False


# --- topics -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "topics"),
    [
        ("We moved payments from Stripe to Paddle for Project Alpha.", ["stripe", "paddle", "project alpha"]),
        ("Never deploy on Fridays.", ["fridays"]),
        ("- Use PostgreSQL 16 for the api.", ["postgresql"]),
        ("The CDN caches for five minutes.", ["cdn"]),
        ("run the tests before every commit", []),
        ("`Grafana` in code is not a topic; see https://Example.com/Path", []),
    ],
)
def test_topics_are_the_names_a_text_is_about(text: str, topics: list[str]) -> None:
    assert extract_metadata(text)["topics"] == topics


def test_topics_are_stored_with_the_other_extracted_metadata(member: Agent) -> None:
    saved = save(member, key="k", content="Billing moved from Stripe to Paddle. @ann follows up. #payments")

    assert saved["metadata"]["topics"] == ["stripe", "paddle"]
    assert saved["metadata"]["people"] == ["ann"] and saved["metadata"]["tags"] == ["payments"]


def test_topic_extraction_is_linear_in_the_text() -> None:
    assert_linear_time(lambda text: extract_metadata(text), lambda n: "Alpha Beta. " * (n // 12), 400_000)


# --- the vault hint -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        '{"runs": 42, "last_run": "2026-11-28T10:00:00Z"}',
        '{"progress": 0.45, "done": false}',
        "[1, 2, 3]",
        "1732789200",
        "2026-11-28T10:00:00Z",
        "last_run: 2026-11-28 10:00\nprocessed: 1200\nprogress: 45%",
        "done=3/10",
    ],
)
def test_an_operational_value_gets_the_vault_hint(text: str) -> None:
    assert vault_hint(text) == VAULT_HINT


@pytest.mark.parametrize(
    "text",
    [
        "Never deploy on Fridays.",
        "The API allows 42 requests per second since 2026-11-01.",
        '{"owner": "ann", "runs": 3}',
        "Step 1: run migration shard 1 and verify row counts",
        "",
        "{not json",
        "x: 1\n" * 6,
    ],
)
def test_text_that_is_memory_gets_no_hint(text: str) -> None:
    assert vault_hint(text) is None


def test_the_hint_is_in_the_save_answer_and_the_entry_is_saved(member: Agent) -> None:
    saved = save(member, key="counter", content='{"runs": 42, "last_run": "2026-11-28T10:00:00Z"}')
    plain = save(member, key="rule", content="Never deploy on Fridays.")

    assert saved["vault_hint"] == VAULT_HINT and get(member, "counter")["key"] == "counter"
    assert plain["vault_hint"] is None


@pytest.mark.django_db(transaction=True)
def test_the_brief_mcp_save_answer_carries_the_hint(member: Agent) -> None:
    status, body = call_in_process(
        member.token, "memory_save", {"key": "progress", "content": "progress: 45%"}, path="/mcp/"
    )

    assert status == 200 and body["vault_hint"] == VAULT_HINT, body
    status, body = call_in_process(
        member.token, "memory_save", {"key": "r", "content": "Never deploy on Fridays."}
    )
    assert "vault_hint" not in body


def test_the_hint_is_linear_in_the_text() -> None:
    assert_linear_time(vault_hint, lambda n: "a: 1\n" * (n // 5), 400_000)


def test_the_vault_hint_runs_on_re2s_fast_path(capfd: pytest.CaptureFixture[str]) -> None:
    """With RE2's default memory its lazy DFA ran out on the Unicode classes, and each
    save's check wrote "DFA out of memory" to the server's stderr."""
    from memories.cache_hint import vault_hint

    capfd.readouterr()
    assert vault_hint("build_count = 17\nlast_run: 2026-11-28T10:00:00Z") is not None
    assert vault_hint("Zählerstand: 42 %") is not None
    assert "DFA out of memory" not in capfd.readouterr().err
