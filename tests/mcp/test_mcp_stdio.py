"""`memoryhub mcp` (the package's console script): the SDK's stdio client launches it as
an MCP client would, and it serves the real server's tools, with no database of its own."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio.to_thread
import pytest
from django.db import connection
from mcp import Client, MCPError, StdioServerParameters
from mcp_types import CONNECTION_CLOSED

from agents.mcp.server import INSTRUCTIONS
from agents.mcp.tools import CORE_TOOLS, TOOLS
from teams.models import Team
from teams.services import revoke_token
from tests.conftest import make_agent
from tests.mcp.conftest import Server, run_async, structured

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.slow,
]  # runs the `memoryhub` command and Python

COMMAND = str(Path(sys.executable).parent / "memoryhub")
# Nothing of the server's settings: the proxy needs only the URL and the token.
CLIENT_ENV = {
    name: value
    for name, value in os.environ.items()
    if name in {"PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT"}
}


def stdio_parameters(url: str, **env: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=COMMAND,
        args=["mcp", "--url", url, "--token-env", "AGENT_TOKEN"],
        env={**CLIENT_ENV, **env},
        cwd="/",  # not the repository: the installed package, as an agent's machine has it
    )


def test_the_stdio_proxy_lists_the_tools_and_saves_and_searches(mcp_server: Server, team: Team) -> None:
    token = make_agent(team, "stdio-bot", ["read", "write"]).token
    seen: dict[str, Any] = {}

    async def main() -> None:
        async with Client(stdio_parameters(mcp_server.full_url, AGENT_TOKEN=token)) as client:
            seen["tools"] = {tool.name: tool for tool in (await client.list_tools()).tools}
            saved = await client.call_tool(
                "memory_save", {"key": "via-stdio", "content": "Proxied through stdio."}
            )
            seen["saved"] = structured(saved)
            found = await client.call_tool("memory_search", {"query": "proxied stdio", "mode": "keyword"})
            seen["found"] = structured(found)
            seen["got"] = structured(await client.call_tool("memory_get", {"key": "via-stdio"}))
            missing = await client.call_tool("memory_get", {"key": "not-there"})
            seen["missing"] = (missing.is_error, structured(missing))
            read = await client.read_resource("memoryhub://team/alpha/memory/via-stdio")
            seen["resource"] = read.contents[0].text
            with pytest.raises(MCPError) as unknown:
                await client.read_resource("memoryhub://team/alpha/memory/not-there")
            seen["unknown"] = unknown.value.error.data
            seen["prompts"] = [prompt.name for prompt in (await client.list_prompts()).prompts]
            seen["instructions"] = client.instructions

    run_async(main())

    assert set(seen["tools"]) == set(TOOLS)
    assert seen["tools"]["memory_delete"].annotations.destructive_hint is True
    assert seen["saved"]["key"] == "via-stdio" and seen["got"]["updated_by"] == "stdio-bot"
    assert [r["key"] for r in seen["found"]["results"]] == ["via-stdio"]
    assert seen["missing"] == (True, {"error": "not_found", "detail": "no active memory under this key"})
    assert seen["resource"] == "Proxied through stdio."
    assert seen["unknown"] == {"error": "not_found", "detail": "no active memory under this key"}
    assert seen["prompts"] == ["remember_what_we_learned"]
    assert seen["instructions"] == INSTRUCTIONS


def test_the_proxy_takes_the_servers_url_and_serves_the_core_list(mcp_server: Server, team: Team) -> None:
    token = make_agent(team, "stdio-bot", ["read"]).token
    listed: dict[str, set[str]] = {}

    async def main() -> None:
        for name, url in (
            ("root", mcp_server.base),
            ("root/", mcp_server.base + "/"),
            ("endpoint", mcp_server.mcp_url),
        ):
            async with Client(stdio_parameters(url, AGENT_TOKEN=token)) as client:
                listed[name] = {tool.name for tool in (await client.list_tools()).tools}

    run_async(main())

    assert listed == {"root": set(CORE_TOOLS), "root/": set(CORE_TOOLS), "endpoint": set(CORE_TOOLS)}


def refused(url: str, token: str | None) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """The proxy started as a client starts it, sent `initialize` and then stdin closed:
    the process, and its answer to the request."""
    env = {**CLIENT_ENV, **({"AGENT_TOKEN": token} if token is not None else {})}
    initialize = {"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}  # fmt: skip
    finished = subprocess.run(  # noqa: S603
        [COMMAND, "mcp", "--url", url, "--token-env", "AGENT_TOKEN"],
        env=env, input=json.dumps(initialize) + "\n", capture_output=True, text=True, timeout=60, cwd="/",
    )  # fmt: skip
    lines = finished.stdout.splitlines()
    return finished, json.loads(lines[0]) if lines else {}


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_proxy_says_why_the_server_refused_on_stderr_and_to_the_client(mcp_server: Server) -> None:
    bad = "mh_wrong-token-abcdef"
    unset = subprocess.run(  # noqa: S603
        [COMMAND, "mcp", "--url", mcp_server.mcp_url, "--token-env", "AGENT_TOKEN"],
        env=CLIENT_ENV, capture_output=True, text=True, timeout=60, cwd="/",
    )  # fmt: skip
    assert unset.returncode == 2 and "set AGENT_TOKEN to the agent token" in unset.stderr

    port = closed_port()
    cases = {
        "token": (mcp_server.mcp_url, "the server refused the token in AGENT_TOKEN (401: invalid token)"),
        "path": (f"{mcp_server.base}/wrong/", f"no MCP endpoint at {mcp_server.base}/wrong/mcp/ (404)"),
        "nothing there": (f"http://127.0.0.1:{port}/", f"cannot reach http://127.0.0.1:{port}/mcp/ ("),
    }
    for case, (url, reason) in cases.items():
        finished, answer = refused(url, bad)
        assert finished.returncode == 1, (case, finished.stderr)
        assert finished.stderr.startswith(f"memoryhub mcp: {reason}"), (case, finished.stderr)
        assert answer["id"] == 7 and answer["error"]["code"] == CONNECTION_CLOSED, case
        assert answer["error"]["message"].startswith(f"MemoryHub: {reason}"), case
        assert bad not in finished.stdout + finished.stderr
    _, answer = refused(mcp_server.mcp_url, bad)
    assert answer["error"]["data"] == {
        "url": mcp_server.mcp_url, "status": 401, "error": "unauthenticated", "detail": "invalid token"
    }  # fmt: skip


def test_a_token_revoked_mid_session_is_a_json_rpc_error_saying_so(mcp_server: Server, team: Team) -> None:
    token = make_agent(team, "revoked-bot", ["read"]).token
    seen: dict[str, Any] = {}

    def revoke() -> None:
        try:
            revoke_token(team=team, name="revoked-bot", actor="test")
        finally:
            connection.close()  # this thread's own

    async def main() -> None:
        async with Client(stdio_parameters(mcp_server.mcp_url, AGENT_TOKEN=token)) as client:
            seen["before"] = len((await client.list_tools()).tools)
            await anyio.to_thread.run_sync(revoke)
            with pytest.raises(MCPError) as failed:
                await client.list_tools()
            seen["error"] = failed.value.error

    run_async(main())

    assert seen["before"] == len(CORE_TOOLS)
    assert seen["error"].code == CONNECTION_CLOSED
    assert (
        seen["error"].message
        == "MemoryHub: the server refused the token in AGENT_TOKEN (401: this token has been revoked)"
    )


def test_the_client_command_imports_nothing_of_the_server() -> None:
    code = "import sys, memoryhub_client.cli, memoryhub_client.mcp_proxy; print(sorted(sys.modules))"
    loaded = subprocess.run(  # noqa: S603
        [sys.executable, "-c", code], env=CLIENT_ENV, capture_output=True, text=True, timeout=60, cwd="/"
    )
    assert loaded.returncode == 0, loaded.stderr
    modules = {name.split(".")[0] for name in eval(loaded.stdout)}  # noqa: S307 (our own print)
    assert not modules & {"django", "rest_framework", "memoryhub", "agents", "memories", "teams", "core"}
