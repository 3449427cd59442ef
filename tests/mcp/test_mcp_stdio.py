"""`memoryhub mcp` (the package's console script): the SDK's stdio client launches it as
an MCP client would, and it serves the real server's tools, with no database of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, MCPError, StdioServerParameters

from agents.mcp.tools import TOOLS
from teams.models import Team
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


def stdio_parameters(server: Server, **env: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=COMMAND,
        args=["mcp", "--url", server.mcp_url, "--token-env", "AGENT_TOKEN"],
        env={**CLIENT_ENV, **env},
        cwd="/",  # not the repository: the installed package, as an agent's machine has it
    )


def test_the_stdio_proxy_lists_the_tools_and_saves_and_searches(mcp_server: Server, team: Team) -> None:
    token = make_agent(team, "stdio-bot", ["read", "write"]).token
    seen: dict[str, Any] = {}

    async def main() -> None:
        async with Client(stdio_parameters(mcp_server, AGENT_TOKEN=token)) as client:
            seen["tools"] = {tool.name: tool for tool in (await client.list_tools()).tools}
            saved = await client.call_tool(
                "memory_save", {"key": "via-stdio", "content": "Proxied through stdio."}
            )
            seen["saved"] = structured(saved)
            found = await client.call_tool("memory_search", {"query": "proxied stdio", "mode": "keyword"})
            seen["found"] = structured(found)
            missing = await client.call_tool("memory_get", {"key": "not-there"})
            seen["missing"] = (missing.is_error, structured(missing))
            read = await client.read_resource("memoryhub://team/alpha/memory/via-stdio")
            seen["resource"] = read.contents[0].text
            with pytest.raises(MCPError) as unknown:
                await client.read_resource("memoryhub://team/alpha/memory/not-there")
            seen["unknown"] = unknown.value.error.data
            seen["prompts"] = [prompt.name for prompt in (await client.list_prompts()).prompts]

    run_async(main())

    assert set(seen["tools"]) == set(TOOLS)
    assert seen["tools"]["memory_delete"].annotations.destructive_hint is True
    assert seen["saved"]["key"] == "via-stdio" and seen["saved"]["updated_by"] == "stdio-bot"
    assert [r["key"] for r in seen["found"]["results"]] == ["via-stdio"]
    assert seen["missing"] == (True, {"error": "not_found", "detail": "no active memory under this key"})
    assert seen["resource"] == "Proxied through stdio."
    assert seen["unknown"] == {"error": "not_found", "detail": "no active memory under this key"}
    assert seen["prompts"] == ["remember_what_we_learned"]


def test_the_proxy_refuses_to_start_without_a_valid_token_and_never_prints_it(mcp_server: Server) -> None:
    arguments = [COMMAND, "mcp", "--url", mcp_server.mcp_url, "--token-env", "AGENT_TOKEN"]
    unset = subprocess.run(arguments, env=CLIENT_ENV, capture_output=True, text=True, timeout=60, cwd="/")  # noqa: S603
    assert unset.returncode == 2 and "set AGENT_TOKEN to the agent token" in unset.stderr

    bad = "mh_wrong-token-abcdef"
    refused = subprocess.run(  # noqa: S603
        arguments, env={**CLIENT_ENV, "AGENT_TOKEN": bad}, capture_output=True, text=True, timeout=60, cwd="/",
        input="",
    )  # fmt: skip
    assert refused.returncode == 1, refused.stderr
    assert "memoryhub mcp: cannot serve" in refused.stderr
    assert bad not in refused.stdout + refused.stderr


def test_the_client_command_imports_nothing_of_the_server() -> None:
    code = "import sys, memoryhub_client.cli, memoryhub_client.mcp_proxy; print(sorted(sys.modules))"
    loaded = subprocess.run(  # noqa: S603
        [sys.executable, "-c", code], env=CLIENT_ENV, capture_output=True, text=True, timeout=60, cwd="/"
    )
    assert loaded.returncode == 0, loaded.stderr
    modules = {name.split(".")[0] for name in eval(loaded.stdout)}  # noqa: S307 (our own print)
    assert not modules & {"django", "rest_framework", "memoryhub", "agents", "memories", "teams", "core"}
