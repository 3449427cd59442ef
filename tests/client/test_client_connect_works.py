"""What `memoryhub connect` writes really connects: the SDK's own client, configured from the
written files exactly as the agent's client reads them (environment variables expanded the
way each client documents), lists the core tools and saves and searches a memory over
`/mcp/` and over `memoryhub mcp` (stdio), which needs nothing on the PATH."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from agents.mcp.tools import CORE_TOOLS
from teams.models import Team
from tests.client.conftest import Cli
from tests.conftest import make_agent
from tests.mcp.conftest import Server, run_async, structured

pytestmark = pytest.mark.django_db(transaction=True)


def expand(value: str, environment: dict[str, str], pattern: str) -> str:
    return re.sub(pattern, lambda match: environment[match.group(1)], value)


async def save_and_search(client: Client, key: str) -> dict[str, Any]:
    tools = {tool.name for tool in (await client.list_tools()).tools}
    saved = structured(await client.call_tool("memory_save", {"key": key, "content": f"Connected as {key}."}))
    found = structured(await client.call_tool("memory_search", {"query": f"connected {key}"}))
    return {"tools": tools, "saved": saved["key"], "found": found["results"][0]["key"]}


async def over_http(url: str, headers: dict[str, str], key: str) -> dict[str, Any]:
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            return await save_and_search(client, key)


def test_the_written_configurations_connect_each_client(
    mcp_server: Server, team: Team, cli: Cli, tmp_path: Path
) -> None:
    token = make_agent(team, "connected-bot", ["read", "write"]).token
    environment = {"MEMORYHUB_TOKEN": token}
    project = tmp_path / "project"
    project.mkdir()
    codex_home = cli.home / "codex"
    for client in ("claude-code", "cursor", "codex"):
        written = cli("connect", client, "--write", "--url", mcp_server.base, "--team", "alpha", "--dir", str(project),
                      CODEX_HOME=str(codex_home), **environment)  # fmt: skip
        assert written.returncode == 0, written.stderr
    generic = json.loads(cli("connect", "generic", "--url", mcp_server.base).stdout)  # valid on its own

    claude = json.loads((project / ".mcp.json").read_text())["mcpServers"]["memoryhub"]
    cursor = json.loads((project / ".cursor" / "mcp.json").read_text())["mcpServers"]["memoryhub"]
    codex = tomllib.loads((codex_home / "config.toml").read_text())["mcp_servers"]["memoryhub"]
    stdio = generic["mcpServers"]["memoryhub"]
    answers = {
        "claude-code": run_async(over_http(
            expand(claude["url"], environment, r"\$\{(\w+)\}"),
            {name: expand(value, environment, r"\$\{(\w+)\}") for name, value in claude["headers"].items()},
            "via-claude",
        )),
        "cursor": run_async(over_http(
            cursor["url"],
            {name: expand(value, environment, r"\$\{env:(\w+)\}") for name, value in cursor["headers"].items()},
            "via-cursor",
        )),
        "codex": run_async(over_http(
            codex["url"], {"Authorization": f"Bearer {environment[codex['bearer_token_env_var']]}"}, "via-codex"
        )),
    }  # fmt: skip

    async def over_stdio() -> dict[str, Any]:
        parameters = StdioServerParameters(
            command=stdio["command"],
            args=stdio["args"],
            # The command is named by its absolute path: the installation's folder need not be on the PATH.
            env={**cli.env, **environment, "PATH": "/usr/bin:/bin"},
            cwd=str(tmp_path),
        )
        async with Client(parameters) as client:
            return await save_and_search(client, "via-stdio")

    answers["generic"] = run_async(over_stdio())

    for client, key in (("claude-code", "via-claude"), ("cursor", "via-cursor"), ("codex", "via-codex"),
                        ("generic", "via-stdio")):  # fmt: skip
        assert answers[client] == {"tools": set(CORE_TOOLS), "saved": key, "found": key}, client
