"""What an agent waits for around the SQL: requests through gunicorn as `make run` serves
them (its worker and thread layout, the embedded Redis for the throttles' counts), on a
team of 1,000 memories: a GET of one entry, a hybrid search with max_results 10, the
same search from 4 clients at once, and what each costs in CPU, in the web server's
processes and in PostgreSQL's (docs/operations.md, "Request path").

`python -m tests.bench request_path` (part of `make bench`); bench-results/request_path.json.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable
from typing import Any

import psutil

from tests.bench import harness
from tests.bench.latency import (
    NeighbourPool,
    TextGenerator,
    _Embedder,
    _seed,
    _setup_teams,
    build_queries,
    memory_texts,
)

SIZE = 1_000
REQUESTS = 300
WARMUP = 60
CLIENTS = 4
MAX_RESULTS = 10
TARGETS = {
    "get_p50_ms": 5.0,
    "hybrid_p50_ms": 15.0,
    "hybrid_p95_ms": 25.0,
    "concurrent_to_single_p95": 2.0,
}


def run(*, quick: bool = False) -> dict[str, Any]:
    requests = 100 if quick else REQUESTS
    print(f"\n== request path: through gunicorn as `make run` serves, a team of {SIZE:,} memories ==")
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
    queries = [q["query"] for q in build_queries([text for _, text in memory_texts(0, SIZE)])]
    keys = [f"mem-{i:06d}" for i in range(1, SIZE + 1)]
    rng = random.Random(7)

    load_before = os.getloadavg()[0]
    with (
        harness.embedded_redis() as redis_url,
        harness.api_server(
            workers=None,
            REDIS_URL=redis_url,
            MEMORYHUB_THROTTLE_READ="1000000/min",
            # The clients all come from 127.0.0.1, where agents would come from addresses
            # of their own: the guard's limit per address would queue them (429).
            MEMORYHUB_IN_FLIGHT_PER_CLIENT=str(CLIENTS * 2),
        ) as base,
    ):
        import httpx

        headers = {"Authorization": f"Bearer {seed_team.token}"}
        team_url = f"{base}/api/v1/teams/{seed_team.slug}"
        processes = _Processes(base)

        def get(client: httpx.Client) -> None:
            _ok(client.get(f"{team_url}/memories/{rng.choice(keys)}/"))

        def search(client: httpx.Client) -> None:
            body = {"query": rng.choice(queries), "max_results": MAX_RESULTS, "mode": "hybrid"}
            _ok(client.post(f"{team_url}/search/", json=body))

        with httpx.Client(headers=headers, timeout=120) as client:
            for _ in range(WARMUP):  # both gunicorn processes load the model and fill their caches
                get(client)
                search(client)
            single_get, get_cpu = processes.measure(lambda: _timed(get, client, requests))
            single_search, search_cpu = processes.measure(lambda: _timed(search, client, requests))
        concurrent_search = _concurrent(search, headers, CLIENTS, requests)
        concurrent_get = _concurrent(get, headers, CLIENTS, requests)

    results = {
        "get": harness.summarize(single_get),
        "hybrid_search_k10": harness.summarize(single_search),
        f"hybrid_search_k10_{CLIENTS}_clients": harness.summarize(concurrent_search),
        f"get_{CLIENTS}_clients": harness.summarize(concurrent_get),
    }
    cpu = {
        "get": _per_request(get_cpu, requests),
        "hybrid_search_k10": _per_request(search_cpu, requests),
    }
    ratio = results[f"hybrid_search_k10_{CLIENTS}_clients"]["p95"] / results["hybrid_search_k10"]["p95"]
    get_ratio = results[f"get_{CLIENTS}_clients"]["p95"] / results["get"]["p95"]
    load = {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)}
    rows = [
        [name, f"{r['p50']:.1f}", f"{r['p95']:.1f}", f"{r['p99']:.1f}", str(r["n"])]
        for name, r in results.items()
    ]
    print()
    harness.print_table(["request", "p50 ms", "p95 ms", "p99 ms", "n"], rows)
    print(
        f"{CLIENTS} clients at once, hybrid p95 / one client's p95: {ratio:.2f}x (target at most "
        f"{TARGETS['concurrent_to_single_p95']:.0f}x); GET: {get_ratio:.2f}x"
    )
    print()
    harness.print_table(
        ["CPU per request", "web ms", "PostgreSQL ms"],
        [[name, f"{c['web_ms']:.2f}", f"{c['postgres_ms']:.2f}"] for name, c in cpu.items()],
    )
    print(f"load average (1 min) {load['before']} before, {load['after']} after: the machine may be shared")
    return {
        "size": SIZE,
        "requests_per_row": requests,
        "clients": CLIENTS,
        "latency_ms": results,
        "concurrent_to_single_p95": round(ratio, 2),
        "concurrent_to_single_p95_get": round(get_ratio, 2),
        "cpu_per_request_ms": cpu,
        "targets": TARGETS,
        "load_average_1min": load,
    }


def _ok(response: Any) -> None:
    if response.status_code != 200:
        raise RuntimeError(f"answered {response.status_code}: {response.text[:300]}")


def _timed(call: Callable[[Any], None], client: Any, n: int) -> list[float]:
    samples = []
    for _ in range(n):
        began = time.perf_counter()
        call(client)
        samples.append((time.perf_counter() - began) * 1000)
    return samples


def _concurrent(call: Callable[[Any], None], headers: dict[str, str], clients: int, n: int) -> list[float]:
    """`clients` threads, each with its own connection, `n` requests each, started together."""
    import httpx

    samples: list[float] = []
    lock = threading.Lock()
    start = threading.Barrier(clients)

    def client_loop() -> None:
        with httpx.Client(headers=headers, timeout=120) as client:
            call(client)  # its connection open before the clock starts
            start.wait()
            mine = _timed(call, client, n)
        with lock:
            samples.extend(mine)

    threads = [threading.Thread(target=client_loop) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return samples


def _per_request(cpu: dict[str, float], n: int) -> dict[str, float]:
    return {f"{name}_ms": round(seconds * 1000 / n, 3) for name, seconds in cpu.items()}


class _Processes:
    """The CPU seconds of the web server's processes (gunicorn's, found by the port it
    binds) and of the bench's PostgreSQL (the postmaster of the bench data folder and
    its children: the backends serving the requests)."""

    def __init__(self, base: str) -> None:
        port = base.rsplit(":", 1)[1]
        found: dict[int, psutil.Process] = {}
        for process in psutil.process_iter(["cmdline"]):
            cmdline = " ".join(process.info["cmdline"] or [])
            if "memoryhub.wsgi" in cmdline and f"127.0.0.1:{port}" in cmdline:
                found[process.pid] = process
                found.update((child.pid, child) for child in process.children(recursive=True))
        self.web = list(found.values())
        postmaster_pid = int((_pgdata() / "postmaster.pid").read_text().split()[0])
        self.postmaster = psutil.Process(postmaster_pid)

    def _cpu(self) -> dict[str, float]:
        def seconds(processes: list[psutil.Process]) -> float:
            total = 0.0
            for process in processes:
                try:
                    times = process.cpu_times()
                except psutil.NoSuchProcess:
                    continue
                total += times.user + times.system
            return total

        postgres = [self.postmaster, *self.postmaster.children(recursive=True)]
        return {"web": seconds(self.web), "postgres": seconds(postgres)}

    def measure(self, block: Callable[[], list[float]]) -> tuple[list[float], dict[str, float]]:
        before = self._cpu()
        samples = block()
        after = self._cpu()
        # A backend that ended meanwhile takes its seconds with it: the pool keeps them open.
        return samples, {name: after[name] - before[name] for name in before}


def _pgdata() -> Any:
    return harness.DATA_DIR / "pgdata"
