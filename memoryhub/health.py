"""Liveness (/healthz) and readiness (/readyz) probes (docs/operations.md, "Health";
why they are built this way: docs/operations.md, "Why the probes are built this way").

/healthz says the process answers and touches nothing. /readyz checks every component
this web process needs, concurrently, each in a thread of a small pool, and answers
within MEMORYHUB_READYZ_TIMEOUT_SECONDS whatever hangs: a component that has not answered
by then is reported as `timeout`. A component's check already running (a hung database)
is waited on again rather than started twice, so a flood of probes holds at most one
thread per component. What a failure says is one of a few fixed reasons: never an
exception's text, which could hold a URL, a host name or a password.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any

import psycopg
import redis
from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, connections
from django.db.migrations.loader import MigrationLoader
from django.http import HttpRequest, JsonResponse
from django.utils.cache import add_never_cache_headers
from django.views.decorators.csrf import csrf_exempt

from core import db_router
from core.api_errors import error_body
from memoryhub import worker_heartbeat
from memoryhub.celery import app as celery_app
from search.embeddings.base import EmbeddingUnavailable
from search.embeddings.local import LocalOnnxProvider
from search.embeddings.profiles import provider_for
from teams.replicas import replay_lag

OK, FAILING, SKIPPED = "ok", "failing", "skipped"
_PROBE_METHODS = ("GET", "HEAD")


@dataclass(frozen=True)
class Component:
    """One component's answer. `required` ones decide the HTTP status."""

    status: str
    reason: str = ""
    required: bool = True
    latency_ms: float = 0.0
    extra: tuple[tuple[str, Any], ...] = ()

    def as_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"status": self.status, "required": self.required}
        if self.reason:
            body["reason"] = self.reason
        body["latency_ms"] = round(self.latency_ms, 1)
        body.update(self.extra)
        return body


def _failing(reason: str, **kwargs: Any) -> Component:
    return Component(FAILING, reason, **kwargs)


# --- the checks: each returns a Component (latency is filled in by _timed) ---


@functools.cache
def _migrations_on_disk() -> tuple[tuple[tuple[str, str], frozenset[tuple[str, str]]], ...]:
    """Every migration of this code, with the ones it replaces (a squashed migration). Read
    once per process: the code's migrations do not change while it runs."""
    loader = MigrationLoader(None, ignore_no_migrations=True)
    return tuple(
        (key, frozenset((app, name) for app, name in migration.replaces))
        for key, migration in loader.disk_migrations.items()
        if key in loader.graph.nodes
    )


def check_database() -> Component:
    """Reachable, and every migration of this code applied (one query: django_migrations)."""
    connection = connections[db_router.PRIMARY]
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT app, name FROM django_migrations")
            applied = {(app, name) for app, name in cursor.fetchall()}
    except (OperationalError, InterfaceError):
        return _failing("unreachable")
    except DatabaseError as error:
        if not isinstance(error.__cause__, psycopg.errors.UndefinedTable):
            return _failing("error")
        applied = set()  # a database never migrated has no django_migrations yet
    finally:
        connection.close()  # this thread's connection goes back to the pool
    missing = [
        key
        for key, replaces in _migrations_on_disk()
        if key not in applied and not (replaces and replaces <= applied)
    ]
    if missing:
        count = len(missing)
        return _failing(f"unmigrated: {count} migration{'s' if count != 1 else ''}")
    return Component(OK)


def _tasks_run_in_process() -> bool:
    return bool(celery_app.conf.task_always_eager)


@functools.cache
def _broker_client(broker_url: str) -> redis.Redis:
    return worker_heartbeat.redis_client(broker_url, timeout=0.5)


def _redis_reason(error: Exception) -> str:
    if isinstance(error, redis.TimeoutError):
        return "timeout"
    if isinstance(error, redis.AuthenticationError):
        return "authentication failed"
    if isinstance(error, redis.ConnectionError | OSError):
        return "unreachable"
    return "error"


def check_broker() -> Component:
    if _tasks_run_in_process():
        return Component(SKIPPED, "no broker configured: tasks run in-process", required=False)
    try:
        _broker_client(celery_app.conf.broker_url).ping()
    except (redis.RedisError, OSError) as error:
        return _failing(_redis_reason(error))
    return Component(OK)


def check_worker() -> Component:
    """At least one worker consuming the default queue renewed its heartbeat lately."""
    if _tasks_run_in_process():
        return Component(SKIPPED, "no broker configured: tasks run in-process", required=False)
    key = worker_heartbeat.heartbeat_key(celery_app.conf.task_default_queue)
    try:
        alive = _broker_client(celery_app.conf.broker_url).exists(key)
    except (redis.RedisError, OSError):
        return _failing("unknown: the broker does not answer")
    return Component(OK) if alive else _failing("no worker heartbeat")


def check_embedding() -> Component:
    """The default profile's provider can be had, and a local model is loaded (once per
    process: the provider keeps it). A remote provider is not called: that would cost a
    request to it on every probe, and search already falls back to keywords without it."""
    try:
        provider = provider_for(None)
        if provider is None:
            return Component(SKIPPED, "the default profile has no embeddings", required=False)
        if isinstance(provider, LocalOnnxProvider):
            provider.warm_up()
    except EmbeddingUnavailable:
        return _failing("unavailable")
    return Component(OK)


def check_replica(alias: str) -> Component:
    """Replay lag as teams.replicas measures it. Not required: a replica that is behind
    or gone is skipped by the router, and reads go to the primary."""
    connection = connections[alias]
    try:
        lag = replay_lag(alias)
    except DatabaseError:
        return _failing("unreachable", required=False)
    finally:
        connection.close()
    if lag is None:
        return _failing("not a replica", required=False)
    extra = (("lag_seconds", round(lag, 3)),)
    if lag > float(settings.DATABASE_REPLICA_MAX_LAG_SECONDS):
        return _failing("lagging", required=False, extra=extra)
    return Component(OK, required=False, extra=extra)


def _checks() -> dict[str, Callable[[], Component]]:
    checks: dict[str, Callable[[], Component]] = {
        "database": check_database,
        "broker": check_broker,
        "worker": check_worker,
        "embedding": check_embedding,
    }
    for alias in db_router.replica_aliases():
        checks[alias] = functools.partial(check_replica, alias)
    return checks


# --- running them: concurrently, bounded, one at a time per component ---

_executor = ThreadPoolExecutor(max_workers=8, thread_name_prefix="readyz")
_running: dict[str, Future[Component]] = {}
_running_lock = threading.Lock()


def _timed(check: Callable[[], Component]) -> Component:
    started = time.perf_counter()
    try:
        component = check()
    except Exception:  # a check's bug must not become a 500 carrying its text
        component = _failing("error")
    latency_ms = (time.perf_counter() - started) * 1000
    return Component(component.status, component.reason, component.required, latency_ms, component.extra)


def _start(name: str, check: Callable[[], Component]) -> Future[Component]:
    with _running_lock:
        future = _running.get(name)
        if future is None or future.done():
            future = _executor.submit(_timed, check)
            _running[name] = future
        return future


def check_readiness() -> dict[str, Component]:
    """Every component's answer, within MEMORYHUB_READYZ_TIMEOUT_SECONDS."""
    timeout = float(settings.MEMORYHUB_READYZ_TIMEOUT_SECONDS)
    started = time.monotonic()
    futures = {name: _start(name, check) for name, check in _checks().items()}
    results: dict[str, Component] = {}
    for name, future in futures.items():
        try:
            results[name] = future.result(timeout=max(0.0, started + timeout - time.monotonic()))
        except FutureTimeout:
            # The only slow embedding check is a first load of the local model, which
            # goes on in its thread and is kept: readiness follows once it is loaded.
            reason = "loading" if name == "embedding" else "timeout"
            required = name not in db_router.replica_aliases()
            results[name] = _failing(reason, required=required, latency_ms=timeout * 1000)
    return results


# --- the views ---


def _method_not_allowed() -> JsonResponse:
    response = JsonResponse(error_body("method_not_allowed", "use GET or HEAD"), status=405)
    response["Allow"] = ", ".join(_PROBE_METHODS)
    return response


@csrf_exempt
def liveness(request: HttpRequest) -> JsonResponse:
    """/healthz: the process answers. Touches nothing, so it never fails for a dependency."""
    if request.method not in _PROBE_METHODS:
        return _method_not_allowed()
    response = JsonResponse({"status": "ok"})
    add_never_cache_headers(response)
    return response


@csrf_exempt
def readiness(request: HttpRequest) -> JsonResponse:
    """/readyz: 200 when every required component is ok, else 503 naming the failing ones."""
    if request.method not in _PROBE_METHODS:
        return _method_not_allowed()
    components = check_readiness()
    failing = [name for name, part in components.items() if part.required and part.status != OK]
    listed = {name: part.as_json() for name, part in components.items()}
    if failing:
        body = error_body("not_ready", f"not ready: {', '.join(failing)}", status="not_ready")
        response = JsonResponse({**body, "components": listed}, status=503)
    else:
        response = JsonResponse({"status": "ready", "components": listed})
    add_never_cache_headers(response)
    return response
