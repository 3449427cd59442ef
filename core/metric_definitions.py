"""MemoryHub's Prometheus metrics (docs/operations.md, "Metrics"): defined here, at the
bottom floor, so every app can record them; `/metrics` (memoryhub.metrics_endpoint) serves them.

Labels are always bounded and never carry a secret, a token, a memory's key or content,
or a raw path: a route is its URL pattern's name, a team its slug, a task its name.

Under gunicorn and the Celery worker, values live in files of PROMETHEUS_MULTIPROC_DIR
(set by memoryhub.gunicorn_conf and memoryhub.celery before this module is imported), so
`/metrics` sums every process; elsewhere (tests, runserver) in this process's memory.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from prometheus_client import Counter, Gauge, Histogram

# Latencies of a whole request or task span milliseconds to minutes; a search path's
# step milliseconds to seconds.
REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
STEP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
TASK_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)

HTTP_REQUESTS = Counter(
    "memoryhub_http_requests",
    "HTTP requests answered, by URL pattern name, method and status.",
    ["route", "method", "status"],
)
HTTP_REQUEST_SECONDS = Histogram(
    "memoryhub_http_request_duration_seconds",
    "Time to answer an HTTP request, by URL pattern name, method and status.",
    ["route", "method", "status"],
    buckets=REQUEST_BUCKETS,
)
SEARCH_PATH_SECONDS = Histogram(
    "memoryhub_search_path_duration_seconds",
    "Time a search spends on each path: keyword and vector candidates, and the merge "
    "(cross-scoring, ranking, diversifying), by search mode.",
    ["mode", "path"],
    buckets=STEP_BUCKETS,
)
QUERY_EMBEDDING_SECONDS = Histogram(
    "memoryhub_query_embedding_duration_seconds",
    "Time to embed a search query with the team's provider, by outcome (ok, unavailable).",
    ["outcome"],
    buckets=STEP_BUCKETS,
)
THROTTLED_REQUESTS = Counter(
    "memoryhub_throttled_requests",
    "Requests refused with 429, by throttle scope (agent_read, agent_write, anonymous, write_slot).",
    ["scope"],
)
TASKS = Counter(
    "memoryhub_tasks",
    "Celery tasks finished, by task name and outcome (Celery's state: SUCCESS, FAILURE, RETRY...).",
    ["task", "outcome"],
)
TASK_SECONDS = Histogram(
    "memoryhub_task_duration_seconds",
    "Time a Celery task ran, by task name and outcome.",
    ["task", "outcome"],
    buckets=TASK_BUCKETS,
)
BEAT_JOB_RUNS = Counter(
    "memoryhub_beat_job_runs",
    "Runs of the periodic jobs beat sends, by periodic task name and outcome.",
    ["job", "outcome"],
)
BEAT_JOB_LAST_SUCCESS = Gauge(
    "memoryhub_beat_job_last_success_timestamp_seconds",
    "When each periodic job last succeeded (Unix time).",
    ["job"],
    multiprocess_mode="max",
)
# A sample of each process's pool, taken as each request ends; summed over live processes.
DB_POOL_CONNECTIONS = Gauge(
    "memoryhub_db_pool_connections",
    "Connections of the web processes' psycopg pools, by database alias and state "
    "(open: opened by the pool, idle: open and not lent, max: the pools' size limit).",
    ["alias", "state"],
    multiprocess_mode="livesum",
)
DB_POOL_WAITING = Gauge(
    "memoryhub_db_pool_requests_waiting",
    "Requests waiting for a connection from the web processes' pools, by database alias.",
    ["alias"],
    multiprocess_mode="livesum",
)


@contextmanager
def timed(timings: dict[str, float], path: str) -> Iterator[None]:
    """Add the block's duration to timings[path] (a path may run in several steps)."""
    started = time.perf_counter()
    try:
        yield
    finally:
        timings[path] = timings.get(path, 0.0) + time.perf_counter() - started


def observe_search(*, mode: str, timings: dict[str, float]) -> None:
    for path, seconds in timings.items():
        SEARCH_PATH_SECONDS.labels(mode=mode, path=path).observe(seconds)
