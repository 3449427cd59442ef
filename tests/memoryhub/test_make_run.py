"""`make run` runs the production architecture on one machine: the web server, a Celery
worker, Celery beat and an embedded Redis under one supervisor. A save through the API
is indexed by the worker process, and `make stop` leaves nothing running.

The run uses this test run's database (DATABASE_URL) and a data folder of its own, so
its Redis, beat schedule and pid file are its own too."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from pathlib import Path

import httpx
import pytest
from django.conf import settings

from memoryhub import embedded_redis
from tests.conftest import Agent
from tests.search.conftest import free_port
from tests.worker import database_url, operator_database_url, wait_for

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]  # make run

FIRST_REQUEST_TIMEOUT_SECONDS = 60


def group_alive(pid: int) -> bool:
    """Whether any process of the group (a Procfile line with its children) still runs."""
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_make_run_indexes_saves_on_its_worker_and_make_stop_leaves_nothing_running(
    member: Agent, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in {"REDIS_URL", "MAKEFLAGS", "MFLAGS", "MAKELEVEL"}}
    env.update(
        DJANGO_SETTINGS_MODULE="memoryhub.settings",
        DATABASE_URL=database_url(),
        OPERATOR_DATABASE_URL=operator_database_url(),
        MEMORYHUB_DATA_DIR=str(data),
        SECRET_KEY=settings.SECRET_KEY,
        MEMORYHUB_VAULT_KEY=settings.VAULT_KEY,
        HOST="127.0.0.1",
        PORT=str(port),
    )
    log = tmp_path / "make-run.log"
    with log.open("wb") as handle:
        # -o install: installing is not what this test is about (make test has done it).
        run = subprocess.Popen(
            ["make", "--no-print-directory", "-o", "install", "run"],  # noqa: S607
            cwd=REPO,
            env=env,
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}/api/v1/teams/{member.team.slug}/memories/"
    headers = {"Authorization": f"Bearer {member.token}"}
    try:
        wait_for(
            lambda: ("celery@" in log.read_text() and " ready." in log.read_text()) or run.poll() is not None,
            180,
            "make run to start its worker",
        )
        assert run.poll() is None, log.read_text()
        wait_for(lambda: "beat: Starting" in log.read_text(), 60, "beat to start")
        # The first save loads the embedding model in the web process (its duplicate check):
        # seconds on a loaded machine, past httpx's 5 s default. Not what this test times.
        saved = httpx.post(
            base,
            json={"key": "via-make-run", "content": "Indexed by the worker."},
            headers=headers,
            timeout=FIRST_REQUEST_TIMEOUT_SECONDS,
        )
        assert saved.status_code == 201, saved.text
        assert saved.json()["index_state"] == "pending"
        wait_for(
            lambda: (
                httpx.get(
                    f"{base}via-make-run/", headers=headers, timeout=FIRST_REQUEST_TIMEOUT_SECONDS
                ).json()["index_state"]
                == "indexed"
            ),
            60,
            "the worker to index the save",
        )
    finally:
        stopped = subprocess.run(
            ["make", "--no-print-directory", "stop"],  # noqa: S607
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        with contextlib.suppress(subprocess.TimeoutExpired):
            run.wait(60)
        output = log.read_text()
        started = {name: int(pid) for name, pid in re.findall(r"(\w+)\.1 started \(pid=(\d+)\)", output)}
        left_running = [name for name, pid in started.items() if group_alive(pid)]
        make_run_exited = run.poll() is not None
        # Whatever `make stop` left behind must not outlive the test (each Procfile line
        # runs in a process group of its own).
        for pid in [run.pid, *started.values()]:
            if group_alive(pid):
                os.killpg(pid, signal.SIGKILL)
        run.wait(10)

    assert set(started) == {"redis", "web", "worker", "beat"}, output
    # bootstrap --if-empty ran before the processes and, the team existing, created nothing.
    assert output.index(f"MemoryHub is set up already: {member.team.slug}") < output.index("web.1 started"), (
        output
    )
    worker_lines = [line for line in output.splitlines() if re.match(r"\S+ worker\.1 +\|", line)]
    web_lines = [line for line in output.splitlines() if re.match(r"\S+ web\.1 +\|", line)]
    assert any("Task search.index_memory[" in line and "succeeded" in line for line in worker_lines)
    assert not any("search.index_memory" in line for line in web_lines)
    assert not any("NO BROKER CONFIGURED" in line for line in web_lines)
    assert any(f"redis+socket://{data}/redis/redis.sock" in line for line in worker_lines)

    assert "Stopping make run" in stopped.stdout, stopped.stdout + stopped.stderr
    assert make_run_exited, "make run still runs after make stop"
    assert left_running == []
    assert not embedded_redis.socket_path(data / "redis").exists()
    assert not (data / "run.pid").exists()
