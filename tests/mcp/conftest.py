"""The real server for the MCP tests: gunicorn with the project's config
(memoryhub.gunicorn_conf: threaded workers) on a free port, on this run's test database,
and the SDK's own client over Streamable HTTP.

The server is started once per module; the tests that use it are transactional
(`django_db(transaction=True)`) so that it sees the rows they commit."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import httpx2
import pytest
from django.test import RequestFactory
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from agents.mcp.http import admit
from agents.mcp.server import REQUEST_ENVIRON_KEY, SURFACE_ENVIRON_KEY, find_tool, run_tool
from tests.web_server import WebServer, server_env
from tests.worker import database_url

T = TypeVar("T")


class Server(WebServer):
    @property
    def mcp_url(self) -> str:
        """The default endpoint: the core tools."""
        return f"{self.base}/mcp/"

    @property
    def full_url(self) -> str:
        """Every tool."""
        return f"{self.base}/mcp/full/"

    def url_of(self, surface: str) -> str:
        return {"core": self.mcp_url, "full": self.full_url}[surface]


@pytest.fixture(scope="module")
def mcp_server(
    request: pytest.FixtureRequest,
    django_db_setup: None,
    django_db_blocker: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Server]:
    """One server per test module; a module may add settings in `SERVER_ENV`."""
    with django_db_blocker.unblock():
        url = database_url()
    env = server_env(
        url,
        MEMORYHUB_DB_POOL_MAX="4",
        WEB_CONCURRENCY="1",
        **getattr(request.module, "SERVER_ENV", {}),
    )
    server = Server(env, tmp_path_factory.mktemp("mcp-server") / "gunicorn.log").start()
    try:
        yield server
    finally:
        server.stop()


@contextlib.asynccontextmanager
async def mcp_client(
    server: Server,
    token: str | None,
    *,
    surface: str = "core",
    headers: dict[str, str] | None = None,
    **options: Any,
) -> AsyncIterator[Client]:
    """The SDK's client over Streamable HTTP at the endpoint of `surface` (the core tools
    or the full list), sending `token` as the bearer."""
    headers = {**(headers or {}), **({"Authorization": f"Bearer {token}"} if token is not None else {})}
    url = server.url_of(surface)
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        async with Client(streamable_http_client(url, http_client=http), **options) as client:
            yield client


def run_async(coroutine: Coroutine[Any, Any, T]) -> T:
    """asyncio.run in a thread of its own: once the browser tests have run, Playwright's
    event loop is running in the main thread for the rest of the session."""
    with ThreadPoolExecutor(max_workers=1) as executor:
        return executor.submit(asyncio.run, coroutine).result()


def structured(result: Any) -> dict[str, Any]:
    """A tool result's body: its structured content, which its text repeats."""
    assert json.loads(result.content[0].text) == result.structured_content
    body: dict[str, Any] = result.structured_content
    return body


def call_in_process(
    token: str | None, tool: str, arguments: dict[str, Any], *, path: str = "/mcp/full/", **headers: str
) -> tuple[int, dict[str, Any]]:
    """A tool call on the server's own path, in this process (agents.mcp.http.admit, the
    endpoint's tool, then agents.mcp.server.run_tool): the HTTP status of a refusal before
    MCP and its body, or 200 and the tool's answer (an error in the one shape when it
    failed). Every tool by default; `path="/mcp/"` for the core list."""
    if token is not None:
        headers["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    environ = RequestFactory().post(path, **headers).environ
    refusal = admit(environ)
    if refusal is not None:
        return refusal[0], refusal[1]
    found = find_tool(environ[SURFACE_ENVIRON_KEY], tool)
    if isinstance(found, dict):
        return 200, found
    body, _ = run_tool(found, environ[REQUEST_ENVIRON_KEY], arguments)
    return 200, body
