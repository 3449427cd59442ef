"""Indexing through real Celery processes on the Redis the test run starts itself
(tests/worker.py): the web side only enqueues, a `celery worker` process indexes, a
`celery beat` process schedules the reconcile job, and a worker killed mid-batch loses
nothing."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import search.services
from memories.models import Memory
from memoryhub.embedded_redis import EmbeddedRedis
from search.chunking import chunk_text
from search.models import Chunk, ChunkEmbedding, EmbeddingCache
from search.tasks import reconcile_index_states
from tests.conftest import Agent, operator_view
from tests.drill.record import record
from tests.worker import (
    SCHEDULED_NAME,
    CeleryProcess,
    TaskRoute,
    schedule_every_second,
    wait_for,
    wait_for_index_state,
)

pytestmark = pytest.mark.django_db(transaction=True)


def index_states() -> dict[str, int]:
    with operator_view():
        states: dict[str, int] = {}
        for state in Memory.objects.values_list("index_state", flat=True):
            states[state] = states.get(state, 0) + 1
    return states


def test_a_save_through_the_api_is_indexed_by_the_worker_not_the_web_process(
    worker: CeleryProcess, task_route: TaskRoute, member: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran_here: list[dict[str, Any]] = []

    def index_in_this_process(**kwargs: Any) -> str:
        ran_here.append(kwargs)
        raise AssertionError("indexing ran in the web process")

    monkeypatch.setattr(search.services, "index_memory", index_in_this_process)
    log_start = worker.log_position()

    response = member.client.post(
        member.url("memories/"),
        {"key": "worker-note", "content": "Workers chunk and embed memories in the background."},
        format="json",
    )

    assert response.status_code == 201
    assert response.json()["index_state"] == "pending"
    assert ran_here == []  # after-commit work of the request has run by now
    wait_for_index_state(member.team.id, "worker-note")
    assert ran_here == []
    [task_id] = task_route.task_ids("search.index_memory")
    # The entry is indexed before the task ends (the contradiction check runs after it).
    succeeded = f"Task search.index_memory[{task_id}] succeeded"
    wait_for(lambda: succeeded in worker.log_since(log_start), 30, "the worker to log the task's success")
    with operator_view():
        chunk = Chunk.objects.get(memory_id=response.json()["id"])
        assert ChunkEmbedding.objects.filter(chunk=chunk).count() == 1
    assert member.client.get(member.url("memories/worker-note/")).json()["index_state"] == "indexed"


def test_beat_schedules_the_reconcile_that_indexes_a_save_made_while_the_broker_was_down(
    start_worker: Callable[..., CeleryProcess],
    start_beat: Callable[..., CeleryProcess],
    task_route: TaskRoute,
    member: Agent,
    tmp_path: Path,
) -> None:
    task_route.to(f"redis+socket://{tmp_path}/no-redis-here.sock", "nowhere")
    response = member.client.post(
        member.url("memories/"),
        {"key": "while-down", "content": "Saved while Redis was down."},
        format="json",
    )
    assert response.status_code == 201  # a broker outage never fails a save
    worker = start_worker(MEMORYHUB_RECONCILE_AFTER_SECONDS="0")
    assert index_states() == {"pending": 1}

    schedule_every_second("search.reconcile_index_states")
    beat = start_beat(worker.env["MEMORYHUB_QUEUE"])

    wait_for_index_state(member.team.id, "while-down")
    assert f"Sending due task {SCHEDULED_NAME} (search.reconcile_index_states)" in beat.log_since(0)
    worker_log = worker.log_since(0)
    assert "Task search.reconcile_index_states[" in worker_log
    assert "Task search.index_memory[" in worker_log


PARAGRAPH = (
    "Memory {n} paragraph {p}: the service on host-{n} answers health checks on port {port}, "
    "restarts after a failed probe, and writes its logs to the shared volume. "
    "Operators rotate its credentials every quarter and record the change in the runbook."
)


def test_killing_the_worker_mid_batch_leaves_every_memory_indexed_exactly_once(
    start_worker: Callable[..., CeleryProcess],
    task_route: TaskRoute,
    member: Agent,
    embedded_redis: EmbeddedRedis,
) -> None:
    queue = f"memoryhub-test-kill-{os.getpid()}"
    task_route.to(embedded_redis.url, queue)
    count = 40
    contents = {}
    for n in range(count):
        content = "\n\n".join(PARAGRAPH.format(n=n, p=p, port=8000 + n + p) for p in range(12))
        contents[f"batch-{n}"] = content
        response = member.client.post(
            member.url("memories/"), {"key": f"batch-{n}", "content": content}, format="json"
        )
        assert response.status_code == 201

    first = start_worker(queue, MEMORYHUB_RECONCILE_AFTER_SECONDS="0")
    try:
        wait_for(lambda: index_states().get("indexed", 0) >= 5, 120, "the first memories to be indexed")
    finally:
        first.kill()
    left = index_states().get("pending", 0)
    assert left > 0, "the worker finished before it was killed; the batch is too small to test a crash"

    # The lease of the entries queued at save time has run out (0 s here: the test
    # does not wait the default 15 minutes).
    start_worker(queue, MEMORYHUB_RECONCILE_AFTER_SECONDS="0", MEMORYHUB_INDEX_LEASE_SECONDS="0")
    # The task that died with the worker is still unacknowledged; the periodic
    # reconcile job is what brings such entries back.
    reconcile_index_states.apply_async()
    restarted = time.monotonic()
    wait_for(lambda: index_states() == {"indexed": count}, 300, "every memory to be indexed")
    record(
        "worker killed (SIGKILL) mid-batch",
        memories=count,
        pending_at_kill=left,
        all_indexed_after_restart_seconds=round(time.monotonic() - restarted, 1),
        indexed_exactly_once=True,
        lost=0,
    )

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
