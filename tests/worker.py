"""Real Celery processes on a Redis that the test run starts itself.

- `embedded_redis` (session): memoryhub.embedded_redis's server in a temporary folder, on
  a unix socket, stopped when the session ends. No Redis the machine happens to run is
  ever used, so these tests need no service and never skip.
- `worker`: the session's shared worker (started on first use, one per run) and this
  test's tasks sent to it instead of running in-process.
- `start_worker` / `start_beat`: processes of the test's own, on a queue of its own, with
  settings of their own through the environment (an embedding profile, a short schedule),
  stopped when the test ends.

The processes run `celery -A memoryhub` with the real settings against this run's test
database, so a test using them needs `pytest.mark.django_db(transaction=True)`: a worker
sees only committed rows.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from celery.signals import after_task_publish
from django.conf import settings
from kombu import pools

from core.redis_outage import forget_redis_failures
from memories.models import Memory
from memoryhub import embedded_redis as embedded
from memoryhub.celery import app as celery_app
from teams.roles import APP_ROLE, OPERATOR_ROLE
from teams.scope import dangerously_bypass_team_scope
from tests.db_roles import service_database_url

REPO = Path(__file__).resolve().parents[1]
CELERY = str(Path(sys.executable).parent / "celery")
# Hang detectors, not speed targets.
START_SECONDS = 90.0
INDEX_SECONDS = 60.0


def wait_for(condition: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {seconds}s waiting for {what}")


def index_state(team_id: int, key: str) -> str | None:
    """The index_state of the team's newest version of `key` (None when there is none)."""
    with dangerously_bypass_team_scope(reason="test assertion"):
        return (
            Memory.objects.filter(team_id=team_id, key=key)
            .order_by("-created_at")
            .values_list("index_state", flat=True)
            .first()
        )


def wait_for_index_state(team_id: int, key: str, state: str = "indexed") -> None:
    wait_for(lambda: index_state(team_id, key) == state, INDEX_SECONDS, f"'{key}' to be {state}")


SCHEDULED_NAME = "the test's job"


def schedule_every_second(task: str) -> None:
    """Beat's schedule (django-celery-beat's tables) holding only `task`, every second. A
    transactional test's database is emptied after each test: the schedule the
    migrations created is not there, and the test's own is gone afterwards."""
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    PeriodicTask.objects.all().delete()
    every_second, _ = IntervalSchedule.objects.get_or_create(every=1, period=IntervalSchedule.SECONDS)
    PeriodicTask.objects.create(name=SCHEDULED_NAME, task=task, interval=every_second)


class CeleryProcess:
    """One `celery -A memoryhub worker|beat` process and its log."""

    def __init__(self, kind: str, arguments: list[str], env: dict[str, str], log: Path, ready: bytes) -> None:
        self.kind, self.arguments, self.env, self.log, self.ready = kind, arguments, env, log, ready
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> CeleryProcess:
        start_at = self.log_position()
        with self.log.open("ab") as handle:
            self.process = subprocess.Popen(  # noqa: S603
                [CELERY, "-A", "memoryhub", self.kind, *self.arguments, "--loglevel", "INFO"],
                cwd=REPO,
                env=self.env,
                stdout=handle,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own group: kill() takes the pool children too
            )
        try:
            wait_for(
                lambda: self.ready in self.log.read_bytes()[start_at:] or not self.running(),
                START_SECONDS,
                f"{self.kind} to start",
            )
            assert self.running(), f"{self.kind} exited:\n{self.log_since(start_at)}"
        except AssertionError:
            self.kill()
            raise
        return self

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_position(self) -> int:
        return self.log.stat().st_size if self.log.exists() else 0

    def log_since(self, position: int) -> str:
        return self.log.read_bytes()[position:].decode(errors="replace")

    def kill(self) -> None:
        """SIGKILL the process and its pool children, as a crash would."""
        if self.running():
            assert self.process is not None
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        if self.running():
            assert self.process is not None
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()


def _queue_name(label: str) -> str:
    return f"memoryhub-test-{os.getpid()}-{label}-{time.monotonic_ns()}"


def database_url() -> str:
    """This run's test database as a DATABASE_URL, for the processes a test starts."""
    return service_database_url(APP_ROLE)


def operator_database_url() -> str:
    """The same database as the operator logs in to it (OPERATOR_DATABASE_URL)."""
    return service_database_url(OPERATOR_ROLE)


def _process_env(broker_url: str, queue: str, extra: dict[str, str]) -> dict[str, str]:
    """The real settings, on this run's test database and the suite's Redis."""
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "memoryhub.settings",
        "DATABASE_URL": database_url(),
        "OPERATOR_DATABASE_URL": operator_database_url(),
        "REDIS_URL": broker_url,
        "MEMORYHUB_QUEUE": queue,
        "MEMORYHUB_DATA_DIR": str(settings.DATA_DIR),
        **extra,
    }


def _worker(broker_url: str, queue: str, log: Path, env: dict[str, str]) -> CeleryProcess:
    arguments = ["-Q", queue, "-n", f"{queue}@%h", "--concurrency", "1", "--pool", "prefork",
                 "--without-gossip", "--without-mingle", "--without-heartbeat"]  # fmt: skip
    return CeleryProcess("worker", arguments, _process_env(broker_url, queue, env), log, b"ready.")


def _forget_broker_connections() -> None:
    """Celery keeps the pools of the first broker it used in this process; close and drop
    them so the next publish connects to the broker configured now."""
    pools.reset()
    forget_redis_failures()  # a failure of the broker before says nothing about this one
    # Private attributes: Celery has no public way to forget its pools.
    celery_app._pool = None  # type: ignore[attr-defined]
    celery_app.amqp._producer_pool = None  # type: ignore[attr-defined]


class TaskRoute:
    """Sends this process's tasks to a queue on a broker instead of running them
    in-process, until `restore()`; records what it published."""

    def __init__(self) -> None:
        self.saved = {
            k: celery_app.conf[k] for k in ("broker_url", "task_always_eager", "task_default_queue")
        }
        self.published: list[dict[str, Any]] = []
        after_task_publish.connect(self._record, weak=False)

    def _record(
        self, sender: str | None = None, headers: dict[str, Any] | None = None, **kwargs: Any
    ) -> None:
        self.published.append({"task": sender, **(headers or {})})

    def to(self, broker_url: str, queue: str) -> None:
        celery_app.conf.update(broker_url=broker_url, task_always_eager=False, task_default_queue=queue)
        _forget_broker_connections()

    def task_ids(self, task: str) -> list[str]:
        return [message["id"] for message in self.published if message["task"] == task]

    def restore(self) -> None:
        after_task_publish.disconnect(self._record)
        celery_app.conf.update(self.saved)
        _forget_broker_connections()


@pytest.fixture(scope="session")
def embedded_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[embedded.EmbeddedRedis]:
    """This test run's own Redis (the one `make run` would start), for the whole session."""
    server = embedded.start(tmp_path_factory.mktemp("redis"))
    yield server
    server.stop()


@pytest.fixture
def task_route(embedded_redis: embedded.EmbeddedRedis) -> Iterator[TaskRoute]:
    route = TaskRoute()
    yield route
    route.restore()


@pytest.fixture(scope="session")
def _session_worker(
    embedded_redis: embedded.EmbeddedRedis, django_db_setup: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CeleryProcess]:
    queue = _queue_name("session")
    log = tmp_path_factory.mktemp("worker") / "worker.log"
    process = _worker(embedded_redis.url, queue, log, {}).start()
    yield process
    process.stop()


def queue_is_idle(server: embedded.EmbeddedRedis, queue: str) -> bool:
    """No message of `queue` waits (any priority) or is delivered and not yet
    acknowledged (tasks acknowledge late, when done: kombu keeps them in `unacked`)."""
    client = redis.Redis(unix_socket_path=str(embedded.socket_path(server.folder)), socket_timeout=5)
    try:
        if any(client.llen(key) for key in client.scan_iter(match=f"{queue}*")):
            return False
        for raw in client.hvals("unacked"):
            with contextlib.suppress(ValueError, TypeError, IndexError):
                if json.loads(raw)[2] == queue:  # [message, exchange, routing key]
                    return False
        return True
    finally:
        client.close()


@pytest.fixture
def worker(
    _session_worker: CeleryProcess, task_route: TaskRoute, embedded_redis: embedded.EmbeddedRedis
) -> Iterator[CeleryProcess]:
    """The shared worker, with this test's tasks sent to it. The test ends once the
    worker has finished them: a transactional test's database is emptied next, and that
    would wait on the locks of a task still running (and the task would meet an emptied
    database), which made a later test's setup fail."""
    assert _session_worker.running(), f"the shared worker died:\n{_session_worker.log_since(0)[-3000:]}"
    queue = _session_worker.env["MEMORYHUB_QUEUE"]
    task_route.to(embedded_redis.url, queue)
    yield _session_worker
    if _session_worker.running():
        wait_for(lambda: queue_is_idle(embedded_redis, queue), INDEX_SECONDS, "the shared worker to go idle")


@pytest.fixture
def start_worker(
    embedded_redis: embedded.EmbeddedRedis, task_route: TaskRoute, tmp_path: Path
) -> Iterator[Callable[..., CeleryProcess]]:
    """start_worker(queue=None, broker_url=None, **env): a worker of this test's own (a new
    queue unless one is named; the suite's Redis unless another broker is named), with
    this test's tasks sent to its queue. Stopped at the end."""
    started: list[CeleryProcess] = []

    def start(queue: str | None = None, broker_url: str | None = None, **env: str) -> CeleryProcess:
        queue = queue or _queue_name("own")
        broker_url = broker_url or embedded_redis.url
        log = tmp_path / f"worker-{len(started) + 1}.log"
        process = _worker(broker_url, queue, log, env)
        started.append(process)
        task_route.to(broker_url, queue)
        return process.start()

    yield start
    for process in started:
        process.stop()


@pytest.fixture
def start_beat(
    embedded_redis: embedded.EmbeddedRedis, tmp_path: Path
) -> Iterator[Callable[..., CeleryProcess]]:
    """start_beat(queue, broker_url=None, **env): celery beat sending the database's
    schedule (see schedule_every_second) to `queue`. Stopped at the end."""
    started: list[CeleryProcess] = []

    def start(queue: str, broker_url: str | None = None, **env: str) -> CeleryProcess:
        arguments: list[str] = []
        process = CeleryProcess(
            "beat",
            arguments,
            _process_env(broker_url or embedded_redis.url, queue, env),
            tmp_path / "beat.log",
            b"beat: Starting",
        )
        started.append(process)
        return process.start()

    yield start
    for process in started:
        process.stop()
