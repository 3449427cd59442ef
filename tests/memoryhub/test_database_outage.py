"""The database dies under a running server and comes back.

A PostgreSQL of the test's own (tests/memoryhub/private_postgres.py: the embedded server,
started by the project's own code, in tmp_path), migrated by the owner role, and the real
server (gunicorn, threaded, the real settings with a pool of two) on it as the application
role. A burst from more clients than the server has threads holds no more connections
than the pool's size. An agent saves while the test SIGKILLs every PostgreSQL process:
every request answers as usual or 503 in the error shape with Retry-After, never 500.
PostgreSQL then restarts on the same data folder and the server recovers by itself: what
was saved before, and every save it answered 201 for, is there, and new saves persist."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import psycopg
import pytest

from teams.roles import APP_ROLE
from tests.drill.record import record
from tests.memoryhub.private_postgres import PrivatePostgres
from tests.search.conftest import free_port
from tests.web_server import manage
from tests.worker import wait_for

pytestmark = pytest.mark.slow  # a PostgreSQL of its own, gunicorn

REPO = Path(__file__).resolve().parents[2]
GUNICORN = str(Path(sys.executable).parent / "gunicorn")
RETRY_AFTER = 5
POOL_MAX = 2
SERVER_THREADS = 4
BURST_CLIENTS, BURST_REQUESTS = 12, 60
# Hang detectors, not speed targets.
SERVER_START_SECONDS = 90.0
RECOVERY_SECONDS = 90.0
MAX_SAVES = 400  # the background saver's bound


def app_connections(postgres: PrivatePostgres) -> int:
    """The server's connections now open (counted as the superuser, over the socket)."""
    with psycopg.connect(host=postgres.settings["HOST"], user="postgres", dbname="postgres") as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE usename = %s AND datname = %s",
            [APP_ROLE, postgres.settings["NAME"]],
        ).fetchone()
    assert row is not None
    return int(row[0])


def assert_database_unavailable(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    assert response.headers["Retry-After"] == str(RETRY_AFTER)
    assert response.json() == {
        "error": "database_unavailable",
        "detail": "the database is temporarily unavailable; retry later",
        "retry_after": RETRY_AFTER,
    }


class Saver(threading.Thread):
    """Saves one new key after another until told to stop, recording every answer."""

    def __init__(self, client: httpx.Client, url: str) -> None:
        super().__init__(daemon=True)
        self.client, self.url = client, url
        self.answers: list[tuple[str, httpx.Response]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        for number in range(MAX_SAVES):
            if self.stop.is_set():
                return
            key = f"during-{number}"
            # Near-duplicate texts would be answered with the first one (200), not saved.
            body = {"key": key, "content": f"Saved as number {number}.", "allow_duplicate": True}
            response = self.client.post(self.url, json=body)
            self.answers.append((key, response))

    def statuses(self) -> list[int]:
        return [response.status_code for _, response in self.answers]


def test_killing_postgresql_answers_503_and_the_server_recovers_with_nothing_lost(tmp_path: Path) -> None:
    data = tmp_path / "data"
    postgres = PrivatePostgres(data)
    server: subprocess.Popen[bytes] | None = None
    log = tmp_path / "gunicorn.log"
    try:
        postgres.start()
        env = {
            **{k: v for k, v in os.environ.items() if k not in {"REDIS_URL", "DATABASE_URL"}},
            "DJANGO_SETTINGS_MODULE": "memoryhub.settings",
            "MEMORYHUB_DATA_DIR": str(data),
            "MEMORYHUB_PLAIN_HTTP": "true",
            "MEMORYHUB_EMBEDDING_PROFILE": "none",
            "MEMORYHUB_DB_POOL_MAX": str(POOL_MAX),
            "MEMORYHUB_DB_POOL_TIMEOUT": "2",
            "MEMORYHUB_DB_RETRY_AFTER_SECONDS": str(RETRY_AFTER),
            # The burst below takes every thread with one token: the guard may let it.
            "MEMORYHUB_IN_FLIGHT_PER_CLIENT": str(SERVER_THREADS),
        }
        manage({**env, **postgres.urls("memoryhub_owner")}, "migrate", "--noinput")
        env.update(postgres.urls("memoryhub_app"))
        manage(env, "create_team", "outage", "--name", "Outage")
        token = manage(env, "create_token", "outage", "--name", "bot", "--scopes", "read,write").split()[-1]

        port = free_port()
        with log.open("wb") as handle:
            server = subprocess.Popen(  # noqa: S603
                [
                    GUNICORN,
                    "memoryhub.wsgi",
                    "--bind",
                    f"127.0.0.1:{port}",
                    "--workers",
                    "1",
                    "--threads",
                    str(SERVER_THREADS),
                ],
                cwd=REPO,
                env=env,
                stdout=handle,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        base = f"http://127.0.0.1:{port}"
        client = httpx.Client(
            base_url=f"{base}/api/v1/teams/outage/", headers={"Authorization": f"Bearer {token}"}, timeout=60
        )

        def healthy() -> bool:
            with contextlib.suppress(httpx.TransportError):
                return httpx.get(f"{base}/healthz").status_code == 200
            return server is None or server.poll() is not None

        wait_for(healthy, SERVER_START_SECONDS, "gunicorn to answer")
        assert server.poll() is None, log.read_text()

        before = client.post("memories/", json={"key": "before-outage", "content": "Saved before the crash."})
        assert before.status_code == 201, before.text

        # A threaded server holds at most its pool's connections, not one per thread.
        held = []
        with ThreadPoolExecutor(BURST_CLIENTS) as clients:
            burst = [clients.submit(client.get, "memories/before-outage/") for _ in range(BURST_REQUESTS)]
            while not all(request.done() for request in burst):
                held.append(app_connections(postgres))
        assert [request.result().status_code for request in burst] == [200] * BURST_REQUESTS
        held.append(app_connections(postgres))
        assert max(held) <= POOL_MAX, held

        # Saves go on while PostgreSQL dies: some are in flight when it is killed.
        saver = Saver(client, "memories/")
        saver.start()
        wait_for(lambda: saver.statuses().count(201) >= 5, 60, "saves before the crash")
        postgres.kill()

        assert_database_unavailable(client.get("memories/before-outage/"))
        assert_database_unavailable(client.post("memories/", json={"key": "lost", "content": "Refused."}))
        wait_for(lambda: 503 in saver.statuses(), 60, "the saver to meet the outage")
        assert server.poll() is None, "the server died with its database"

        # The same data folder, with crash recovery; the server reconnects by itself.
        postgres.start()
        restarted = time.monotonic()
        wait_for(
            lambda: client.get("memories/before-outage/").status_code == 200,
            RECOVERY_SECONDS,
            "the server to recover",
        )
        recovered_in = time.monotonic() - restarted
        recovered_at = len(saver.answers)
        wait_for(lambda: saver.statuses()[recovered_at:].count(201) >= 3, 60, "saves after recovery")
        saver.stop.set()
        saver.join(60)

        after = client.post("memories/", json={"key": "after-outage", "content": "Saved after recovery."})
        assert after.status_code == 201, after.text

        # Never a 500; every refusal in the one shape.
        assert set(saver.statuses()) <= {201, 503}, saver.statuses()
        for _, response in saver.answers:
            if response.status_code == 503:
                assert_database_unavailable(response)
        # Nothing lost: what was saved before, every save answered 201, and the one after.
        confirmed = {"before-outage": before, "after-outage": after} | {
            key: response for key, response in saver.answers if response.status_code == 201
        }
        for key, answer in confirmed.items():
            kept = client.get(f"memories/{key}/")
            assert kept.status_code == 200, (key, answer.text, kept.text)
        assert client.get("memories/before-outage/").json()["content"] == "Saved before the crash."
        assert client.get("memories/lost/").status_code == 404  # refused, so not half-saved

        # The server logged each refusal once, as the database being unavailable.
        output = log.read_text()
        assert "database unavailable, answered 503" in output
        assert "Internal Server Error" not in output
        record(
            "PostgreSQL killed (SIGKILL) under write load, restarted",
            saves=len(saver.answers),
            statuses=sorted(set(saver.statuses())),
            answered_503=saver.statuses().count(503),
            responses_500=0,
            serving_again_after_restart_seconds=round(recovered_in, 1),
            lost=0,
        )
    finally:
        if server is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait(10)
        postgres.stop()
    assert not postgres.processes(), "the private PostgreSQL is still running"
