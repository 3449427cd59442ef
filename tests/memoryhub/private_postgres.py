"""A PostgreSQL of one test's own, started the way the project starts its embedded one.

`python -m tests.memoryhub.private_postgres DATA_DIR` starts the embedded server in
DATA_DIR with `memoryhub.embedded_postgres.ensure_running` (which also restarts it on its
data after a crash, with crash recovery), prints the Django database settings it answers
as one JSON line, and holds the server until its standard input closes. pgserver stops the
server when the last process holding it exits, so a test restarts a killed server by
starting a second holder, and stops it by closing every holder's input.

`PrivatePostgres` is the test's side: start, kill (SIGKILL the postmaster and every
process of it, as a crash would), start again, and stop leaving nothing running.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import psutil

REPO = Path(__file__).resolve().parents[2]
# Hang detector, not a speed target.
START_SECONDS = 120.0


class PrivatePostgres:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.pgdata = (data_dir / "pgdata").resolve()
        self.holders: list[subprocess.Popen[str]] = []
        self.settings: dict[str, str] = {}
        self.passwords: dict[str, str] = {}

    def start(self) -> None:
        holder = subprocess.Popen(  # noqa: S603
            [sys.executable, "-m", "tests.memoryhub.private_postgres", str(self.data_dir)],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.holders.append(holder)
        assert holder.stdout is not None
        line = holder.stdout.readline()
        if not line:
            raise AssertionError(f"the private PostgreSQL did not start (exit {holder.wait(START_SECONDS)})")
        databases = json.loads(line)
        self.settings = databases["default"]
        self.passwords = {
            self.settings["USER"]: self.settings["PASSWORD"],
            self.settings["OWNER_USER"]: self.settings["OWNER_PASSWORD"],
            databases["operator"]["USER"]: databases["operator"]["PASSWORD"],
        }

    def url(self, role: str) -> str:
        """A DATABASE_URL for `role`, with its password (the socket folder written
        postgres://role:password@//folder/db)."""
        login = f"{quote(role, safe='')}:{quote(self.passwords[role], safe='')}"
        return f"postgres://{login}@/{self.settings['HOST']}/{self.settings['NAME']}"

    def urls(self, role: str) -> dict[str, str]:
        """DATABASE_URL for `role` and OPERATOR_DATABASE_URL, the settings of a server of your own."""
        return {"DATABASE_URL": self.url(role), "OPERATOR_DATABASE_URL": self.url("memoryhub_operator")}

    def processes(self) -> list[psutil.Process]:
        """The running postmaster of this data folder and all its children."""
        found = []
        for process in psutil.process_iter(attrs=("name", "cmdline")):
            cmdline = process.info["cmdline"] or []
            if process.info["name"] == "postgres" and str(self.pgdata) in cmdline:
                found.append(process)
                with contextlib.suppress(psutil.NoSuchProcess):
                    found.extend(process.children(recursive=True))
        return found

    def kill(self) -> None:
        """SIGKILL the postmaster first, then whatever of it is left: a crash."""
        processes = self.processes()
        assert processes, "the private PostgreSQL is not running"
        for process in processes:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
        psutil.wait_procs(processes, timeout=30)
        assert not self.processes(), "the private PostgreSQL outlived SIGKILL"

    def stop(self) -> None:
        """Let every holder go (the last one stops the server); kill what is left."""
        for holder in self.holders:
            if holder.stdin is not None:
                with contextlib.suppress(BrokenPipeError):
                    holder.stdin.close()
        for holder in self.holders:
            try:
                holder.wait(60)
            except subprocess.TimeoutExpired:
                holder.kill()
                holder.wait(10)
        leftovers = self.processes()
        for process in leftovers:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
        psutil.wait_procs(leftovers, timeout=30)


def hold(data_dir: Path) -> None:
    sys.path.insert(0, str(REPO))
    from memoryhub import embedded_postgres

    databases = embedded_postgres.ensure_running(data_dir)
    print(
        json.dumps({alias: {k: str(v) for k, v in db.items()} for alias, db in databases.items()}), flush=True
    )
    sys.stdin.read()  # until the test closes it; exiting then lets pgserver stop the server


if __name__ == "__main__":
    hold(Path(sys.argv[1]))
