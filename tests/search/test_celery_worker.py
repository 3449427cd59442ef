"""Indexing through a real Celery worker process on the real Redis.

The worker is `celery -A memoryhub worker`, started as a separate process against
this test run's database, with its own queue on a Redis database of its own. Under
CI=true an unreachable Redis fails these tests; elsewhere they are skipped with the
reason, so a laptop without Redis still runs the rest.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.db import connection

from memories.models import Memory
from memoryhub.celery import app as celery_app
from search.chunking import chunk_text
from search.models import Chunk, ChunkEmbedding, EmbeddingCache
from search.tasks import reconcile_index_states
from tests.conftest import Agent, operator_view

REDIS_URL = os.environ.get("MEMORYHUB_TEST_REDIS_URL", "redis://127.0.0.1:6379/14")
REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.django_db(transaction=True)


def _redis_or_fail() -> redis.Redis:
    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.exceptions.ConnectionError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"Redis at {REDIS_URL} is unreachable under CI=true: {exc}")
        pytest.skip(f"Redis at {REDIS_URL} is unreachable: {exc}")
    return client


class Worker:
    """One `celery worker` process (concurrency 1) and its log."""

    def __init__(self, queue: str, log: Path) -> None:
        self.queue, self.log = queue, log
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> Worker:
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "memoryhub.settings",
            "REDIS_URL": REDIS_URL,
            "MEMORYHUB_QUEUE": self.queue,
            "MEMORYHUB_DATABASE_NAME": connection.settings_dict["NAME"],
            "MEMORYHUB_DATA_DIR": str(settings.DATA_DIR),
            "MEMORYHUB_RECONCILE_AFTER_SECONDS": "0",
        }
        command = [
            str(Path(sys.executable).parent / "celery"),
            "-A", "memoryhub", "worker", "-Q", self.queue, "--concurrency", "1", "--pool", "prefork",
            "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "info",
        ]  # fmt: skip
        handle = self.log.open("ab")
        self.process = subprocess.Popen(  # noqa: S603
            command, cwd=REPO, env=env, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            wait_for(lambda: b"ready." in self.log.read_bytes(), 60, f"worker ready (log: {self.log})")
        except AssertionError:
            self.kill()
            raise
        return self

    def kill(self) -> None:
        """SIGKILL the whole worker (main process and its pool child), as a crash would."""
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()


def wait_for(condition: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {seconds}s waiting for {what}")


@pytest.fixture
def queue(tmp_path: Path) -> Iterator[str]:
    """Send this test's tasks to Redis, on a queue no other run shares."""
    client = _redis_or_fail()
    name = f"memoryhub-test-{os.getpid()}-{time.monotonic_ns()}"
    saved = {k: celery_app.conf[k] for k in ("broker_url", "task_always_eager", "task_default_queue")}
    celery_app.conf.update(broker_url=REDIS_URL, task_always_eager=False, task_default_queue=name)
    _forget_broker_connections()
    yield name
    celery_app.conf.update(saved)
    _forget_broker_connections()
    client.delete(name)


def _forget_broker_connections() -> None:
    """Celery keeps the connection and producer pools of the first broker it used in
    this process; drop them so the next publish connects to the broker now configured."""
    celery_app._pool = None
    celery_app.amqp._producer_pool = None


@pytest.fixture
def worker(queue: str, tmp_path: Path) -> Iterator[Worker]:
    running = Worker(queue, tmp_path / "worker.log").start()
    yield running
    running.stop()


def index_states() -> dict[str, int]:
    with operator_view():
        states: dict[str, int] = {}
        for state in Memory.objects.values_list("index_state", flat=True):
            states[state] = states.get(state, 0) + 1
    return states


def test_worker_indexes_a_saved_memory(worker: Worker, member: Agent) -> None:
    response = member.client.post(
        member.url("memories/"),
        {"key": "worker-note", "content": "Workers chunk and embed memories in the background."},
        format="json",
    )
    assert response.status_code == 201
    assert response.json()["index_state"] == "pending"

    wait_for(lambda: index_states() == {"indexed": 1}, 60, "the worker to index the memory")

    with operator_view():
        chunk = Chunk.objects.get(memory_id=response.json()["id"])
        assert ChunkEmbedding.objects.filter(chunk=chunk).count() == 1
    assert member.client.get(member.url("memories/worker-note/")).json()["index_state"] == "indexed"


PARAGRAPH = (
    "Memory {n} paragraph {p}: the service on host-{n} answers health checks on port {port}, "
    "restarts after a failed probe, and writes its logs to the shared volume. "
    "Operators rotate its credentials every quarter and record the change in the runbook."
)


def test_killing_the_worker_mid_batch_leaves_every_memory_indexed_exactly_once(
    queue: str, member: Agent, tmp_path: Path
) -> None:
    count = 120
    contents = {}
    for n in range(count):
        content = "\n\n".join(PARAGRAPH.format(n=n, p=p, port=8000 + n + p) for p in range(12))
        contents[f"batch-{n}"] = content
        response = member.client.post(
            member.url("memories/"), {"key": f"batch-{n}", "content": content}, format="json"
        )
        assert response.status_code == 201

    first = Worker(queue, tmp_path / "first.log").start()
    try:
        wait_for(lambda: index_states().get("indexed", 0) >= 5, 120, "the first memories to be indexed")
    finally:
        first.kill()
    left = index_states().get("pending", 0)
    assert left > 0, "the worker finished before it was killed; the batch is too small to test a crash"

    second = Worker(queue, tmp_path / "second.log").start()
    try:
        # The task that died with the worker is still unacknowledged; the periodic
        # reconcile job is what brings such entries back.
        reconcile_index_states.apply_async()
        wait_for(lambda: index_states() == {"indexed": count}, 300, "every memory to be indexed")
    finally:
        second.stop()

    with operator_view():
        for memory in Memory.objects.all():
            expected = chunk_text(contents[memory.key])
            chunks = list(Chunk.objects.filter(memory=memory).order_by("chunk_index"))
            assert [(c.chunk_index, c.content_hash) for c in chunks] == [
                (e.index, e.content_hash) for e in expected
            ]
            assert ChunkEmbedding.objects.filter(chunk__memory=memory).count() == len(expected)
        distinct_texts = {e.content_hash for content in contents.values() for e in chunk_text(content)}
        assert EmbeddingCache.objects.filter(content_hash__in=distinct_texts).count() == len(distinct_texts)
