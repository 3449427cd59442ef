"""Reading from a streaming replica in a team's scope (docs/operations.md, "Read replicas").

Row-level security holds on a replica as on the primary: the policies replicate with the
schema, the replica's connection logs in as the application role, and the team's scope
is transaction-local. So `replica_reads` opens a transaction on the replica and binds it
to the team (`memoryhub.team_id`, and the application role: never the operator's), in the same
statement that measures the replica's replay lag. Only then does core.db_router send the
block's reads there. A read on the replica without that binding sees no row.

A replica that cannot be reached, is not in recovery, or replays more than
DATABASE_REPLICA_MAX_LAG_SECONDS behind is skipped for DATABASE_REPLICA_RETRY_SECONDS
(per process), and the block reads from the primary, in the request's transaction.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress

from django.conf import settings
from django.db import DatabaseError, connections, transaction

from core import db_router
from teams.roles import APP_ROLE
from teams.scope import ROLE_SETTING, TEAM_ONLY, TEAM_SETTING, VIEWER_SETTING

logger = logging.getLogger(__name__)

# Seconds the replica's replay is behind: 0 when it has replayed all it received; NULL
# (never usable) when it is not a replica at all or cannot tell.
_REPLAY_LAG = """
  CASE
    WHEN NOT pg_is_in_recovery() THEN NULL
    WHEN pg_last_wal_receive_lsn() IS NOT DISTINCT FROM pg_last_wal_replay_lsn() THEN 0
    ELSE EXTRACT(EPOCH FROM clock_timestamp() - pg_last_xact_replay_timestamp())
  END
"""
_SCOPE_AND_LAG = (
    f"SELECT set_config(%s, %s, true), set_config(%s, %s, true), set_config(%s, %s, true), {_REPLAY_LAG}"
)


@contextmanager
def replica_reads(*, team_id: int, viewer: str = TEAM_ONLY) -> Iterator[str]:
    """Route the block's reads to a healthy replica, bound to `team_id` and seeing what
    `viewer` may see (teams.scope.viewer_of); yields the alias they go to (`default`
    when no replica is configured or usable)."""
    with ExitStack() as stack:
        alias = db_router.PRIMARY
        for candidate in db_router.healthy_replicas():  # bounded: the configured replicas
            if _open_scoped(stack, candidate, team_id, viewer):
                alias = candidate
                stack.enter_context(db_router.routing_reads_to(alias))
                break
        yield alias


def replay_lag(alias: str) -> float | None:
    """How far `alias` replays behind, in seconds, as replica_reads measures it (None:
    not a replica). Raises DatabaseError when it cannot be reached. For /readyz: it
    neither routes reads nor marks the replica."""
    with connections[alias].cursor() as cursor:
        cursor.execute(f"SELECT {_REPLAY_LAG}")
        row = cursor.fetchone()
    return None if row is None or row[0] is None else float(row[0])


def _open_scoped(stack: ExitStack, alias: str, team_id: int, viewer: str) -> bool:
    """Open a transaction on `alias` bound to the team; False (and nothing left open)
    when the replica is dead or too far behind."""
    atomic = transaction.atomic(using=alias)
    try:
        atomic.__enter__()
    except DatabaseError as error:
        _give_up(alias, f"unreachable: {error}")
        return False
    try:
        with connections[alias].cursor() as cursor:
            scope = [TEAM_SETTING, str(int(team_id)), VIEWER_SETTING, viewer, ROLE_SETTING, APP_ROLE]
            cursor.execute(_SCOPE_AND_LAG, scope)
            lag = cursor.fetchone()[3]
    except DatabaseError as error:
        _end_read_only(alias, atomic)
        _give_up(alias, f"unreachable: {error}")
        return False
    max_lag = float(settings.DATABASE_REPLICA_MAX_LAG_SECONDS)
    if lag is None or float(lag) > max_lag:
        _end_read_only(alias, atomic)
        _give_up(alias, f"replay lag {lag} s over {max_lag} s" if lag is not None else "not a replica")
        return False
    db_router.mark_healthy(alias)
    stack.callback(_end_read_only, alias, atomic)
    return True


def _end_read_only(alias: str, atomic: transaction.Atomic) -> None:
    """End the replica's transaction by rolling it back: it only read, and a rollback on
    a connection that broke meanwhile closes it instead of raising."""
    transaction.set_rollback(True, using=alias)
    with suppress(DatabaseError):
        atomic.__exit__(None, None, None)


def _give_up(alias: str, why: str) -> None:
    logger.warning("read replica %s skipped, reading from the primary: %s", alias, why)
    db_router.mark_unhealthy(alias)
    with suppress(DatabaseError):
        connections[alias].close()
