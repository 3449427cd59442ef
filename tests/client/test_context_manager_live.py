"""ContextManager against the real server: a synthetic 200-turn conversation passes every
threshold (flush, compact, warn, hard prune), and what it said worth remembering is on
the server as drafts before its turns leave the context; what stays is the system prompt,
the team's memory, the summary and the newest turns, tool calls with their results."""

from __future__ import annotations

from typing import Any

import pytest

from freshness.models import Draft
from memoryhub_client import ContextManager, Event, FlushPolicy, MemoryHub
from teams.models import Team
from tests.conftest import make_agent, operator_view
from tests.mcp.conftest import Server

pytestmark = pytest.mark.django_db(transaction=True)

SYSTEM = "You are the payments team's build agent. Answer briefly."
TOOLS = [
    "Redis streams",
    "Postgres",
    "Celery",
    "Stripe",
    "Grafana",
    "Sentry",
    "Terraform",
    "Vault",
    "Nginx",
    "Kafka",
]
AREAS = [
    "queue",
    "ledger",
    "billing",
    "refunds",
    "dashboards",
    "alerts",
    "infra",
    "secrets",
    "edge",
    "events",
]
LOG_LINE = "2026-01-01T00:00:00Z build step ok: compiled module payments.ledger in 0.4 s\n"


def decision(n: int) -> str:
    return f"We decided to use {TOOLS[n]} for the {AREAS[n]} service from now on."


def conversation() -> list[dict[str, Any]]:
    """200 turns: a user message and the agent's answer each; ten decisions, a tool call
    every seventh turn, and at turn 60 a build log of nine tenths of the window."""
    messages: list[dict[str, Any]] = []
    for turn in range(200):
        said = decision(turn // 20) if turn % 20 == 5 else f"Turn {turn}: check the build and report back."
        messages.append({"role": "user", "content": said})
        if turn % 7 == 3 or turn == 60:
            call = {
                "id": f"call-{turn}",
                "type": "function",
                "function": {"name": "build_log", "arguments": "{}"},
            }
            log = LOG_LINE * (190 if turn == 60 else 3)
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
            messages.append({"role": "tool", "tool_call_id": f"call-{turn}", "content": log})
        messages.append({"role": "assistant", "content": f"Build {turn} is green."})
    return messages


def team_drafts(team: Team) -> list[Draft]:
    with operator_view():
        return list(Draft.objects.filter(team=team))


def test_a_200_turn_conversation_passes_every_threshold_writing_before_it_forgets(
    mcp_server: Server, team: Team
) -> None:
    token = make_agent(team, "loop-bot", ["read", "write"]).token
    sent = conversation()
    events: list[Event] = []
    with MemoryHub(mcp_server.base, token, team="alpha") as hub:
        hub.save("who-we-are", "We are the payments team; we own billing and invoices.", type="identity")
        context = ContextManager(
            "gpt-4o",
            hub,
            window=6000,
            system=SYSTEM,
            flush=FlushPolicy(source_session="synthetic-200"),
            on_event=events.append,
        )
        context.inject_memory()
        peak = 0.0
        for message in sent:
            context.add(message)
            peak = max(peak, context.usage)
        kept = context.messages()
        drafts = team_drafts(team)
        context.flush_all()  # the session ends: the newest turns too

    kinds = [event.kind for event in events]
    turns = [m for m in kept if m["role"] != "system"]
    gone = [n for n in range(10) if not any(m["content"] == decision(n) for m in turns)]

    # Every threshold was passed, and the flush came before any turn was folded or dropped.
    assert {"flushed", "compacted", "warned", "pruned"} <= set(kinds)
    assert "flush_failed" not in kinds and "compaction_deferred" not in kinds
    assert kinds.index("flushed") < kinds.index("compacted") and kinds.index("flushed") < kinds.index(
        "pruned"
    )
    assert peak > 0.9 and context.usage < context.thresholds.compact
    # What was worth remembering and left the context is on the server, from this conversation;
    # at the end of the session, all of it.
    assert len(gone) >= 5
    for n in gone:
        assert any(f"{TOOLS[n]} for the {AREAS[n]} service" in draft.content for draft in drafts), decision(n)
    for n in range(10):
        assert any(f"{TOOLS[n]} for the {AREAS[n]} service" in d.content for d in team_drafts(team)), (
            decision(n)
        )
    assert {draft.source_session for draft in team_drafts(team)} == {"synthetic-200"}
    assert {draft.state for draft in team_drafts(team)} == {"pending"}
    # What was kept: the system prompt, the memory, the summary, then the newest turns in order.
    assert kept[0]["content"] == SYSTEM
    assert "We are the payments team; we own billing and invoices." in kept[1]["content"]
    assert kept[2]["content"].startswith("Summary of the earlier conversation:")
    assert turns == sent[len(sent) - len(turns) :] and turns[-1]["content"] == "Build 199 is green."
    assert not any(m["role"] == "tool" and m["tool_call_id"] == "call-60" for m in kept)
    calls = {call["id"] for m in turns for call in m.get("tool_calls") or []}
    assert {m["tool_call_id"] for m in turns if m["role"] == "tool"} == calls


def test_entries_are_saved_where_the_token_may_and_kept_as_drafts_where_it_may_not(
    mcp_server: Server, team: Team
) -> None:
    writer = make_agent(team, "loop-bot", ["read", "write"]).token
    reader = make_agent(team, "reader-bot", ["read"]).token
    said = [decision(n % 10) if n % 3 == 0 else f"Turn {n}: check the build." for n in range(12)]
    with MemoryHub(mcp_server.base, writer, team="alpha") as hub:
        saving = ContextManager("gpt-4o", hub, window=100_000, flush=FlushPolicy(target="entries"))
        saving.extend({"role": "user", "content": text} for text in said)
        (flushed,) = saving.flush_all()
        stored = [hub.get(key)["content"] for key in flushed.entries]
    with MemoryHub(mcp_server.base, reader, team="alpha") as hub:
        refused = ContextManager("gpt-4o", hub, window=400)
        refused.extend({"role": "user", "content": f"{text} " + "detail " * 20} for text in said)

    assert flushed.kind == "flushed" and len(flushed.entries) == 4
    assert sorted(stored) == sorted({draft.content for draft in team_drafts(team)})
    assert all(draft.state == "accepted" for draft in team_drafts(team))
    kinds = [event.kind for event in refused.events]
    assert "flush_failed" in kinds and "compaction_deferred" in kinds and "compacted" not in kinds
    assert "pruned" in kinds and refused.usage <= refused.thresholds.prune  # the model still fits
