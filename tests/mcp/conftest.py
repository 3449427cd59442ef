"""The real server for the MCP tests: gunicorn with the project's config
(memoryhub.gunicorn_conf: threaded workers) on a free port, on this run's test database,
and the SDK's own client over Streamable HTTP.

The server is started once per module; the tests that use it are transactional
(`django_db(transaction=True)`) so that it sees the rows they commit."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import httpx
import httpx2
import pytest
from django.conf import settings
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.search.conftest import free_port
from tests.worker import database_url, wait_for

T = TypeVar("T")
REPO = Path(__file__).resolve().parents[2]
GUNICORN = str(Path(sys.executable).parent / "gunicorn")
SERVER_START_SECONDS = 90.0  # a hang detector, not a speed target


class Server:
    def __init__(self, base: str, log: Path) -> None:
        self.base, self.log = base, log

    @property
    def mcp_url(self) -> str:
        return f"{self.base}/mcp/"

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


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
    env = {
        **{k: v for k, v in os.environ.items() if k not in {"REDIS_URL", "DATABASE_URL"}},
        "DJANGO_SETTINGS_MODULE": "memoryhub.settings",
        "DATABASE_URL": url,
        "MEMORYHUB_DATA_DIR": str(settings.DATA_DIR),
        "MEMORYHUB_PLAIN_HTTP": "true",
        "MEMORYHUB_EMBEDDING_PROFILE": "none",
        "MEMORYHUB_DB_POOL_MAX": "4",
        "WEB_CONCURRENCY": "1",
        **getattr(request.module, "SERVER_ENV", {}),
    }
    port = free_port()
    log = tmp_path_factory.mktemp("mcp-server") / "gunicorn.log"
    with log.open("wb") as handle:
        process = subprocess.Popen(  # noqa: S603
            [
                GUNICORN,
                "memoryhub.wsgi",
                "-c",
                "python:memoryhub.gunicorn_conf",
                "--bind",
                f"127.0.0.1:{port}",
            ],
            cwd=REPO,
            env=env,
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = Server(f"http://127.0.0.1:{port}", log)

    def answering() -> bool:
        assert process.poll() is None, server.log_text()
        with contextlib.suppress(httpx.TransportError):
            return httpx.get(f"{server.base}/healthz", timeout=2).status_code == 200
        return False

    try:
        wait_for(answering, SERVER_START_SECONDS, "gunicorn to answer")
        yield server
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)


@contextlib.asynccontextmanager
async def mcp_client(
    server: Server, token: str | None, *, headers: dict[str, str] | None = None, **options: Any
) -> AsyncIterator[Client]:
    """The SDK's client over Streamable HTTP, sending `token` as the bearer."""
    headers = {**(headers or {}), **({"Authorization": f"Bearer {token}"} if token is not None else {})}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        async with Client(streamable_http_client(server.mcp_url, http_client=http), **options) as client:
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
