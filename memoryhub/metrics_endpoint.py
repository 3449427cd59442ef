"""`/metrics` for Prometheus (docs/operations.md, "Metrics"), the middleware that counts
and times every request, and the collectors that read the database and the broker when Prometheus scrapes.

The endpoint answers only a bearer token equal to MEMORYHUB_METRICS_TOKEN; without
one, with a wrong one, or when the setting is empty, it is a plain 404 in the JSON
error shape, as for a page that does not exist.
"""

from __future__ import annotations

import hmac
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import redis
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from django.db.models import Count
from django.http import HttpRequest, HttpResponse, JsonResponse
from kombu.transport.redis import PRIORITY_STEPS, Channel
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from redis.exceptions import RedisError

from core.metric_definitions import DB_POOL_CONNECTIONS, DB_POOL_WAITING, HTTP_REQUEST_SECONDS, HTTP_REQUESTS
from memories.models import Memory
from teams.scope import dangerously_bypass_team_scope

logger = logging.getLogger(__name__)

# Any other method an HTTP client invents is counted as OTHER: labels stay bounded.
KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# The scrape-time reads give up quickly rather than hold a scrape (or a connection).
SCRAPE_STATEMENT_TIMEOUT_MS = 2000
SCRAPE_REDIS_TIMEOUT_SECONDS = 1.0


def route_label(request: HttpRequest) -> str:
    """The URL pattern's name (`memory-detail`, `dashboard:home`), never the path: a path
    holds team slugs, memory keys and ids. `unmatched` when no pattern matched."""
    match = getattr(request, "resolver_match", None)
    if match is None:
        return "unmatched"
    return match.view_name or match.route or "unnamed"


class RequestMetricsMiddleware:
    """First in MIDDLEWARE: counts and times every answer, redirects and refusals too."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = self.get_response(request)
        method = request.method if request.method in KNOWN_METHODS else "OTHER"
        labels = {"route": route_label(request), "method": method, "status": str(response.status_code)}
        HTTP_REQUESTS.labels(**labels).inc()
        HTTP_REQUEST_SECONDS.labels(**labels).observe(time.perf_counter() - started)
        sample_pool_usage()
        return response


# The last sample this process wrote, per alias: most requests find the same numbers,
# and a gauge's write (a file's, under gunicorn) is then skipped.
_written_pool_samples: dict[str, tuple[int, int, int, int]] = {}


def sample_pool_usage() -> None:
    """This process's share of the pools (psycopg_pool's get_stats), for every alias
    that has a pool open: summed over live processes, they are the server's usage."""
    for alias in connections:
        pool = getattr(connections[alias], "_connection_pools", {}).get(alias)
        if pool is None:
            continue
        stats = pool.get_stats()
        open_, idle = stats.get("pool_size", 0), stats.get("pool_available", 0)
        most, waiting = stats.get("pool_max", 0), stats.get("requests_waiting", 0)
        sample = (open_, idle, most, waiting)
        if _written_pool_samples.get(alias) == sample:
            continue
        DB_POOL_CONNECTIONS.labels(alias=alias, state="open").set(open_)
        DB_POOL_CONNECTIONS.labels(alias=alias, state="idle").set(idle)
        DB_POOL_CONNECTIONS.labels(alias=alias, state="max").set(most)
        DB_POOL_WAITING.labels(alias=alias).set(waiting)
        _written_pool_samples[alias] = sample


def metrics_view(request: HttpRequest) -> HttpResponse:
    # Here, not at the top: the middleware above loads this module before DRF's settings,
    # which core.api_errors needs loaded.
    from core.api_errors import error_body

    token = settings.MEMORYHUB_METRICS_TOKEN
    offered = request.headers.get("Authorization", "")
    scheme, _, value = offered.partition(" ")
    matches = hmac.compare_digest(value.encode(), token.encode())
    allowed = bool(token) and scheme.lower() == "bearer" and matches
    if not allowed or request.method not in ("GET", "HEAD"):
        return JsonResponse(error_body("not_found", "not found"), status=404)
    return HttpResponse(generate_latest(scrape_registry()), content_type=CONTENT_TYPE_LATEST)


def scrape_registry() -> CollectorRegistry:
    """What one scrape reports: every web and worker process's values (their files) or,
    outside gunicorn and the worker, this process's; and what is read now."""
    registry = CollectorRegistry(auto_describe=False)
    if "PROMETHEUS_MULTIPROC_DIR" in os.environ:
        folders = [settings.METRICS_DIR / "web", settings.METRICS_DIR / "worker"]
        registry.register(ProcessFiles(folders))
    else:
        registry.register(ThisProcess())
    registry.register(IndexStates())
    registry.register(QueueDepth())
    return registry


class ProcessFiles:
    """The values every web and worker process wrote to the metrics directory, summed
    (histograms and counters) or as each gauge's multiprocess mode says."""

    def __init__(self, folders: list[Path]) -> None:
        self.folders = folders

    def collect(self) -> Iterable[Metric]:
        files = [str(path) for folder in self.folders for path in sorted(folder.glob("*.db"))]
        return MultiProcessCollector.merge(files, accumulate=True)  # type: ignore[no-any-return]


class ThisProcess:
    def collect(self) -> Iterable[Metric]:
        return REGISTRY.collect()


class IndexStates:
    """memoryhub_index_entries{team, state}: each team's entries (not deleted) by index
    state, read at scrape time as the operator in one GROUP BY, with a statement timeout.
    The team is its slug; nothing of an entry is a label."""

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "memoryhub_index_entries",
            "Entries not deleted, by team (slug) and index state (pending, indexed, failed).",
            labels=["team", "state"],
        )
        try:
            with dangerously_bypass_team_scope(reason="metrics: index states per team", actor="metrics"):
                # The primary, where the bypass's transaction is.
                with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
                    cursor.execute(f"SET LOCAL statement_timeout = {SCRAPE_STATEMENT_TIMEOUT_MS}")
                rows = list(
                    Memory.objects.using(DEFAULT_DB_ALIAS)
                    .filter(deleted_at__isnull=True)
                    .values_list("team__slug", "index_state")
                    .annotate(entries=Count("id"))
                    .order_by()
                )
        except DatabaseError as exc:
            logger.warning("metrics: index states not read: %s", type(exc).__name__)
            return
        for slug, state, entries in rows:
            family.add_metric([slug, state], entries)
        yield family


class QueueDepth:
    """memoryhub_queue_depth{queue}: tasks waiting in the broker's queue (every priority
    of it), read at scrape time; nothing when tasks run in-process (no REDIS_URL)."""

    def collect(self) -> Iterator[Metric]:
        if not settings.REDIS_URL:
            return
        queue = settings.CELERY_TASK_DEFAULT_QUEUE
        # kombu's Redis transport keeps a queue's priorities in lists named like this.
        names = [queue, *(f"{queue}{Channel.sep}{step}" for step in PRIORITY_STEPS if step)]
        client = redis.Redis.from_url(
            settings.REDIS_URL.replace("redis+socket://", "unix://", 1),
            socket_timeout=SCRAPE_REDIS_TIMEOUT_SECONDS,
            socket_connect_timeout=SCRAPE_REDIS_TIMEOUT_SECONDS,
        )
        try:
            with client.pipeline(transaction=False) as pipeline:
                for name in names:
                    pipeline.llen(name)
                depth = sum(int(length) for length in pipeline.execute())
        except (RedisError, OSError) as exc:
            logger.warning("metrics: queue depth not read: %s", type(exc).__name__)
            return
        finally:
            client.close()
        family = GaugeMetricFamily(
            "memoryhub_queue_depth", "Tasks waiting in the broker's queue, by queue.", labels=["queue"]
        )
        family.add_metric([queue], depth)
        yield family
