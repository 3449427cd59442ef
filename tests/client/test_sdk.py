"""The SDK against the real server (the MCP tests' gunicorn on this run's database):
MemoryHub and AsyncMemoryHub call every route they name and answer its JSON; refusals
are exceptions carrying the server's code; another team's memory is out of reach; the
token never shows."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from django.utils import timezone

from freshness import services as freshness_services
from memories.models import Memory
from memoryhub_client import (
    AsyncMemoryHub,
    Conflict,
    Forbidden,
    InvalidRequest,
    MemoryHub,
    MemoryHubError,
    NotFound,
    Unauthenticated,
    is_duplicate,
)
from teams.models import Team
from tests.conftest import make_agent, operator_view
from tests.mcp.conftest import Server, run_async

pytestmark = pytest.mark.django_db(transaction=True)


def hub_of(server: Server, token: str, **options: Any) -> MemoryHub:
    return MemoryHub(server.base, token, team="alpha", **options)


def test_save_read_list_history_and_delete(mcp_server: Server, team: Team) -> None:
    token = make_agent(team, "sdk-bot", ["read", "write"]).token
    with hub_of(mcp_server, token) as hub:
        saved = hub.save("deploy-friday", "Never deploy on Fridays.", type="warning")
        duplicate = hub.save("no-friday-deploys", "Never deploy on Fridays.")
        with pytest.raises(Conflict) as refused:
            hub.save("deploy-friday", "Never deploy on Fridays or holidays.")
        again = hub.save(
            "deploy-friday",
            "".join(f"Rule {n}: never deploy on Fridays.\n" for n in range(1, 6)),
            supersede_reason="five rules now",
        )
        part = hub.get("deploy-friday", from_line=2, lines=2)
        old = hub.get_version("deploy-friday", saved["id"])
        history = hub.history("deploy-friday")
        for n in range(3):
            hub.save(f"note-{n}", f"Note number {n} about the build cache.")
        first_page = hub.list(limit=2)
        everything = list(hub.iter_memories(limit=2))
        hub.delete("note-0")
        with pytest.raises(NotFound) as gone:
            hub.get("note-0")

    assert saved["type"] == "lesson" and not is_duplicate(saved)
    assert is_duplicate(duplicate) and duplicate["duplicate_of"]["key"] == "deploy-friday"
    assert refused.value.status == 409 and refused.value.code == "conflict"
    assert refused.value.current is not None and refused.value.current["id"] == saved["id"]
    assert not is_duplicate(again) and again["supersedes_id"] == saved["id"]
    assert part["content"] == "Rule 2: never deploy on Fridays.\nRule 3: never deploy on Fridays.\n"
    assert (part["from_line"], part["to_line"], part["total_lines"], part["has_more"]) == (2, 3, 5, True)
    assert old["superseded_by"] is not None and old["superseded_by"]["id"] == again["id"]
    assert [event["kind"] for event in history["history"]] == ["hard", "created"]
    assert len(first_page.results) == 2 and first_page.next_cursor is not None
    assert sorted(m["key"] for m in everything) == ["deploy-friday", "note-0", "note-1", "note-2"]
    assert gone.value.code == "not_found"


def test_search_context_confirm_and_nudges(mcp_server: Server, team: Team) -> None:
    token = make_agent(team, "sdk-bot", ["read", "write"]).token
    with hub_of(mcp_server, token) as hub:
        hub.save("payments", "We use Stripe for card payments.", type="decision")
        found = hub.search("stripe card payments", mode="keyword", explain=True)
        block = hub.context(format="json")
        with operator_view():
            past = timezone.now() - dt.timedelta(days=31)
            Memory.objects.filter(team=team, key="payments").update(created_at=past, last_confirmed_at=past)
        freshness_services.mark_due_entries()
        (nudge,) = hub.nudges(kind="due").results
        confirmed = hub.confirm("payments", note="checked the billing dashboard")
        after = hub.nudges(state="all", kind="due").results
        history = hub.history("payments")

    assert found["search_mode"] == "keyword" and found["results"][0]["key"] == "payments"
    assert "explain" in found["results"][0]
    assert "We use Stripe for card payments." in block["text"]
    assert [entry["key"] for entry in block["entries"]] == ["payments"]
    assert nudge["keys"] == ["payments"] and nudge["state"] == "open"
    assert confirmed["confirmed_by_count"] == 1
    assert [(n["id"], n["state"]) for n in after] == [(nudge["id"], "resolved")]
    assert history["history"][0]["kind"] == "confirmed"
    assert history["history"][0]["reason"] == "checked the billing dashboard"


def test_drafts_and_sessions(mcp_server: Server, team: Team) -> None:
    token = make_agent(team, "sdk-bot", ["read", "write"]).token
    transcript = (
        "user: We decided to move the queue from RabbitMQ to Redis streams.\n\n"
        "assistant: Noted. Lesson: the consumer group must be created before the first read."
    )
    with hub_of(mcp_server, token) as hub:
        made = hub.extract_drafts(transcript, source_session="sdk-test")["drafts"]
        pending = hub.drafts().results
        accepted = hub.accept_draft(made[0]["id"])
        rejected = hub.reject_draft(made[1]["id"])
        stored = hub.get(accepted["memory_entry"]["key"]) if accepted["memory_entry"] else None
        boot = hub.start_session(source="sdk-test", project="web", current_task="testing the SDK")
        hub.session = boot["session"]["id"]
        hub.search("queue", mode="keyword")  # a heartbeat
        live = hub.sessions(project="web").results
        moved = hub.update_session(boot["session"]["id"], current_task="reviewing")
        hub.end_session(boot["session"]["id"])
        ended = hub.get_session(boot["session"]["id"])

    assert {draft["type"] for draft in made} == {"decision", "lesson"}
    assert {draft["id"] for draft in pending} == {draft["id"] for draft in made}
    assert accepted["state"] == "accepted" and rejected["state"] == "rejected"
    assert stored is not None and stored["content"] == made[0]["content"]
    assert boot["session"]["source"] == "sdk-test" and isinstance(boot["injection"], str | None)
    assert [s["id"] for s in live] == [boot["session"]["id"]]
    assert moved["current_task"] == "reviewing"
    assert ended["status"] == "ended"


def test_the_async_client_makes_the_same_calls(mcp_server: Server, team: Team) -> None:
    token = make_agent(team, "async-bot", ["read", "write"]).token

    async def scenario() -> dict[str, Any]:
        async with AsyncMemoryHub(mcp_server.base, token, team="alpha") as hub:
            saved = await hub.save("cache-ttl", "The build cache expires after 7 days.", type="decision")
            for n in range(3):
                await hub.save(f"fact-{n}", f"Fact {n} about the deploy pipeline.")
            read = await hub.get("cache-ttl")
            found = await hub.search("build cache", mode="keyword")
            keys = [memory["key"] async for memory in hub.iter_memories(limit=2)]
            block = await hub.context()
            try:
                await hub.get("nothing-here")
            except NotFound as exc:
                missing = exc.code
            return {
                "saved": saved,
                "read": read,
                "found": found,
                "keys": keys,
                "block": block,
                "missing": missing,
            }

    got = run_async(scenario())

    assert got["read"]["id"] == got["saved"]["id"] and got["read"]["type"] == "decision"
    assert got["found"]["results"][0]["key"] == "cache-ttl"
    assert sorted(got["keys"]) == ["cache-ttl", "fact-0", "fact-1", "fact-2"]
    assert "The build cache expires after 7 days." in got["block"]["text"]
    assert got["missing"] == "not_found"


def test_refusals_are_exceptions_with_the_servers_code_and_never_the_token(
    mcp_server: Server, team: Team, other_team: Team
) -> None:
    writer = make_agent(team, "sdk-bot", ["read", "write"]).token
    reader = make_agent(team, "reader-bot", ["read"]).token
    outsider = make_agent(other_team, "outsider-bot", ["read", "write"]).token
    with hub_of(mcp_server, writer) as hub:
        hub.save("secret-plan", "The launch is on the 3rd.")
    raised: dict[str, MemoryHubError] = {}
    for name, token, call in (
        ("outsider", outsider, lambda hub: hub.get("secret-plan")),
        ("reader", reader, lambda hub: hub.save("k", "text")),
        ("invalid", writer, lambda hub: hub.save("bad key with spaces", "text")),
        ("stranger", "mh_not-a-token", lambda hub: hub.get("secret-plan")),
    ):
        with hub_of(mcp_server, token) as hub, pytest.raises(MemoryHubError) as caught:
            call(hub)
        raised[name] = caught.value
        assert token not in str(caught.value) and token not in repr(hub)
        assert token not in json.dumps(caught.value.body)

    assert isinstance(raised["outsider"], NotFound) and raised["outsider"].code == "not_found"
    assert isinstance(raised["reader"], Forbidden) and raised["reader"].code == "forbidden"
    assert isinstance(raised["invalid"], InvalidRequest) and "key" in raised["invalid"].fields
    assert isinstance(raised["stranger"], Unauthenticated) and raised["stranger"].status == 401
    assert str(raised["outsider"]) == "not found (404 not_found): not found"
