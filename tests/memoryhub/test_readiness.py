"""/healthz and /readyz against real components.

A real server (gunicorn, the real settings, HTTPS-only as in production: the probes must
answer plain HTTP without a redirect) on the suite's test database, a Redis of the test's
own (memoryhub.embedded_redis, so stopping it disturbs no other test) and a real Celery
worker on it. The acceptance: /readyz turns 503 within 5 s of a component failing and
200 within 5 s of its recovery, measured by the wall clock from the moment the component
went away or came back. The unmigrated case runs the server with one migration more
than the database has applied (tests.memoryhub.readyz_probe, an empty migration), and
applies and rolls it back with `manage.py migrate`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from django.conf import settings
from django.db import connection

from memoryhub import embedded_redis as embedded
from tests.memoryhub.private_postgres import PrivatePostgres
from tests.web_server import WebServer, manage
from tests.worker import CeleryProcess, database_url, operator_database_url, wait_for

# The acceptance requirement: how long /readyz may take to notice a failure or a recovery.
FLIP_SECONDS = 5.0
# Hang detectors, not speed targets.
START_SECONDS = 90.0
POLL_SECONDS = 60.0
PROBE_APP = "readyz_probe"

# The servers and workers use the suite's test database; this test writes only to
# django_migrations, and must commit to be seen.
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.slow,
]  # gunicorn, workers, Redis and PostgreSQL of its own


def seconds_until(condition: Callable[[], bool], what: str) -> float:
    started = time.monotonic()
    wait_for(condition, POLL_SECONDS, what)
    return time.monotonic() - started


def server_env(**extra: str) -> dict[str, str]:
    """The real settings on the suite's test database, HTTPS-only (no DEBUG, no
    MEMORYHUB_PLAIN_HTTP) unless `extra` says otherwise."""
    inherited = {"REDIS_URL", "DATABASE_URL", "DEBUG", "MEMORYHUB_PLAIN_HTTP", "MEMORYHUB_QUEUE"}
    return {
        **{name: value for name, value in os.environ.items() if name not in inherited},
        "DJANGO_SETTINGS_MODULE": "memoryhub.settings",
        "DATABASE_URL": database_url(),
        "OPERATOR_DATABASE_URL": operator_database_url(),
        "MEMORYHUB_DATA_DIR": str(settings.DATA_DIR),
        "MEMORYHUB_DB_POOL_MAX": "2",
        **extra,
    }


class Server(WebServer):
    """One gunicorn process (one worker, threaded) with the deployment's config."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        super().__init__(env, log, "--workers", "1", "--threads", "4")

    def readyz(self) -> httpx.Response:
        # Never follows a redirect: an http -> https one would be a failure here.
        return httpx.get(f"{self.base}/readyz", timeout=15)


def statuses(response: httpx.Response) -> dict[str, str]:
    return {name: part["status"] for name, part in response.json()["components"].items()}


@dataclass
class Stack:
    folder: Path
    broker: embedded.EmbeddedRedis
    queue: str
    env: dict[str, str]
    server: Server | None = None
    worker: CeleryProcess | None = None

    def new_worker(self, log: Path) -> CeleryProcess:
        """A real worker on the test's Redis and queue (the arguments tests.worker uses)."""
        arguments = ["-Q", self.queue, "-n", f"{self.queue}@%h", "--concurrency", "1", "--pool", "prefork",
                     "--without-gossip", "--without-mingle", "--without-heartbeat"]  # fmt: skip
        return CeleryProcess("worker", arguments, self.env, log, b"ready.").start()


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    folder = tmp_path / "redis"
    queue = f"readyz-{os.getpid()}-{time.monotonic_ns()}"
    broker = embedded.start(folder)
    env = server_env(REDIS_URL=broker.url, MEMORYHUB_QUEUE=queue)
    ours = Stack(folder=folder, broker=broker, queue=queue, env=env)
    try:
        ours.worker = ours.new_worker(tmp_path / "worker.log")
        ours.server = Server(env, tmp_path / "gunicorn.log").start()
        yield ours
    finally:
        if ours.server is not None:
            ours.server.stop()
        if ours.worker is not None:
            ours.worker.stop()
        ours.broker.stop()


def test_readyz_names_the_broker_within_5_s_of_redis_stopping_and_recovers_within_5_s(stack: Stack) -> None:
    server = stack.server
    assert server is not None
    # A new process is not ready until it has loaded the embedding model.
    wait_for(lambda: server.readyz().status_code == 200, START_SECONDS, "/readyz to answer 200")
    ready = server.readyz()
    assert ready.status_code == 200, ready.text
    assert ready.json()["status"] == "ready"
    assert statuses(ready) == {"database": "ok", "broker": "ok", "worker": "ok", "embedding": "ok"}
    for part in ready.json()["components"].values():
        assert part["required"] is True
        assert isinstance(part["latency_ms"], int | float)
        assert part["latency_ms"] >= 0

    stack.broker.stop()
    to_fail = seconds_until(lambda: server.readyz().status_code == 503, "/readyz to answer 503")
    down = server.readyz()
    assert down.status_code == 503
    body = down.json()
    assert body["error"] == "not_ready"
    assert body["status"] == "not_ready"
    assert "broker" in body["detail"]
    assert body["components"]["broker"]["status"] == "failing"
    assert body["components"]["broker"]["reason"] == "unreachable"
    assert body["components"]["database"]["status"] == "ok"
    # Nothing that locates the broker: no URL, socket path, host or port.
    for secret in (
        stack.broker.url,
        str(embedded.socket_path(stack.folder)),
        "redis",
        "sock",
        "/",
        "127.0.0.1",
    ):
        assert secret not in down.text, down.text
    # Liveness looks at nothing: the process answers.
    alive = httpx.get(f"{server.base}/healthz", timeout=15)
    assert (alive.status_code, alive.json()) == (200, {"status": "ok"})
    assert httpx.post(f"{server.base}/readyz", timeout=15).status_code == 405

    stack.broker = embedded.start(stack.folder)
    to_recover = seconds_until(lambda: server.readyz().status_code == 200, "/readyz to answer 200 again")
    assert statuses(server.readyz()) == {"database": "ok", "broker": "ok", "worker": "ok", "embedding": "ok"}

    assert to_fail < FLIP_SECONDS, f"503 only {to_fail:.1f} s after the broker stopped"
    assert to_recover < FLIP_SECONDS, f"200 only {to_recover:.1f} s after the broker came back"


def test_readyz_names_the_worker_within_5_s_of_it_dying_and_recovers_within_5_s_of_a_new_one(
    stack: Stack, tmp_path: Path
) -> None:
    server, worker = stack.server, stack.worker
    assert server is not None and worker is not None
    wait_for(lambda: server.readyz().status_code == 200, START_SECONDS, "/readyz to answer 200")

    worker.kill()  # SIGKILL, as a crash: it says no goodbye
    to_fail = seconds_until(lambda: server.readyz().status_code == 503, "/readyz to answer 503")
    down = server.readyz().json()
    assert "worker" in down["detail"]
    assert down["components"]["worker"] == {
        "status": "failing",
        "required": True,
        "reason": "no worker heartbeat",
        "latency_ms": down["components"]["worker"]["latency_ms"],
    }
    assert down["components"]["broker"]["status"] == "ok"

    stack.worker = stack.new_worker(tmp_path / "worker-2.log")  # returns once it logged "ready."
    to_recover = seconds_until(lambda: server.readyz().status_code == 200, "/readyz to answer 200 again")

    assert to_fail < FLIP_SECONDS, f"503 only {to_fail:.1f} s after the worker died"
    assert to_recover < FLIP_SECONDS, f"200 only {to_recover:.1f} s after a worker was ready"


def _forget_probe_migration() -> None:
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM django_migrations WHERE app = %s", [PROBE_APP])


def test_readyz_answers_503_while_a_migration_is_not_applied_and_200_within_5_s_of_migrating(
    tmp_path: Path,
) -> None:
    # No broker (tasks in-process) and no embeddings: only the database decides here.
    env = server_env(
        DJANGO_SETTINGS_MODULE="tests.memoryhub.readyz_settings",
        MEMORYHUB_EMBEDDING_PROFILE="none",
        MEMORYHUB_PLAIN_HTTP="true",
    )
    _forget_probe_migration()  # left over by an interrupted run
    server = Server(env, tmp_path / "gunicorn.log")
    try:
        server.start()
        unmigrated = server.readyz()
        assert unmigrated.status_code == 503, unmigrated.text
        body = unmigrated.json()
        assert body["detail"] == "not ready: database"
        assert body["components"]["database"]["reason"] == "unmigrated: 1 migration"
        assert {name: part["status"] for name, part in body["components"].items() if name != "database"} == {
            "broker": "skipped",
            "worker": "skipped",
            "embedding": "skipped",
        }

        manage(env, "migrate", PROBE_APP, "--noinput")
        to_ready = seconds_until(lambda: server.readyz().status_code == 200, "/readyz to answer 200")
        assert statuses(server.readyz())["database"] == "ok"

        manage(env, "migrate", PROBE_APP, "zero", "--noinput")
        to_unready = seconds_until(lambda: server.readyz().status_code == 503, "/readyz to answer 503")
        assert server.readyz().json()["components"]["database"]["reason"] == "unmigrated: 1 migration"

        assert to_ready < FLIP_SECONDS, f"200 only {to_ready:.1f} s after migrating"
        assert to_unready < FLIP_SECONDS, f"503 only {to_unready:.1f} s after the rollback"
    finally:
        server.stop()
        _forget_probe_migration()


def test_readyz_names_the_database_within_5_s_of_it_dying_and_recovers_within_5_s_of_its_restart(
    tmp_path: Path,
) -> None:
    # A PostgreSQL of the test's own (killing the suite's would end the run), migrated by
    # the owner role; the server logs in as the application role, through its pool.
    data = tmp_path / "data"
    postgres = PrivatePostgres(data)
    server: Server | None = None
    try:
        postgres.start()
        env = server_env(
            MEMORYHUB_DATA_DIR=str(data),
            MEMORYHUB_EMBEDDING_PROFILE="none",
            MEMORYHUB_PLAIN_HTTP="true",
        )
        manage({**env, **postgres.urls("memoryhub_owner")}, "migrate", "--noinput")
        env.update(postgres.urls("memoryhub_app"))
        server = Server(env, tmp_path / "gunicorn.log").start()
        wait_for(lambda: server.readyz().status_code == 200, START_SECONDS, "/readyz to answer 200")

        postgres.kill()
        to_fail = seconds_until(lambda: server.readyz().status_code == 503, "/readyz to answer 503")
        down = server.readyz()
        assert down.json()["detail"] == "not ready: database"
        assert down.json()["components"]["database"]["reason"] in {"unreachable", "timeout"}
        assert str(data) not in down.text and "memoryhub_app" not in down.text

        postgres.start()  # the same data folder, with crash recovery
        to_recover = seconds_until(lambda: server.readyz().status_code == 200, "/readyz to answer 200 again")

        assert to_fail < FLIP_SECONDS, f"503 only {to_fail:.1f} s after the database died"
        assert to_recover < FLIP_SECONDS, f"200 only {to_recover:.1f} s after the database restarted"
    finally:
        if server is not None:
            server.stop()
        postgres.stop()
    assert not postgres.processes(), "the private PostgreSQL is still running"
