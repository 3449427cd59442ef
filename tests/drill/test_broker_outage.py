"""Fault drill: Redis stops under write load. Saves keep answering 201 (the
entries wait as `pending`), and once Redis is back the worker and beat reconnect by
themselves and every entry saved during the outage is indexed, with no manual step."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from memories.models import IndexState
from memoryhub import embedded_redis as embedded
from tests.conftest import Agent
from tests.drill.record import outage_seconds, record
from tests.search.test_celery_worker import index_states
from tests.worker import CeleryProcess, TaskRoute, schedule_every_second, wait_for

pytestmark = [pytest.mark.drill, pytest.mark.django_db(transaction=True)]

RECOVERY_SECONDS = 300.0  # hang detector; the figure is recorded, not asserted
SAVES_PER_SECOND = 5  # the write load: a few agents at the default write rate (120/min each)


def test_saves_go_on_while_redis_is_down_and_are_indexed_once_it_returns(
    start_worker: Callable[..., CeleryProcess],
    start_beat: Callable[..., CeleryProcess],
    task_route: TaskRoute,
    member: Agent,
    tmp_path: Path,
) -> None:
    folder = tmp_path / "redis"
    redis = embedded.start(folder)
    try:
        worker = start_worker(broker_url=redis.url, MEMORYHUB_RECONCILE_AFTER_SECONDS="0")
        schedule_every_second("search.reconcile_index_states")
        start_beat(worker.env["MEMORYHUB_QUEUE"], broker_url=redis.url)
        number = 0
        answers: list[tuple[int, float]] = []

        def save(phase: str) -> None:
            nonlocal number
            started = time.perf_counter()
            response = member.client.post(
                member.url("memories/"),
                {
                    "key": f"{phase}-{number}",
                    "content": f"Saved {phase}, number {number}.",
                    "allow_duplicate": True,
                },
                format="json",
            )
            answers.append((response.status_code, time.perf_counter() - started))
            number += 1

        for _ in range(3):
            save("before")
        redis.stop()
        down_for = outage_seconds(default=5.0)
        outage_ends = time.monotonic() + down_for
        during = 0
        while time.monotonic() < outage_ends:
            save("during")
            during += 1
            time.sleep(1 / SAVES_PER_SECOND)  # the scenario's pace: saves keep coming
        pending_at_return = index_states().get(IndexState.PENDING, 0)
        redis = embedded.start(folder)  # the same socket: every client finds it again
        back_at = time.monotonic()
        for _ in range(3):
            save("after")

        wait_for(
            lambda: index_states() == {IndexState.INDEXED: number},
            RECOVERY_SECONDS,
            "every entry to be indexed",
        )
        recovered_in = time.monotonic() - back_at
    finally:
        redis.stop()

    statuses = [status for status, _ in answers]
    assert statuses == [201] * number
    assert during > 0 and pending_at_return >= during
    record(
        "redis stopped under write load",
        outage_seconds=down_for,
        saves=number,
        saves_during_outage=during,
        statuses=sorted(set(statuses)),
        slowest_save_during_outage_ms=round(max(s for _, s in answers[3 : 3 + during]) * 1000, 1),
        all_indexed_after_return_seconds=round(recovered_in, 1),
        lost=0,
    )
