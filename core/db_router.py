"""Read replicas: where a query goes (docs/operations.md, "Read replicas").

Writes always go to the primary (`default`). A read goes to a streaming replica only
inside a replica block (`routing_reads_to`, entered by teams.replicas.replica_reads for
the API's read-only actions, in a transaction on the replica bound to the team), and
only while that block has not written: the first write in the block (through the ORM,
or any statement on the primary that is not a plain read) pins the rest of the block to
the primary, so a read after a write sees it. A read inside an atomic block the block
opened on the primary (a service's transaction) stays there too.

Raw SQL picks its connection with `read_connection()`; the ORM asks `ReplicaRouter`
(DATABASE_ROUTERS). Which replicas are healthy is kept per process: one found dead or
lagging is skipped for DATABASE_REPLICA_RETRY_SECONDS.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper

PRIMARY = "default"
# Statements that start with one of these neither write nor lock rows for a write.
_READ_STATEMENTS = ("SELECT", "SAVEPOINT", "RELEASE", "ROLLBACK", "SET", "SHOW")


@dataclass
class ReplicaReads:
    """One replica block: where its reads go, and whether it is pinned to the primary."""

    alias: str
    primary_depth: int
    pinned: bool = False


_current: ContextVar[ReplicaReads | None] = ContextVar("memoryhub_replica_reads", default=None)
_unhealthy_until: dict[str, float] = {}
_health_lock = threading.Lock()


def replica_aliases() -> list[str]:
    return list(getattr(settings, "DATABASE_REPLICAS", []))


def healthy_replicas() -> list[str]:
    """The configured replicas not found dead or lagging lately, in random order (the
    load spreads over them)."""
    now = time.monotonic()
    with _health_lock:
        aliases = [alias for alias in replica_aliases() if _unhealthy_until.get(alias, 0.0) <= now]
    random.shuffle(aliases)
    return aliases


def mark_unhealthy(alias: str) -> None:
    with _health_lock:
        _unhealthy_until[alias] = time.monotonic() + float(settings.DATABASE_REPLICA_RETRY_SECONDS)


def mark_healthy(alias: str) -> None:
    with _health_lock:
        _unhealthy_until.pop(alias, None)


def current() -> ReplicaReads | None:
    return _current.get()


def read_alias() -> str:
    """Where a read issued now goes."""
    state = _current.get()
    if state is None or state.pinned:
        return PRIMARY
    if len(connections[PRIMARY].atomic_blocks) > state.primary_depth:
        # Inside a transaction of the primary opened in the block: it may have written.
        return PRIMARY
    return state.alias


def read_connection() -> BaseDatabaseWrapper:
    """The connection raw SQL of a read path runs on (the primary outside a replica block)."""
    return connections[read_alias()]


@contextmanager
def statements_limited_to(milliseconds: int) -> Iterator[None]:
    """Inside a transaction on the read connection: each statement of the block may run
    `milliseconds` (0 or less: the server's limit), then PostgreSQL cancels it
    (QueryCanceled, an OperationalError: the request answers 503 with Retry-After).
    Transaction-local and put back after the block, so the rest of the transaction keeps
    the limit it had; a failure rolls the setting back with the transaction."""
    if milliseconds <= 0:
        yield
        return
    with read_connection().cursor() as cursor:
        # The subquery runs first (an InitPlan), so it reads the limit before the change.
        cursor.execute(
            "SELECT (SELECT current_setting('statement_timeout')), set_config('statement_timeout', %s, true)",
            [f"{int(milliseconds)}ms"],
        )
        previous = cursor.fetchone()[0]
    yield
    with read_connection().cursor() as cursor:
        cursor.execute("SELECT set_config('statement_timeout', %s, true)", [previous])


def pin_to_primary() -> None:
    state = _current.get()
    if state is not None:
        state.pinned = True


def _pin_on_write(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
    if not str(sql).lstrip()[:9].upper().startswith(_READ_STATEMENTS):
        pin_to_primary()
    return execute(sql, params, many, context)


@contextmanager
def routing_reads_to(alias: str) -> Iterator[ReplicaReads]:
    """Send the block's reads to `alias` until the block writes. The caller has opened
    the transaction on `alias` that binds it to the team (teams.replicas)."""
    primary = connections[PRIMARY]
    state = ReplicaReads(alias=alias, primary_depth=len(primary.atomic_blocks))
    token = _current.set(state)
    try:
        with primary.execute_wrapper(_pin_on_write):
            yield state
    finally:
        _current.reset(token)


class ReplicaRouter:
    """DATABASE_ROUTERS: reads in a replica block go to its replica, everything else to
    the primary; nothing is ever written to, or migrated on, a replica."""

    def db_for_read(self, model: type, **hints: Any) -> str | None:
        if _current.get() is None:
            return None
        return read_alias()

    def db_for_write(self, model: type, **hints: Any) -> str | None:
        if _current.get() is not None:
            pin_to_primary()
            return PRIMARY
        instance = hints.get("instance")
        state = getattr(instance, "_state", None)
        if state is not None and state.db in replica_aliases():
            return PRIMARY  # a row read on a replica is saved on the primary
        return None

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool | None:
        # The replicas hold the primary's rows: a row read on one may point at a row of another.
        return True

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool | None:
        return False if db in replica_aliases() else None
