"""The Celery app. With REDIS_URL set (`make run` sets it to its embedded Redis), tasks go
to workers; without a broker they run in-process, after the transaction that enqueued
them commits: a fallback the web server announces when it starts."""

from __future__ import annotations

import logging
import os

from celery import Celery
from celery.signals import (
    before_task_publish,
    celeryd_init,
    task_postrun,
    task_prerun,
    worker_init,
    worker_process_shutdown,
    worker_ready,
    worker_shutdown,
)

from core import request_id
from memoryhub import task_metrics, worker_heartbeat

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryhub.settings")

app = Celery("memoryhub")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# A request's id travels with the tasks it enqueues (core.request_id).
before_task_publish.connect(request_id.add_request_id_to_task, weak=False)
task_prerun.connect(request_id.adopt_task_request_id, weak=False)
task_postrun.connect(request_id.forget_task_request_id, weak=False)


# Metrics (memoryhub.task_metrics): the worker's values in files, each task's outcome.
celeryd_init.connect(task_metrics.keep_metrics_in_files, weak=False)
worker_process_shutdown.connect(task_metrics.forget_live_metrics, weak=False)
task_prerun.connect(task_metrics.time_task, weak=False)
task_postrun.connect(task_metrics.record_task, weak=False)

# The heartbeat /readyz reads (memoryhub.worker_heartbeat).
worker_ready.connect(worker_heartbeat.start_heartbeat, weak=False)
worker_shutdown.connect(worker_heartbeat.stop_heartbeat, weak=False)


@worker_init.connect
def lower_worker_priority(**_: object) -> None:
    """Before the pool starts (its processes inherit it): see MEMORYHUB_WORKER_NICENESS."""
    from django.conf import settings

    if settings.MEMORYHUB_WORKER_NICENESS > 0:
        os.nice(settings.MEMORYHUB_WORKER_NICENESS)


def warn_if_tasks_run_in_process() -> None:
    """Say loudly, once per web process, that no worker will see this process's tasks."""
    if app.conf.task_always_eager:
        logging.getLogger("memoryhub").warning(
            "NO BROKER CONFIGURED: background tasks (indexing, re-indexing) run inside this web "
            "process after each commit, and no beat retries entries left pending or failed. "
            "Set REDIS_URL, or start MemoryHub with `make run`, which runs an embedded Redis, a "
            "worker and beat wherever the Redis can start."
        )
