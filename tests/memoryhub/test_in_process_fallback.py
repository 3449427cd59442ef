"""Without a broker, tasks run inside the web process: a fallback the web server
announces loudly when it starts, and never when a broker is configured."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

pytestmark = pytest.mark.slow  # gunicorn

REPO = Path(__file__).resolve().parents[2]
WARNING = "NO BROKER CONFIGURED"


def start_web_application(**env: str) -> str:
    """Load the WSGI application as gunicorn does, with the real settings; its log."""
    process_env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    process_env.update(
        DJANGO_SETTINGS_MODULE="memoryhub.settings", MEMORYHUB_DATA_DIR=str(settings.DATA_DIR), **env
    )
    finished = subprocess.run(
        [sys.executable, "-c", "import memoryhub.wsgi"],
        cwd=REPO,
        env=process_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert finished.returncode == 0, finished.stderr
    return finished.stderr


def test_the_web_server_warns_at_start_up_that_tasks_run_in_process_without_a_broker() -> None:
    log = start_web_application()

    assert WARNING in log
    assert "WARNING memoryhub" in log
    assert "REDIS_URL" in log and "make run" in log


def test_the_web_server_is_silent_about_it_with_a_broker() -> None:
    # Loading the application does not connect to the broker, so none needs to run.
    assert WARNING not in start_web_application(REDIS_URL="redis+socket:///nowhere/redis.sock")
