"""A service whose Redis hangs: the stack the hung-Redis test and drill run against.

A Redis of the test's own (memoryhub.embedded_redis), a real Celery worker on it, and the
real web server (gunicorn, the real settings: the throttles count in that Redis, saves
enqueue their indexing on it) on the suite's test database. `hang()` sends the Redis
SIGSTOP: it keeps its socket and accepts connections, but answers nothing, the way a
Redis stuck on a slow disk or a frozen host does (a stopped one refuses at once, which
tests/drill/test_broker_outage.py covers). `resume()` sends SIGCONT."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from memoryhub import embedded_redis as embedded
from teams.models import Team
from tests.conftest import make_agent
from tests.web_server import WebServer, server_env
from tests.worker import CeleryProcess, database_url

# Hang detectors, not speed targets.
REQUEST_SECONDS = 60.0


@dataclass
class HungRedisStack:
    redis: embedded.EmbeddedRedis
    server: WebServer
    worker: CeleryProcess
    base_url: str
    token: str
    agent: httpx.Client
    hung: bool = False

    def new_agent(self) -> httpx.Client:
        """Another client of the same agent (a client per thread)."""
        return httpx.Client(
            base_url=self.base_url, headers={"Authorization": f"Bearer {self.token}"}, timeout=REQUEST_SECONDS
        )

    def hang(self) -> None:
        os.kill(self.redis.process.pid, signal.SIGSTOP)
        self.hung = True

    def resume(self) -> None:
        if self.hung:
            os.kill(self.redis.process.pid, signal.SIGCONT)
            self.hung = False

    def timed(
        self, method: str, path: str, client: httpx.Client | None = None, **kwargs: Any
    ) -> tuple[httpx.Response, float]:
        """The agent's request (through `client`, else the stack's) and the seconds it took."""
        started = time.perf_counter()
        response = (client or self.agent).request(method, path, **kwargs)
        return response, time.perf_counter() - started

    def save(
        self, key: str, content: str, client: httpx.Client | None = None
    ) -> tuple[httpx.Response, float]:
        # allow_duplicate: the texts of a run are alike, and none may be answered with another.
        body = {"key": key, "content": content, "allow_duplicate": True}
        return self.timed("POST", "memories/", client, json=body)


@contextmanager
def hung_redis_stack(
    *, team: Team, tmp_path: Path, start_worker: Callable[..., CeleryProcess], **env: str
) -> Iterator[HungRedisStack]:
    """The stack, running (`env` goes to the server and the worker); stopped at the end,
    the Redis resumed first if the test left it hung."""
    redis = embedded.start(tmp_path / "redis")
    server: WebServer | None = None
    stack: HungRedisStack | None = None
    try:
        # Keyword-only indexing: the worker starts and indexes in moments, with no model.
        # Reconcile at once: an entry left pending is due as soon as the broker answers.
        settings = {"MEMORYHUB_EMBEDDING_PROFILE": "none", "MEMORYHUB_RECONCILE_AFTER_SECONDS": "0", **env}
        worker = start_worker(broker_url=redis.url, **settings)
        server_settings = {
            "REDIS_URL": redis.url,
            "MEMORYHUB_QUEUE": worker.env["MEMORYHUB_QUEUE"],
            **settings,
        }
        server = WebServer(
            server_env(database_url(), **server_settings), tmp_path / "gunicorn.log", "--workers", "1"
        ).start()
        token = make_agent(team, "hung-redis-bot", ["read", "write"]).token
        base_url = f"{server.base}/api/v1/teams/{team.slug}/"
        agent = httpx.Client(
            base_url=base_url, headers={"Authorization": f"Bearer {token}"}, timeout=REQUEST_SECONDS
        )
        stack = HungRedisStack(
            redis=redis, server=server, worker=worker, base_url=base_url, token=token, agent=agent
        )
        yield stack
    finally:
        if stack is not None:
            stack.resume()
            stack.agent.close()
        if server is not None:
            server.stop()
        redis.stop()
