"""Every MCP tool through the real server (gunicorn, /mcp/) and the SDK's own client:
the tool list with its annotations, each tool's happy path, and its errors in REST's
error shape."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from mcp import Client

from agents.mcp.tools import TOOLS
from memories.learnings import claim_hash
from memories.models import Memory
from teams.models import Team
from tests.conftest import make_agent, operator_view
from tests.mcp.conftest import Server, mcp_client, run_async, structured

pytestmark = pytest.mark.django_db(transaction=True)

READ_ONLY = {
    "memory_search", "memory_get", "memory_list", "memory_history", "memory_context", "skill_get", "memory_nudges",
    "drafts_list", "session_list", "fact_get",
}  # fmt: skip
DESTRUCTIVE = {"memory_delete", "vault_set", "nudge_resolve", "draft_review"}


def run(server: Server, token: str, scenario: Callable[[Client], Awaitable[None]], **options: Any) -> None:
    """The scenario on the full tool list (`/mcp/full/`) unless `surface` says otherwise."""
    options.setdefault("surface", "full")

    async def main() -> None:
        async with mcp_client(server, token, **options) as client:
            await scenario(client)

    run_async(main())


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    body = structured(result)
    assert not result.is_error, body
    return body


async def call_error(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    body = structured(result)
    assert result.is_error, body
    assert "Traceback" not in result.content[0].text
    return body


@pytest.fixture
def writer(team: Team) -> str:
    return make_agent(team, "writer-bot", ["read", "write"]).token


@pytest.fixture
def reader(team: Team) -> str:
    return make_agent(team, "reader-bot", ["read"]).token


@pytest.fixture
def admin(team: Team) -> str:
    return make_agent(team, "admin-bot", ["read", "write", "admin"]).token


def test_the_tool_list_names_every_tool_with_its_schema_and_annotations(
    mcp_server: Server, reader: str
) -> None:
    listed: dict[str, Any] = {}

    async def scenario(client: Client) -> None:
        listed.update({tool.name: tool for tool in (await client.list_tools()).tools})

    run(mcp_server, reader, scenario)

    assert set(listed) == set(TOOLS) == {
        "memory_save", "memory_save_batch", "memory_search", "memory_get", "memory_list", "memory_history", "memory_delete",
        "memory_context", "session_boot", "session_heartbeat", "session_end", "session_list", "memory_unsupersede",
        "memory_rate", "memory_annotate", "learning_record", "skill_get", "vault_set",
        "memory_confirm", "memory_nudges", "nudge_resolve", "drafts_extract", "drafts_list", "draft_review",
        "fact_set", "fact_get",
    }  # fmt: skip
    for name, tool in listed.items():
        assert tool.description and len(tool.description) > 80, name
        assert tool.input_schema["type"] == "object"
        assert tool.input_schema["additionalProperties"] is False
        annotations = tool.annotations
        assert annotations is not None
        assert annotations.read_only_hint is (name in READ_ONLY), name
        assert annotations.destructive_hint is (name in DESTRUCTIVE), name
        assert annotations.idempotent_hint is not None
    save = listed["memory_save"].input_schema
    assert save["required"] == ["content"]
    assert save["properties"]["content"]["maxLength"] == 64 * 1024
    assert save["properties"]["key"]["maxLength"] == 200
    assert listed["memory_search"].input_schema["properties"]["max_results"]["maximum"] == 50


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_save_search_get_in_both_protocol_eras(mcp_server: Server, writer: str, mode: str) -> None:
    async def scenario(client: Client) -> None:
        saved = await call(
            client, "memory_save", {"key": "deploy-rule", "content": "Deploys wait for the canary."}
        )
        assert saved["saved"] is True and saved["key"] == "deploy-rule"
        found = await call(client, "memory_search", {"query": "canary deploys", "mode": "keyword"})
        assert [r["key"] for r in found["results"]] == ["deploy-rule"]
        got = await call(client, "memory_get", {"key": "deploy-rule"})
        assert got["content"] == "Deploys wait for the canary." and got["total_lines"] == 1
        assert got["id"] == saved["id"] and got["updated_by"] == "writer-bot"

    run(mcp_server, writer, scenario, mode=mode)


def test_search_shows_a_key_once_as_its_current_entry_unless_old_versions_are_asked_for(
    mcp_server: Server, writer: str
) -> None:
    async def scenario(client: Client) -> None:
        old = await call(
            client, "memory_save", {"key": "deploy-friday", "content": "Never deploy on Fridays."}
        )
        new = await call(
            client,
            "memory_save",
            {"key": "deploy-friday", "content": "Never deploy on Fridays or before holidays.",
             "supersede_reason": "holiday freeze"},
        )  # fmt: skip
        for mode in ("keyword", "vector", "hybrid"):
            found = await call(client, "memory_search", {"query": "deploy on a Friday?", "mode": mode})
            assert [r["id"] for r in found["results"]] == [new["id"]], mode
            asked = await call(
                client,
                "memory_search",
                {"query": "deploy on a Friday?", "mode": mode, "include_superseded": True},
            )
            assert [(r["id"], r["superseded"]) for r in asked["results"]] == [
                (new["id"], False),
                (old["id"], True),
            ], mode
            assert asked["results"][1]["superseded_by"]["id"] == new["id"]

    run(mcp_server, writer, scenario)


def test_save_without_a_key_derives_a_stable_one_from_the_text(mcp_server: Server, writer: str) -> None:
    text = "Postgres upgrades need a fresh base backup first.\nThen run pg_upgrade --link."

    async def scenario(client: Client) -> None:
        first = await call(client, "memory_save", {"content": text, "type": "warning"})
        key = first["key"]
        # The first words' slug (40 characters at most) and the hash of the whole text.
        assert key == f"mem:postgres-upgrades-need-a-fresh-base-back:{claim_hash(text)}"
        assert first["type"] == "lesson"  # an alias resolved
        # The same text again: the same key, which already holds it.
        again = await call_error(client, "memory_save", {"content": text})
        assert again["error"] == "conflict" and again["current"]["key"] == key
        await call(client, "memory_delete", {"key": key})
        assert (await call(client, "memory_save", {"content": text}))["key"] == key

    run(mcp_server, writer, scenario)


def test_supersede_history_unsupersede_rate_annotate_and_delete(mcp_server: Server, writer: str) -> None:
    async def scenario(client: Client) -> None:
        first = await call(client, "memory_save", {"key": "db-host", "content": "The database runs on db1."})
        second = await call(
            client,
            "memory_save",
            {"key": "db-host", "content": "The database moved to db2.", "supersede_reason": "migration",
             "expected_version": first["id"]},
        )  # fmt: skip
        assert second["supersedes_id"] == first["id"]
        history = await call(client, "memory_history", {"key": "db-host", "limit": 1})
        assert [event["memory"]["id"] for event in history["history"]] == [second["id"]]
        assert history["next_cursor"]
        older = await call(client, "memory_history", {"key": "db-host", "cursor": history["next_cursor"]})
        assert {event["memory"]["id"] for event in older["history"]} == {first["id"]}
        old = await call(client, "memory_get", {"version_id": first["id"]})
        assert old["state"] == "superseded" and old["superseded_by"]["id"] == second["id"]

        restored = await call(
            client, "memory_unsupersede", {"key": "db-host", "reason": "db2 was rolled back"}
        )
        assert restored["content"] == "The database runs on db1." and restored["is_active"]
        rated = await call(client, "memory_rate", {"key": "db-host", "direction": "up"})
        assert rated["rating"] == 1
        note = await call(client, "memory_annotate", {"key": "db-host", "note": "check after each failover"})
        assert note["note"] == "check after each failover"
        got = await call(client, "memory_get", {"key": "db-host"})
        assert [a["note"] for a in got["annotations"]] == ["check after each failover"]

        deleted = await call(client, "memory_delete", {"key": "db-host"})
        assert deleted == {"deleted": True, "key": "db-host", "id": restored["id"]}
        gone = await call_error(client, "memory_get", {"key": "db-host"})
        assert gone["error"] == "not_found"

    run(mcp_server, writer, scenario)


def test_get_reads_a_long_text_a_slice_at_a_time(mcp_server: Server, writer: str) -> None:
    text = "".join(f"line {n}\n" for n in range(1, 8))

    async def scenario(client: Client) -> None:
        await call(client, "memory_save", {"key": "runbook", "content": text})
        part = await call(client, "memory_get", {"key": "runbook", "from_line": 3, "lines": 2})
        assert part["content"] == "line 3\nline 4\n"
        assert (part["from_line"], part["to_line"], part["total_lines"], part["has_more"]) == (3, 4, 7, True)
        tail = await call(client, "memory_get", {"key": "runbook", "from_line": 6})
        assert tail["content"] == "line 6\nline 7\n" and tail["has_more"] is False
        past = await call_error(client, "memory_get", {"key": "runbook", "from_line": 9})
        assert past["error"] == "invalid" and "from_line" in past["fields"]

    run(mcp_server, writer, scenario)


def test_list_pages_and_filters(mcp_server: Server, writer: str) -> None:
    async def scenario(client: Client) -> None:
        for n in range(3):
            await call(client, "memory_save", {"key": f"note-{n}", "content": f"Note number {n} about caching.",
                                               "project": "api" if n else "web", "allow_duplicate": True})  # fmt: skip
        page = await call(client, "memory_list", {"limit": 2})
        assert [m["key"] for m in page["results"]] == ["note-2", "note-1"]
        rest = await call(client, "memory_list", {"limit": 2, "cursor": page["next_cursor"]})
        assert [m["key"] for m in rest["results"]] == ["note-0"] and rest["next_cursor"] is None
        web = await call(client, "memory_list", {"project": "web"})
        assert [m["key"] for m in web["results"]] == ["note-0"]
        bad = await call_error(client, "memory_list", {"cursor": "not-a-cursor"})
        assert bad["error"] == "invalid"

    run(mcp_server, writer, scenario)


def test_context_and_sessions(mcp_server: Server, writer: str) -> None:
    async def scenario(client: Client) -> None:
        await call(client, "memory_save", {"key": "who-we-are", "content": "We are the payments team.",
                                           "type": "identity"})  # fmt: skip
        block = await call(client, "memory_context", {"max_tokens": 500, "format": "json"})
        assert "We are the payments team." in block["text"]
        assert block["tokens"]["budget"] == 500 and [e["key"] for e in block["entries"]] == ["who-we-are"]

        booted = await call(
            client, "session_boot", {"source": "test", "project": "payments", "current_task": "a"}
        )
        session_id = booted["session"]["id"]
        assert booted["session"]["status"] == "live" and "We are the payments team." in booted["injection"]
        beat = await call(client, "session_heartbeat", {"session_id": session_id, "current_task": "b"})
        assert beat["current_task"] == "b"
        ended = await call(client, "session_end", {"session_id": session_id})
        assert ended["status"] == "ended"
        late = await call_error(client, "session_heartbeat", {"session_id": session_id})
        assert late["error"] == "session_ended"

    run(mcp_server, writer, scenario)


def test_learning_skill_and_vault(mcp_server: Server, admin: str, team: Team) -> None:
    async def scenario(client: Client) -> None:
        learned = await call(client, "learning_record", {"topic": "deploys", "claim": "Canaries catch bad configs.",
                                                         "confidence": "high"})  # fmt: skip
        assert learned["outcome"] == "created" and learned["key"].startswith("learn:deploys:")
        same = await call(client, "learning_record", {"topic": "deploys", "claim": "Canaries catch bad configs.",
                                                      "confidence": "high"})  # fmt: skip
        assert same["outcome"] == "unchanged"

        await call(client, "memory_save", {"key": "release-steps", "content": "Tag, build, canary, promote.",
                                           "skill_trigger": {"name": "release", "keywords": ["release"]}})  # fmt: skip
        skill = await call(client, "skill_get", {"name": "release"})
        assert skill["key"] == "release-steps" and skill["skill_trigger"]["name"] == "release"

        # A text saved before its secret was put in the vault: redacted on the way out.
        await call(client, "memory_save", {"key": "leaky", "content": "the token is s3cr3t-v4lue-xyz"})
        secret = {"key": "deploy-token", "value": "s3cr3t-v4lue-xyz", "is_secret": True}
        vault = await call(client, "vault_set", secret)
        assert vault["created"] is True and "value" not in vault
        read = await call(client, "memory_get", {"key": "leaky"})
        assert "s3cr3t-v4lue-xyz" not in json.dumps(read) and read["content"].startswith("the token is ")

    run(mcp_server, admin, scenario)


def test_errors_carry_rest_codes_and_details(mcp_server: Server, writer: str) -> None:
    async def scenario(client: Client) -> None:
        await call(client, "memory_save", {"key": "taken", "content": "First text."})
        conflict = await call_error(client, "memory_save", {"key": "taken", "content": "Second text."})
        assert conflict["error"] == "conflict" and conflict["current"]["content"] == "First text."
        stale = await call_error(client, "memory_save", {"key": "taken", "content": "Third.", "supersede_reason": "x",
                                                         "expected_version": "00000000-0000-4000-8000-000000000001"})  # fmt: skip
        assert stale["error"] == "stale_version"

        unknown_field = await call_error(client, "memory_save", {"content": "x", "colour": "red"})
        assert unknown_field == {"error": "invalid", "detail": "the request did not validate",
                                 "fields": {"colour": ["unknown field"]}}  # fmt: skip
        bad_key = await call_error(client, "memory_save", {"key": "no spaces", "content": "x"})
        assert bad_key["error"] == "invalid" and "key" in bad_key["fields"]
        too_long = await call_error(client, "memory_save", {"key": "big", "content": "x" * (64 * 1024 + 1)})
        assert too_long["error"] == "invalid" and "content" in too_long["fields"]
        bad_type = await call_error(client, "memory_save", {"key": "typed", "content": "x", "type": "poem"})
        assert bad_type["error"] == "unknown_type"
        nul = await call_error(client, "memory_save", {"key": "nul", "content": "a\x00b"})
        assert nul["error"] == "invalid_characters"

        missing = await call_error(client, "memory_get", {"key": "never-saved"})
        assert missing == {"error": "not_found", "detail": "no active memory under this key"}
        neither = await call_error(client, "memory_get", {})
        assert neither["error"] == "invalid"
        no_version = await call_error(client, "memory_unsupersede", {"key": "taken", "reason": "undo"})
        assert no_version["error"] == "no_previous_version"
        no_session = await call_error(
            client, "session_end", {"session_id": "00000000-0000-4000-8000-000000000002"}
        )
        assert no_session["error"] == "not_found"
        no_skill = await call_error(client, "skill_get", {"name": "nothing-here"})
        assert no_skill["error"] == "not_found"
        no_tool = await call_error(client, "memory_teleport", {})
        assert no_tool["error"] == "not_found"

    run(mcp_server, writer, scenario)
    with operator_view():
        assert list(Memory.objects.values_list("key", flat=True)) == ["taken"]


def test_the_session_header_names_the_writer_as_on_rest(mcp_server: Server, writer: str) -> None:
    booted: dict[str, Any] = {}

    async def boot(client: Client) -> None:
        booted.update(await call(client, "session_boot", {"project": "api"}))

    run(mcp_server, writer, boot)
    session_id = booted["session"]["id"]
    answers: dict[str, Any] = {}

    async def main() -> None:
        async with mcp_client(mcp_server, writer, headers={"X-MemoryHub-Session": session_id}) as client:
            answers["saved"] = await call(
                client, "memory_save", {"key": "by-session", "content": "In a session.", "return_entry": True}
            )
        async with mcp_client(
            mcp_server, writer, headers={"X-MemoryHub-Session": "not a session id"}
        ) as client:
            answers["refused"] = await call_error(
                client, "memory_save", {"key": "other", "content": "Refused."}
            )

    run_async(main())

    assert answers["saved"]["updated_by"] == f"writer-bot/{session_id}"
    assert answers["refused"]["error"] == "invalid" and "X-MemoryHub-Session" in answers["refused"]["fields"]


def test_a_tool_error_does_not_echo_a_credential_from_the_arguments(mcp_server: Server, writer: str) -> None:
    async def scenario(client: Client) -> None:
        result = await client.call_tool(
            "memory_save", {"key": "deploy-notes", "content": "x", "type": "password is hunter2hunter2"}
        )
        assert result.is_error
        assert "hunter2hunter2" not in result.content[0].text
        body = structured(result)
        assert body["error"] == "unknown_type" and "[REDACTED:" in body["detail"]

    run(mcp_server, writer, scenario)
