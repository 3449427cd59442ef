"""The Celery worker's side of the metrics (docs/operations.md, "Metrics"): where its
processes keep their values, and each task's outcome and duration, from the signals the
worker (and the in-process fallback) send around each task. memoryhub.celery connects
them."""

from __future__ import annotations

import os
import time
from typing import Any

from core.settings_env import metrics_dir, metrics_enabled, reset_metrics_dir

_task_started: dict[str, float] = {}


def keep_metrics_in_files(**_: object) -> None:
    """celeryd_init: the worker's values go to the `worker` folder of the metrics
    directory, which the web server's `/metrics` also reads. Runs as the worker starts,
    before its pool's processes are forked (they inherit it). Only with /metrics on."""
    if not metrics_enabled():
        return
    folder = metrics_dir() / "worker"
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(folder)
    reset_metrics_dir(folder)
    # Celery's Django fixup has already run django.setup(), which imported
    # prometheus_client before the variable was set: choose its value class again.
    # Every MemoryHub metric has labels, so none has made a value yet (core.metric_definitions).
    from prometheus_client import values

    values.ValueClass = values.get_value_class()


def forget_live_metrics(pid: int, **_: object) -> None:
    """worker_process_shutdown: a pool process's live gauges go with it."""
    if "PROMETHEUS_MULTIPROC_DIR" in os.environ:
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid)


def time_task(task_id: str, **_: object) -> None:
    """task_prerun."""
    _task_started[task_id] = time.monotonic()


def record_task(task_id: str, task: Any, state: str | None = None, **_: object) -> None:
    """task_postrun: the outcome is Celery's state (SUCCESS, FAILURE, RETRY...)."""
    from core.metric_definitions import BEAT_JOB_LAST_SUCCESS, BEAT_JOB_RUNS, TASK_SECONDS, TASKS

    started = _task_started.pop(task_id, None)
    outcome = state or "UNKNOWN"
    TASKS.labels(task=task.name, outcome=outcome).inc()
    if started is not None:
        TASK_SECONDS.labels(task=task.name, outcome=outcome).observe(time.monotonic() - started)
    # django-celery-beat names the periodic task (the admin's Periodic tasks) in a header.
    job = getattr(task.request, "periodic_task_name", None)
    if job:
        BEAT_JOB_RUNS.labels(job=job, outcome=outcome).inc()
        if outcome == "SUCCESS":
            BEAT_JOB_LAST_SUCCESS.labels(job=job).set_to_current_time()
