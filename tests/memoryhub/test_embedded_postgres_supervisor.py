"""The embedded PostgreSQL under a supervisor (`python -m memoryhub.embedded_postgres serve
DATA_DIR`, the Procfile's `postgres` line): a postmaster killed with SIGKILL is started
again, with crash recovery, and answers within a bounded time; one shut down cleanly from
outside (`make db-stop`) stays down and the supervisor exits, so honcho stops the rest;
SIGTERM (honcho's stop, `make stop`) stops PostgreSQL and leaves nothing running."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import psycopg
import pytest

from memoryhub import embedded_postgres
from tests.memoryhub.test_make_run import group_alive
from tests.search.conftest import free_port
from tests.worker import wait_for

REPO = Path(__file__).resolve().parents[2]
# Hang detectors, not speed targets: a first start runs initdb; a restart waits out the
# policy's first delay and crash recovery.
START_SECONDS = 120.0
RESTART_SECONDS = 60.0
STOP_SECONDS = 60.0


class EmbeddedCluster:
    """What runs on a data folder's embedded PostgreSQL, seen from outside."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.pgdata = (data_dir / "pgdata").resolve()

    def postmaster(self) -> psutil.Process | None:
        """The running postmaster of the data folder, from its postmaster.pid."""
        try:
            pid = int((self.pgdata / "postmaster.pid").read_text().split("\n", 1)[0])
            process = psutil.Process(pid)
            if process.status() == psutil.STATUS_ZOMBIE or process.name() != "postgres":
                return None
        except (FileNotFoundError, ValueError, psutil.Error):
            return None
        return process

    def answers(self) -> bool:
        """Whether the server of the data folder runs a query (as the superuser, over its socket)."""
        lines = (self.pgdata / "postmaster.pid").read_text().splitlines() if self.postmaster() else []
        # The socket folder (line 5) is filled in once the socket exists; an empty host
        # would reach whatever server listens at libpq's default socket instead.
        if len(lines) < 8 or not lines[4] or lines[7].strip() != "ready":
            return False
        try:
            with psycopg.connect(
                host=lines[4], user="postgres", dbname="postgres", connect_timeout=5
            ) as conn:
                return conn.execute("SELECT 1").fetchone() == (1,)
        except psycopg.OperationalError:
            return False

    def processes(self) -> list[psutil.Process]:
        """Every postgres process serving the data folder."""
        found = []
        for process in psutil.process_iter(attrs=("name", "cmdline")):
            if process.info["name"] == "postgres" and str(self.pgdata) in (process.info["cmdline"] or []):
                found.append(process)
                with contextlib.suppress(psutil.NoSuchProcess):
                    found.extend(process.children(recursive=True))
        return found

    def kill_leftovers(self) -> list[psutil.Process]:
        """Kill whatever still runs on the data folder; returns what did."""
        leftovers = self.processes()
        for process in leftovers:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
        psutil.wait_procs(leftovers, timeout=30)
        return leftovers


class Supervised(EmbeddedCluster):
    """A supervisor process of the test's own, on a data folder of the test's own."""

    def __init__(self, data_dir: Path, log: Path) -> None:
        super().__init__(data_dir)
        self.log = log
        with log.open("wb") as handle:
            self.process = subprocess.Popen(  # noqa: S603
                [sys.executable, "-m", "memoryhub.embedded_postgres", "serve", str(data_dir)],
                cwd=REPO,
                stdout=handle,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def output(self) -> str:
        return self.log.read_text()

    def clean_up(self) -> None:
        """Whatever a failed test left running must not outlive it."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
        self.kill_leftovers()


@pytest.fixture
def supervised(tmp_path: Path) -> Iterator[Supervised]:
    running = Supervised(tmp_path / "data", tmp_path / "supervisor.log")
    try:
        # Once the supervisor watches it: a server killed while the supervisor still sets
        # it up is a failed start, retried the same way but reported otherwise.
        wait_for(
            lambda: (
                ("PostgreSQL runs" in running.output() and running.answers())
                or running.process.poll() is not None
            ),
            START_SECONDS,
            "the supervised PostgreSQL to answer",
        )
        assert running.process.poll() is None, running.output()
        yield running
    finally:
        running.clean_up()


@pytest.mark.slow
def test_a_postmaster_killed_with_sigkill_is_started_again_and_sigterm_stops_it(
    supervised: Supervised,
) -> None:
    first = supervised.postmaster()
    assert first is not None

    first.kill()  # SIGKILL: no shutdown, postmaster.pid left behind, as in a crash
    first.wait(30)

    wait_for(
        lambda: (
            (supervised.answers() and supervised.postmaster() not in (None, first))
            or supervised.process.poll() is not None
        ),
        RESTART_SECONDS,
        "the supervisor to start PostgreSQL again",
    )
    assert supervised.process.poll() is None, supervised.output()
    assert "PostgreSQL died" in supervised.output()
    # The restarted server ran crash recovery on the same data, not a new cluster.
    assert "database system was interrupted" in (supervised.pgdata / "log").read_text()

    supervised.process.send_signal(signal.SIGTERM)  # what honcho sends on Ctrl-C or make stop

    assert supervised.process.wait(STOP_SECONDS) == 0, supervised.output()
    assert supervised.processes() == []
    assert not (supervised.pgdata / "postmaster.pid").exists()


@pytest.mark.slow
def test_a_server_shut_down_cleanly_from_outside_stays_down_and_the_supervisor_exits(
    supervised: Supervised,
) -> None:
    running = supervised.postmaster()
    assert running is not None

    subprocess.run(  # noqa: S603 (what make db-stop runs, as the server's OS user)
        [str(embedded_postgres.bin_dir() / "pg_ctl"), "-D", str(supervised.pgdata), "-w", "stop"],
        check=True,
        capture_output=True,
        user="pgserver" if os.geteuid() == 0 else None,
    )

    assert supervised.process.wait(STOP_SECONDS) == 1, supervised.output()
    assert "was shut down from outside" in supervised.output()
    assert supervised.processes() == []


def test_restart_delays_double_up_to_a_cap_and_give_up_after_repeated_failures() -> None:
    most = embedded_postgres.MAX_RESTART_FAILURES
    delays = [embedded_postgres.restart_delay(failures) for failures in range(1, most + 1)]

    assert delays[:6] == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0]
    assert delays[6:-1] == [30.0] * (most - 7)
    assert delays[-1] is None


@pytest.mark.slow
def test_make_run_serves_again_after_its_embedded_postgres_is_killed_and_make_stop_stops_it(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    port = free_port()
    kept_out = {"REDIS_URL", "DATABASE_URL", "MEMORYHUB_DATABASE_NAME", "SECRET_KEY", "MEMORYHUB_VAULT_KEY"}
    env = {k: v for k, v in os.environ.items() if k not in kept_out | {"MAKEFLAGS", "MFLAGS", "MAKELEVEL"}}
    env.update(
        DJANGO_SETTINGS_MODULE="memoryhub.settings",
        MEMORYHUB_DATA_DIR=str(data),
        HOST="127.0.0.1",
        PORT=str(port),
    )
    log = tmp_path / "make-run.log"
    server = EmbeddedCluster(data)
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
    started: dict[str, int] = {}
    try:
        wait_for(
            lambda: "MEMORYHUB_TOKEN=" in log.read_text() or run.poll() is not None,
            START_SECONDS,
            "bootstrap",
        )
        token = re.search(r"MEMORYHUB_TOKEN=(\S+)", log.read_text())
        assert token is not None, log.read_text()
        url = f"http://127.0.0.1:{port}/api/v1/teams/my-team/memories/"
        headers = {"Authorization": f"Bearer {token.group(1)}"}

        def serves() -> bool:
            with contextlib.suppress(httpx.TransportError):
                return httpx.get(url, headers=headers, timeout=10).status_code == 200
            return False

        wait_for(lambda: serves() or run.poll() is not None, START_SECONDS, "make run to serve")
        assert run.poll() is None, log.read_text()
        crashed = server.postmaster()
        assert crashed is not None
        backends = crashed.children()

        crashed.kill()
        # Its backends end on their own once they see it gone; until then one of them may
        # still answer a request on its open connection.
        _, alive = psutil.wait_procs([crashed, *backends], timeout=30)
        assert alive == []

        wait_for(
            lambda: (serves() and server.postmaster() not in (None, crashed)) or run.poll() is not None,
            RESTART_SECONDS,
            "make run to serve again on a new postmaster",
        )
        assert run.poll() is None, log.read_text()
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
        for pid in [run.pid, *started.values()]:
            if group_alive(pid):
                os.killpg(pid, signal.SIGKILL)
        run.wait(10)
        leftovers = server.kill_leftovers()

    assert set(started) == {"postgres", "redis", "web", "worker", "beat"}, output
    assert "PostgreSQL died" in output
    assert "Stopping make run" in stopped.stdout, stopped.stdout + stopped.stderr
    assert left_running == []
    assert leftovers == []
    assert not (data / "pgdata" / "postmaster.pid").exists()
