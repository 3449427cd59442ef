"""Background work yields the CPU to requests: workers run at a lower priority."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.worker import CeleryProcess


def _process_and_children(pid: int) -> list[int]:
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [pid, *(int(child) for child in children)]


@pytest.mark.django_db(transaction=True)
def test_worker_and_its_pool_run_at_the_configured_niceness(
    start_worker: Callable[..., CeleryProcess],
) -> None:
    ours = os.getpriority(os.PRIO_PROCESS, 0)
    process = start_worker(MEMORYHUB_WORKER_NICENESS="7")
    assert process.process is not None
    pids = _process_and_children(process.process.pid)
    assert len(pids) == 2, "the worker has its one pool process"
    assert [os.getpriority(os.PRIO_PROCESS, pid) for pid in pids] == [ours + 7, ours + 7]


@pytest.mark.django_db(transaction=True)
def test_niceness_zero_leaves_the_worker_at_normal_priority(
    start_worker: Callable[..., CeleryProcess],
) -> None:
    ours = os.getpriority(os.PRIO_PROCESS, 0)
    process = start_worker(MEMORYHUB_WORKER_NICENESS="0")
    assert process.process is not None
    assert os.getpriority(os.PRIO_PROCESS, process.process.pid) == ours
