"""The Celery app. With REDIS_URL set, tasks go to workers; without a broker (the
embedded default) they run in-process, after the transaction that enqueued them commits."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryhub.settings")

app = Celery("memoryhub")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
