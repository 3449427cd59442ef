"""A real web server for a test: gunicorn with the deployment's config
(memoryhub.gunicorn_conf) and the real settings, in a process group of its own so that a
kill takes every worker too."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
from django.conf import settings

from tests.search.conftest import free_port
from tests.worker import operator_database_url, wait_for

REPO = Path(__file__).resolve().parents[1]
GUNICORN = str(Path(sys.executable).parent / "gunicorn")
START_SECONDS = 90.0  # a hang detector, not a speed target


def manage(env: dict[str, str], *arguments: str) -> str:
    """`manage.py ARGUMENTS` in a process of its own with `env`; its output. Fails the
    test when the command fails."""
    result = subprocess.run(  # noqa: S603
        [sys.executable, "manage.py", *arguments],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def server_env(database_url: str, **extra: str) -> dict[str, str]:
    """This process's environment with the real settings on `database_url` (and the
    operator's login to this run's test database), plain HTTP, no embeddings and no
    broker (tasks run in the server), then `extra`."""
    return {
        **{k: v for k, v in os.environ.items() if k not in {"REDIS_URL", "DATABASE_URL"}},
        "DJANGO_SETTINGS_MODULE": "memoryhub.settings",
        "DATABASE_URL": database_url,
        "OPERATOR_DATABASE_URL": operator_database_url(),
        "MEMORYHUB_DATA_DIR": str(settings.DATA_DIR),
        "MEMORYHUB_PLAIN_HTTP": "true",
        "MEMORYHUB_EMBEDDING_PROFILE": "none",
        **extra,
    }


def send_rounds_until(done: Callable[[], bool], send_round: Callable[[], None], *, rounds: int) -> None:
    """Sends rounds of requests (each on new connections) until `done()`, at most
    `rounds`. Which gunicorn process accepts a connection is the kernel's choice, and
    one still awake from the last round takes the next connection first; a pause
    before each round lets every process wait for it."""
    for _ in range(rounds):
        time.sleep(0.1)
        send_round()
        if done():
            return


class WebServer:
    def __init__(self, env: dict[str, str], log: Path, *arguments: str, port: int | None = None) -> None:
        self.env, self.log, self.arguments = env, log, arguments
        self.port = port or free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, ready_path: str = "/healthz", headers: dict[str, str] | None = None) -> WebServer:
        """Start it and return once `ready_path` answers a 2xx."""
        with self.log.open("ab") as handle:
            command = [GUNICORN, "memoryhub.wsgi", "-c", "python:memoryhub.gunicorn_conf"]
            self.process = subprocess.Popen(  # noqa: S603
                [*command, "--bind", f"127.0.0.1:{self.port}", *self.arguments],
                cwd=REPO,
                env=self.env,
                stdout=handle,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

        def answering() -> bool:
            assert self.running(), self.log_text()
            with contextlib.suppress(httpx.TransportError):
                return httpx.get(self.base + ready_path, headers=headers, timeout=5).is_success
            return False

        try:
            wait_for(answering, START_SECONDS, "gunicorn to answer")
        except BaseException:
            self.kill()
            raise
        return self

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def kill(self) -> None:
        """SIGKILL every process of the server, as a crash would."""
        if self.running():
            assert self.process is not None
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(30)

    def stop(self) -> None:
        if self.running():
            assert self.process is not None
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()
