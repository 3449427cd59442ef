"""Shared by every section: the isolated bench database, server and worker
subprocesses, percentiles, tables and the JSON writer.

Isolation: the bench sets MEMORYHUB_DATA_DIR=<repo>/.memoryhub/bench, so the settings
start a separate embedded PostgreSQL (its own folder, socket and keys), and it drops
DATABASE_URL and REDIS_URL from its own environment, so nothing of the developer's
data can be reached. Call `prepare_environment()` before `django.setup()`.
"""

from __future__ import annotations

import json
import os
import platform
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
RESULTS_DIR = REPO / "bench-results"
DATA_DIR = REPO / ".memoryhub" / "bench"
LOG_DIR = DATA_DIR / "logs"
BIN = Path(sys.executable).parent
SETTINGS_MODULE = "memoryhub.settings"
# Variables that would point the bench at someone else's database or broker.
FOREIGN_VARIABLES = (
    "DATABASE_URL",
    "OPERATOR_DATABASE_URL",
    "REDIS_URL",
    "MEMORYHUB_TEST_DB_NAME",
    "MEMORYHUB_DATABASE_NAME",
    "MEMORYHUB_QUEUE",
)


# --------------------------------------------------------------------------- environment


def bench_env(**extra: str) -> dict[str, str]:
    """The environment of every bench process: our own data folder, plain settings."""
    env = {k: v for k, v in os.environ.items() if k not in FOREIGN_VARIABLES}
    env.update(
        MEMORYHUB_DATA_DIR=str(DATA_DIR),
        DJANGO_SETTINGS_MODULE=SETTINGS_MODULE,
        LOG_LEVEL=os.environ.get("MEMORYHUB_BENCH_LOG_LEVEL", "WARNING"),
        # Plain http on 127.0.0.1, as `make run` serves (no HTTPS redirect, no Secure cookies).
        MEMORYHUB_PLAIN_HTTP="true",
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


def prepare_environment() -> None:
    """Point this process at the bench data folder, migrate it (in a subprocess, as
    `manage.py migrate` would run), then set Django up."""
    env = bench_env()  # read before clearing: it starts from this environment
    os.environ.clear()
    os.environ.update(env)
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput"],
        cwd=REPO,
        env=bench_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise SystemExit(f"migrating the bench database failed:\n{result.stdout}\n{result.stderr}")
    import django

    django.setup()
    print(f"bench database: {DATA_DIR} (migrated in {time.perf_counter() - started:.1f} s)")


def reset_data() -> None:
    """Empty every team (and, with them, every team-scoped row) and the embedding cache
    of the bench database, so that each section starts from nothing. TRUNCATE is not
    subject to row-level security; this is the bench's own database."""
    from django.conf import settings
    from django.db import connection

    from teams.roles import as_owner

    if Path(settings.DATA_DIR).resolve() != DATA_DIR.resolve():
        raise RuntimeError(f"refusing to reset {settings.DATA_DIR}: not the bench data folder")
    with as_owner(connection), connection.cursor() as cursor:
        # The audit trail outlives its team (no foreign key): emptied by name.
        cursor.execute("TRUNCATE teams_team, teams_auditevent, search_embeddingcache CASCADE")


def vacuum_analyze(*tables: str) -> float:
    """VACUUM ANALYZE `tables` as the owner role, as an operator follows a bulk load (and
    as autovacuum would later); its seconds. The application role may not: its ANALYZE
    is skipped with only a warning, and the planner then plans with statistics of what
    the table held before (docs/facts.md, "Bench"). Checked by each table's reltuples,
    which only an ANALYZE (or VACUUM) sets."""
    from django.db import connection

    from teams.roles import as_owner

    began = time.perf_counter()
    with as_owner(connection), connection.cursor() as cursor:
        for table in tables:
            cursor.execute(f"VACUUM ANALYZE {table}")
            cursor.execute("SELECT reltuples FROM pg_class WHERE relname = %s", [table])
            if cursor.fetchone()[0] <= 0:
                raise RuntimeError(f"{table} was not analyzed")
    return time.perf_counter() - began


def environment() -> dict[str, Any]:
    """What the figures were measured on."""
    import django
    from django.db import connection

    from search.embeddings.profiles import provider_for

    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        postgres = cursor.fetchone()[0]
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        row = cursor.fetchone()
    provider = provider_for(None)
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpu_count": os.cpu_count(),
        "machine": platform.machine(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "django": django.get_version(),
        "postgres": postgres,
        "pgvector": row[0] if row else None,
        "embedding_model": getattr(provider, "model", None),
        "embedding_dimensions": getattr(provider, "dimensions", None),
        "git_commit": _git("rev-parse", "HEAD"),
        "git_dirty": bool(_git("status", "--porcelain")),
    }


def _git(*args: str) -> str:
    result = subprocess.run(  # noqa: S603 (fixed arguments)
        ["git", *args],  # noqa: S607 (git from PATH, like a developer would run it)
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    return result.stdout.strip()


# --------------------------------------------------------------------------- figures


def percentile(values: Sequence[float], p: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * p / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summarize(ms: Sequence[float]) -> dict[str, float]:
    """n, mean, p50, p95, p99, min, max of milliseconds, rounded to 0.01 ms."""
    return {
        "n": len(ms),
        "mean": round(sum(ms) / len(ms), 2),
        "p50": round(percentile(ms, 50), 2),
        "p95": round(percentile(ms, 95), 2),
        "p99": round(percentile(ms, 99), 2),
        "min": round(min(ms), 2),
        "max": round(max(ms), 2),
    }


def print_table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], *, separator_before: int | None = None
) -> None:
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        first = str(cells[0]).ljust(widths[0])
        rest = (str(c).rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True))
        return " | ".join([first, *rest])

    rule = "-+-".join("-" * w for w in widths)
    print(line(headers))
    print(rule)
    for i, row in enumerate(rows):
        if separator_before is not None and i == separator_before:
            print(rule)
        print(line(row))


def write_json(name: str, payload: dict[str, Any]) -> Path:
    RESULTS_DIR.mkdir(exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2, default=str) + "\n")
    print(f"wrote {path.relative_to(REPO)}")
    return path


# --------------------------------------------------------------------------- subprocesses


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(check: Callable[[], bool], *, timeout: float, what: str, interval: float = 0.2) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except Exception:  # noqa: S110 (not up yet: any error means "try again")
            pass
        time.sleep(interval)
    raise TimeoutError(f"{what} not ready after {timeout:.0f} s")


class Subprocess:
    """A child process in its own process group, logging to a file, stopped on exit."""

    def __init__(self, name: str, args: list[str], env: dict[str, str]) -> None:
        self.name = name
        self.log_path = LOG_DIR / f"{name}.log"
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("w")
        self.process = subprocess.Popen(  # noqa: S603 (our own fixed commands)
            args, cwd=REPO, env=env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def alive(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM (graceful), then SIGKILL to its process group if it lingers."""
        if self.alive():
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        # Children (gunicorn or celery workers) share the group; make sure none is left.
        with suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self._log.close()


@contextmanager
def api_server(*, workers: int | None = 2, **extra_env: str) -> Iterator[str]:
    """gunicorn memoryhub.wsgi with the deployment's config (memoryhub.gunicorn_conf) on
    127.0.0.1:<free port> (`workers` None: the config's default, as `make run`); yields the base URL once
    /healthz answers."""
    import httpx

    port = free_port()
    server = Subprocess(
        "gunicorn",
        [
            str(BIN / "gunicorn"),
            "memoryhub.wsgi",
            "-c",
            "python:memoryhub.gunicorn_conf",
            "--bind",
            f"127.0.0.1:{port}",
            *(["--workers", str(workers)] if workers is not None else []),
            "--timeout",
            "120",
        ],
        bench_env(**extra_env),
    )
    base = f"http://127.0.0.1:{port}"
    try:
        try:
            wait_for(
                lambda: server.alive() and httpx.get(f"{base}/healthz", timeout=2).status_code == 200,
                timeout=90,
                what="gunicorn",
            )
        except TimeoutError:
            raise RuntimeError(f"the API server did not start; its log:\n{server.log_tail()}") from None
        yield base
    finally:
        server.stop()


@contextmanager
def embedded_redis() -> Iterator[str]:
    """The bench's own Redis (memoryhub.embedded_redis in the bench data folder), emptied
    first; yields its URL. No Redis the machine happens to run is ever used."""
    import redis

    from memoryhub import embedded_redis as embedded

    folder = DATA_DIR / "redis"
    embedded.stop(folder)  # one left behind by an interrupted run
    server = embedded.start(folder)
    url = embedded.url(folder)
    client = redis.Redis.from_url(url.replace("redis+socket://", "unix://", 1))
    try:
        client.flushall()
        yield url
    finally:
        client.close()
        server.stop()


@contextmanager
def celery_worker(*, redis_url: str, queue: str) -> Iterator[None]:
    """One Celery worker on `queue`, with `make run`'s defaults (prefork, one process per
    core: MEMORYHUB_WORKER_CONCURRENCY); ready once it answers a ping."""
    from celery import Celery

    worker = Subprocess(
        "celery-worker",
        [
            str(BIN / "celery"),
            "-A",
            "memoryhub",
            "worker",
            "--pool",
            "prefork",
            "-Q",
            queue,
            "--loglevel",
            "WARNING",
            "--without-gossip",
            "--without-mingle",
        ],
        bench_env(REDIS_URL=redis_url),
    )
    control = Celery(broker=redis_url)
    try:
        try:
            wait_for(
                lambda: worker.alive() and bool(control.control.ping(timeout=1.0)),
                timeout=90,
                what="celery worker",
                interval=0.5,
            )
        except TimeoutError:
            raise RuntimeError(f"the Celery worker did not start; its log:\n{worker.log_tail()}") from None
        yield
    finally:
        control.close()
        worker.stop(timeout=30)
