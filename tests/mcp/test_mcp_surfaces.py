"""The two tool lists (docs/agents.md, "Tool surfaces"): `/mcp/` lists the handful of
tools an agent needs every session within 8 KiB, `/mcp/full/` every tool; an endpoint
runs only what it lists; a save answers a few hundred bytes unless the agent asks for
the whole entry. In-process on the server's own path, then over HTTP."""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from agents.mcp.http import admit
from agents.mcp.server import SURFACE_ENVIRON_KEY, list_tools
from agents.mcp.tools import CORE_TOOLS, TOOLS
from tests.conftest import Agent, make_agent
from tests.mcp.conftest import Server, call_in_process

MAX_CORE_LIST_BYTES = 8192
MAX_SAVE_ANSWER_BYTES = 300
MAX_DESCRIPTION_CHARS = 300
CORE = {"memory_context", "memory_search", "memory_save", "memory_get", "memory_list", "memory_history"}


def wire_bytes(result: dict[str, Any]) -> int:
    """A result's size as the server sends it: compact JSON (the SDK's model_dump_json)."""
    return len(json.dumps(result, separators=(",", ":"), ensure_ascii=False).encode())


def answer_bytes(body: dict[str, Any]) -> int:
    """A tool answer's size as a model reads it: the JSON text of the result's content."""
    return len(json.dumps(body, ensure_ascii=False).encode())


def listed(surface: str) -> dict[str, Any]:
    """tools/list's result on an endpoint, built by the server's own handler and dumped
    as the SDK's runner dumps a result."""
    ctx = SimpleNamespace(request=SimpleNamespace(scope={"wsgi_environ": {SURFACE_ENVIRON_KEY: surface}}))
    # Its own thread: a browser test in the same worker may leave this thread's loop running.
    with ThreadPoolExecutor(max_workers=1) as pool:
        result = pool.submit(asyncio.run, list_tools(ctx, None)).result()  # type: ignore[arg-type]
    dumped: dict[str, Any] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return dumped


def test_the_core_list_is_the_handful_an_agent_needs_within_8_kib() -> None:
    core = listed("core")
    assert {tool["name"] for tool in core["tools"]} == CORE == set(CORE_TOOLS)
    assert wire_bytes(core) <= MAX_CORE_LIST_BYTES
    for tool in core["tools"]:
        assert len(tool["description"]) <= MAX_DESCRIPTION_CHARS, tool["name"]


def test_the_full_list_has_every_tool() -> None:
    full = listed("full")
    assert {tool["name"] for tool in full["tools"]} == set(TOOLS)
    assert len(TOOLS) > len(CORE) and wire_bytes(full) > wire_bytes(listed("core"))


@pytest.mark.django_db(transaction=True)
def test_the_core_endpoint_runs_only_its_tools_and_says_where_the_others_are(member: Agent) -> None:
    status, body = call_in_process(member.token, "memory_rate", {"key": "k", "direction": "up"}, path="/mcp/")
    assert status == 200
    assert body == {
        "error": "not_found",
        "detail": "memory_rate is on the full tool list only, at /mcp/full/",
    }
    _, unknown = call_in_process(member.token, "no_such_tool", {}, path="/mcp/")
    assert unknown == {"error": "not_found", "detail": "no tool named 'no_such_tool'"}
    # An argument the core save leaves to the full list is refused, not dropped.
    anchored = {"key": "k", "content": "x", "anchor": {"type": "url", "value": "https://example.com/"}}
    _, refused = call_in_process(member.token, "memory_save", anchored, path="/mcp/")
    assert refused["error"] == "invalid" and refused["fields"] == {"anchor": ["unknown field"]}
    assert call_in_process(member.token, "memory_save", anchored)[1]["saved"] is True


@pytest.mark.django_db(transaction=True)
def test_a_path_under_mcp_that_is_no_endpoint_is_not_found(member: Agent) -> None:
    from django.test import RequestFactory

    for path in ("/mcp/tools/", "/mcp/full/extra", "/mcpx"):
        environ = RequestFactory().post(path, HTTP_AUTHORIZATION=f"Bearer {member.token}").environ
        refusal = admit(environ)
        if path == "/mcpx":
            continue  # not MCP's at all: Django answers it
        assert refusal is not None and refusal[0] == 404, path
        assert refusal[1] == {
            "error": "not_found",
            "detail": "no MCP endpoint here: /mcp/ serves the core tools, /mcp/full/ every tool",
        }
    for path in ("/mcp", "/mcp/", "/mcp/full", "/mcp/full/"):
        environ = RequestFactory().post(path, HTTP_AUTHORIZATION=f"Bearer {member.token}").environ
        assert admit(environ) is None, path
        assert environ[SURFACE_ENVIRON_KEY] == ("full" if "full" in path else "core")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("path", ["/mcp/", "/mcp/full/"])
def test_a_save_answers_its_id_and_key_in_at_most_300_bytes(member: Agent, path: str) -> None:
    text = "Deploys wait for the canary to stay green for ten minutes before traffic moves."
    _, saved = call_in_process(
        member.token, "memory_save", {"key": "deploy-canary", "content": text}, path=path
    )
    assert set(saved) == {"saved", "id", "key", "type"} and saved["key"] == "deploy-canary"
    assert answer_bytes(saved) <= MAX_SAVE_ANSWER_BYTES

    change = {"key": "deploy-canary", "content": text + " Fifteen on Fridays.", "supersede_reason": "Fridays"}
    _, superseded = call_in_process(member.token, "memory_save", change, path=path)
    assert superseded["supersedes_id"] == saved["id"] and superseded["id"] != saved["id"]
    assert answer_bytes(superseded) <= MAX_SAVE_ANSWER_BYTES

    _, derived = call_in_process(
        member.token, "memory_save", {"content": "Never deploy on Fridays."}, path=path
    )
    # Without a key, the derived key; a text that reads like another type, the hint.
    assert derived["key"].startswith("mem:never-deploy-on-fridays:") and derived["type"] == "context"
    assert derived["hint"]["suggested_type"] == "lesson"
    assert answer_bytes(derived) <= MAX_SAVE_ANSWER_BYTES


@pytest.mark.django_db(transaction=True)
def test_return_entry_answers_the_whole_entry_as_rest_does(member: Agent) -> None:
    arguments = {"key": "whole", "content": "The whole entry, please.", "return_entry": True}
    _, whole = call_in_process(member.token, "memory_save", arguments, path="/mcp/")
    rest = member.client.post(
        member.url("memories/"),
        {"key": "whole-rest", "content": "The whole entry, please, by REST."},
        format="json",
    )
    assert rest.status_code == 201
    assert set(whole) == {"saved", *rest.json()}
    assert whole["content"] == "The whole entry, please." and whole["updated_by"] == "writer-bot"


@pytest.mark.django_db(transaction=True)
def test_a_refused_duplicate_names_the_entry_holding_the_text(member: Agent) -> None:
    text = "Staging resets every night at two."
    call_in_process(member.token, "memory_save", {"key": "staging-reset", "content": text})
    _, refused = call_in_process(member.token, "memory_save", {"key": "nightly", "content": text})
    assert refused["saved"] is False and "the same text" in refused["detail"]
    assert refused["duplicate_of"]["key"] == "staging-reset" and set(refused["duplicate_of"]) == {"id", "key"}
    assert "allow_duplicate" in refused["detail"]
    _, whole = call_in_process(
        member.token, "memory_save", {"key": "nightly", "content": text, "return_entry": True}
    )
    assert whole["duplicate_of"]["content"] == text


@pytest.mark.django_db(transaction=True)
def test_the_core_context_answers_the_markdown_block(member: Agent) -> None:
    call_in_process(
        member.token,
        "memory_save",
        {"key": "who", "content": "We are the payments team.", "type": "identity"},
    )
    status, body = call_in_process(member.token, "memory_context", {"project": "api"}, path="/mcp/")
    assert status == 200 and "We are the payments team." in body["text"]
    _, refused = call_in_process(member.token, "memory_context", {"format": "json"}, path="/mcp/")
    assert refused["fields"] == {"format": ["unknown field"]}


# --- over HTTP: what a client receives -------------------------------------------------

RPC_HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}


def rpc(url: str, token: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    response = httpx.post(
        url, json=message, headers={**RPC_HEADERS, "Authorization": f"Bearer {token}"}, timeout=60
    )
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


@pytest.mark.django_db(transaction=True)
def test_over_http_the_core_list_fits_and_the_full_list_has_every_tool(mcp_server: Server, team: Any) -> None:
    token = make_agent(team, "surface-bot", ["read", "write"]).token
    core = rpc(mcp_server.mcp_url, token, "tools/list", {})["result"]
    full = rpc(mcp_server.full_url, token, "tools/list", {})["result"]
    assert {tool["name"] for tool in core["tools"]} == CORE
    assert {tool["name"] for tool in full["tools"]} == set(TOOLS)
    assert wire_bytes(core) <= MAX_CORE_LIST_BYTES

    call = {"name": "memory_save", "arguments": {"key": "over-http", "content": "Saved over HTTP."}}
    saved = rpc(mcp_server.mcp_url, token, "tools/call", call)["result"]
    assert not saved["isError"]
    assert len(saved["content"][0]["text"].encode()) <= MAX_SAVE_ANSWER_BYTES

    wrong = httpx.post(
        mcp_server.base + "/mcp/tools",
        json={},
        headers={**RPC_HEADERS, "Authorization": f"Bearer {token}"},
        timeout=60,
    )
    assert wrong.status_code == 404 and wrong.json()["error"] == "not_found"
