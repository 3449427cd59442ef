"""CPU per request, for the capacity model of docs/operations.md ("Capacity"): through
gunicorn as `make run` serves (with the embedded Redis and one Celery worker), on a team
of 1,000 memories, the CPU seconds the web processes, the worker and PostgreSQL spend
per GET of one entry, hybrid search (max_results 10), prompt injection and single save,
and per memory indexed (the worker's embedding, its writes and the contradiction pass).

CPU time, not wall time: what a request costs the machine whatever else runs on it, so
the figures hold on a shared machine better than latencies do (a busy core still makes
the cache misses and context switches dearer).

`python -m tests.bench capacity` (part of `make bench`); bench-results/capacity.json.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

import psutil

from tests.bench import harness
from tests.bench.latency import NeighbourPool, TextGenerator, _Embedder, _seed, _setup_teams, memory_texts

SIZE = 1_000
REQUESTS = 100
WARMUP = 20
INDEX_TIMEOUT_SECONDS = 600

# What one active agent asks for in an hour of work, the model's assumption (a coding
# agent: a session's injection, a search before most steps, a few reads and saves).
PER_AGENT_HOUR = {"injection": 2, "search": 60, "get": 20, "save": 10}


def run(*, quick: bool = False) -> dict[str, Any]:
    from django.conf import settings

    from teams.services import create_token

    n = 30 if quick else REQUESTS
    print(f"\n== capacity: CPU per request through gunicorn and one worker, a team of {SIZE:,} memories ==")
    harness.reset_data()
    [seed_team] = _setup_teams(1)
    embedder = _Embedder()
    _seed(
        [seed_team],
        {0: SIZE},
        embedder,
        TextGenerator(team_seed=0),
        NeighbourPool(),
        label=f"seeding {SIZE:,}",
    )
    embedder.save()
    writer = create_token(
        team=seed_team.team, name="bench-writer", scopes=["read", "write"], actor="test"
    ).raw
    new_texts = [text for _, text in memory_texts(4242, n + WARMUP)]
    queries = [" ".join(text.split()[:6]) for _, text in memory_texts(0, 200)]
    keys = [f"mem-{i:06d}" for i in range(1, SIZE + 1)]
    rng = random.Random(11)
    queue = getattr(settings, "CELERY_TASK_DEFAULT_QUEUE", None) or "celery"

    with (
        harness.embedded_redis() as redis_url,
        harness.celery_worker(redis_url=redis_url, queue=queue),
        harness.api_server(
            workers=None,
            REDIS_URL=redis_url,
            MEMORYHUB_THROTTLE_READ="1000000/min",
            MEMORYHUB_THROTTLE_WRITE="1000000/min",
        ) as base,
    ):
        import httpx

        team_url = f"{base}/api/v1/teams/{seed_team.slug}"
        processes = _Processes()
        calls: dict[str, Callable[[httpx.Client], None]] = {
            "get": lambda c: _ok(c.get(f"{team_url}/memories/{rng.choice(keys)}/")),
            "search": lambda c: _ok(
                c.post(
                    f"{team_url}/search/",
                    json={"query": rng.choice(queries), "max_results": 10, "mode": "hybrid"},
                )
            ),
            "injection": lambda c: _ok(
                c.get(f"{team_url}/injection/", params={"query": rng.choice(queries)})
            ),
        }
        cpu: dict[str, dict[str, float]] = {}
        with httpx.Client(headers={"Authorization": f"Bearer {writer}"}, timeout=120) as client:
            for name, call in calls.items():
                for _ in range(WARMUP):
                    call(client)
                cpu[name] = processes.per_request(lambda call=call: [call(client) for _ in range(n)], n)
            for text in new_texts[:WARMUP]:  # the worker loads the model; the web's duplicate check embeds
                _save(client, team_url, text)
            _wait_indexed(seed_team.team, SIZE + WARMUP)
            cpu["save"] = processes.per_request(
                lambda: [_save(client, team_url, text) for text in new_texts[WARMUP:]], n
            )
            # Until every entry is indexed and the worker is idle again (the contradiction
            # pass runs after an entry is marked indexed).
            cpu["index"] = processes.per_request(
                lambda: (_wait_indexed(seed_team.team, SIZE + WARMUP + n), processes.wait_worker_idle()), n
            )

    model = _model(cpu)
    print()
    harness.print_table(
        ["CPU per request", "web ms", "worker ms", "PostgreSQL ms"],
        [
            [name, f"{c['web_ms']:.1f}", f"{c['worker_ms']:.1f}", f"{c['postgres_ms']:.1f}"]
            for name, c in cpu.items()
        ],
    )
    print(
        "save: the request only (its duplicate check embeds); index: from the last save until all are indexed"
    )
    print()
    harness.print_table(
        ["active agents", "web cores", "worker cores", "PostgreSQL cores", "requests/s"],
        [
            [
                f"{agents:,}",
                f"{m['web']:.2f}",
                f"{m['worker']:.2f}",
                f"{m['postgres']:.2f}",
                f"{m['requests_per_second']:.1f}",
            ]
            for agents, m in model.items()
        ],
    )
    print(f"an active agent's hour: {PER_AGENT_HOUR}; cores = CPU seconds per second, busy all the time")
    return {
        "size": SIZE,
        "requests_per_row": n,
        "cpu_per_request_ms": cpu,
        "per_agent_hour": PER_AGENT_HOUR,
        "cores_needed": {str(k): v for k, v in model.items()},
    }


def _ok(response: Any) -> None:
    if response.status_code not in (200, 201):
        raise RuntimeError(f"answered {response.status_code}: {response.text[:300]}")


def _save(client: Any, team_url: str, text: str) -> None:
    key = f"capacity-{abs(hash(text)):x}"
    _ok(client.post(f"{team_url}/memories/", json={"key": key, "content": text, "allow_duplicate": True}))


def _wait_indexed(team: Any, expected: int) -> None:
    from memories.models import IndexState, Memory
    from teams.scope import team_scope

    deadline = time.monotonic() + INDEX_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        with team_scope(team.id):
            indexed = Memory.objects.filter(team_id=team.id, index_state=IndexState.INDEXED).count()
        if indexed >= expected:
            return
        time.sleep(0.2)
    raise TimeoutError(f"{expected} memories not indexed after {INDEX_TIMEOUT_SECONDS} s")


def _model(cpu: dict[str, dict[str, float]]) -> dict[int, dict[str, float]]:
    """Cores each part needs for this many active agents (CPU seconds per second)."""
    model = {}
    for agents in (100, 1_000, 10_000):
        per_second = {name: agents * count / 3600 for name, count in PER_AGENT_HOUR.items()}
        cores = {"web": 0.0, "worker": 0.0, "postgres": 0.0}
        for name, rate in per_second.items():
            for part in cores:
                cores[part] += rate * cpu[name][f"{part}_ms"] / 1000
        for part in cores:  # every save is indexed once
            cores[part] += per_second["save"] * cpu["index"][f"{part}_ms"] / 1000
        model[agents] = {
            **{k: round(v, 3) for k, v in cores.items()},
            "requests_per_second": sum(per_second.values()),
        }
    return model


class _Processes:
    """The bench's own processes, told from other work on the machine by their data folder:
    gunicorn's and the Celery worker's (MEMORYHUB_DATA_DIR in their environment) and the
    bench PostgreSQL's (its postmaster and its children)."""

    def __init__(self) -> None:
        self.web: list[psutil.Process] = []
        self.worker: list[psutil.Process] = []
        for process in psutil.process_iter(["cmdline"]):
            cmdline = " ".join(process.info["cmdline"] or [])
            if "gunicorn" not in cmdline and "celery" not in cmdline:
                continue
            try:
                if process.environ().get("MEMORYHUB_DATA_DIR") != str(harness.DATA_DIR):
                    continue
            except (psutil.AccessDenied, psutil.NoSuchProcess):
                continue
            (self.web if "gunicorn" in cmdline else self.worker).append(process)
        pid = int((harness.DATA_DIR / "pgdata" / "postmaster.pid").read_text().split()[0])
        self.postmaster = psutil.Process(pid)

    def _seconds(self) -> dict[str, float]:
        def total(processes: list[psutil.Process]) -> float:
            seconds = 0.0
            for process in processes:
                try:
                    times = process.cpu_times()
                except psutil.NoSuchProcess:
                    continue
                # A prefork worker's children come and go; their time is counted in the parent's children_*.
                seconds += times.user + times.system + times.children_user + times.children_system
            return seconds

        def workers() -> list[psutil.Process]:
            found = {p.pid: p for p in self.worker}
            for process in self.worker:
                try:
                    found.update((child.pid, child) for child in process.children(recursive=True))
                except psutil.NoSuchProcess:
                    continue
            return list(found.values())

        def web() -> list[psutil.Process]:
            found = {p.pid: p for p in self.web}
            for process in self.web:
                try:
                    found.update((child.pid, child) for child in process.children(recursive=True))
                except psutil.NoSuchProcess:
                    continue
            return list(found.values())

        postgres = [self.postmaster, *self.postmaster.children(recursive=True)]
        return {"web": total(web()), "worker": total(workers()), "postgres": total(postgres)}

    def wait_worker_idle(self, *, quiet_seconds: float = 1.0) -> None:
        last = self._seconds()["worker"]
        while True:
            time.sleep(quiet_seconds)
            now = self._seconds()["worker"]
            if now - last < 0.05 * quiet_seconds:
                return
            last = now

    def per_request(self, block: Callable[[], Any], n: int) -> dict[str, float]:
        before = self._seconds()
        block()
        after = self._seconds()
        return {f"{name}_ms": round((after[name] - before[name]) * 1000 / n, 2) for name in before}
