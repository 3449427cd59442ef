"""gunicorn's settings wherever MemoryHub's web server runs (`make run`'s Procfile, the
Dockerfile, the bench): `gunicorn memoryhub.wsgi -c python:memoryhub.gunicorn_conf`.

Threaded workers, so one team's slow request (a 64 KiB save being scrubbed and checked
for duplicates) holds one thread, not a whole process: the other threads go on serving
other teams (docs/security.md, "Web server"). WEB_CONCURRENCY is gunicorn's own
variable for the number of processes; by default one per core (at least 2, at most 8).

Prometheus values (docs/operations.md, "Metrics") go to files in the `web` folder of the
metrics directory, so `/metrics` in any worker sums every worker: set here, in the
master, before any worker loads prometheus_client (each reads the variable at import)."""

import gc
import os
from typing import Any

from core.settings_env import default_processes, metrics_dir, metrics_enabled, reset_metrics_dir

workers = int(os.environ.get("WEB_CONCURRENCY") or default_processes(at_least=2))
# gthread, with a thread taken only once a request's headers have arrived
# (memoryhub.gunicorn_worker; MEMORYHUB_HEADER_TIMEOUT_SECONDS).
worker_class = "memoryhub.gunicorn_worker.HeaderReadingWorker"
threads = int(os.environ.get("MEMORYHUB_WEB_THREADS", "4"))
# Idle keep-alive connections stay open longer than clients and load balancers keep
# theirs (httpx 5 s, most balancers 60 s): with gunicorn's 2 s, a client reusing a
# connection the server had just closed got a ReadError (the load drill met one). An idle
# connection waits in the poller, not on a thread.
keepalive = int(os.environ.get("MEMORYHUB_WEB_KEEPALIVE_SECONDS", "75"))
accesslog = "-"
# Sign-in link tokens are redacted from the access and error logs (memoryhub.log_redaction).
logger_class = "memoryhub.log_redaction.GunicornLogger"

WEB_METRICS_DIR = metrics_dir() / "web"
if metrics_enabled():
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(WEB_METRICS_DIR)


def on_starting(server: Any) -> None:
    if metrics_enabled():
        reset_metrics_dir(WEB_METRICS_DIR)


def post_worker_init(worker: Any) -> None:
    """The application is loaded: what it built lives as long as the worker. Frozen out of
    the collector's reach, a full collection walks only what requests made since (in
    process, about 3 ms instead of 200 for the 236,000 objects a worker holds at start)."""
    gc.freeze()


def child_exit(server: Any, worker: Any) -> None:
    """A worker that died or was replaced leaves its counters (still summed) but not its
    live gauges (the pool's connections)."""
    if metrics_enabled():
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid, str(WEB_METRICS_DIR))
