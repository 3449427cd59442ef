"""Tasks run in-process when there is no Redis (tests, `make run` without one): Celery
takes a producer on the in-process broker for each, which must not log a false alarm."""

from __future__ import annotations

import logging

import pytest
from django.conf import settings

from memoryhub.celery import app


def test_the_in_process_broker_logs_no_warning_when_a_producer_connects(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert settings.CELERY_BROKER_URL == settings.IN_PROCESS_BROKER_URL
    connection = app.connection_for_write()
    with caplog.at_level(logging.INFO, logger="kombu"):
        # What kombu's producer pool does for each connection it makes.
        pooled = connection.clone()
    assert pooled.transport_cls == "memory"
    assert [record.getMessage() for record in caplog.records if record.name.startswith("kombu")] == []
