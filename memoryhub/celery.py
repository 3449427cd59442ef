"""The Celery app. With REDIS_URL set (`make run` sets it to its embedded Redis), tasks go
to workers; without a broker they run in-process, after the transaction that enqueued
them commits: a fallback the web server announces when it starts."""

from __future__ import annotations

import logging
import os

from celery import Celery
from celery.signals import before_task_publish, task_postrun, task_prerun, worker_init

from core import request_id

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryhub.settings")

app = Celery("memoryhub")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# A request's id travels with the tasks it enqueues (core.request_id).
before_task_publish.connect(request_id.add_request_id_to_task, weak=False)
task_prerun.connect(request_id.adopt_task_request_id, weak=False)
task_postrun.connect(request_id.forget_task_request_id, weak=False)


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
