"""The locking rule of every writer of a memory key, in one place.

A write to (team, key) first takes a transaction-scoped advisory lock on that pair,
then reads the active row. The lock serialises writers of one key (the partial unique
index would otherwise turn a race into an IntegrityError), and READ COMMITTED gives
each statement after the lock a fresh snapshot, so the reader always sees the previous
writer's committed row."""

from __future__ import annotations

from django.db import connection

from core.locks import advisory_xact_lock, try_advisory_xact_lock
from memories.models import Memory
from teams.models import Team


def _key_lock_name(team_id: int, key: str) -> str:
    return f"memory:{team_id}:{key}"


def lock_key(team_id: int, key: str) -> None:
    """The advisory lock every writer of (team, key) takes first."""
    advisory_xact_lock(_key_lock_name(team_id, key))


def lock_keys(team_id: int, keys: list[str]) -> None:
    """lock_key for many keys in one statement (a bulk write), taken in sorted order so
    that two bulk writers never wait for each other in a cycle."""
    names = sorted(_key_lock_name(team_id, key) for key in keys)
    with connection.cursor() as cursor:
        cursor.execute(
            # unnest yields the (sorted) array in order.
            "SELECT count(pg_advisory_xact_lock(hashtextextended(name, 0))) FROM unnest(%s::text[]) AS name",
            [names],
        )


def try_lock_key(team_id: int, key: str) -> bool:
    """The key's lock if free right now: for a writer that already holds another key's
    lock, since waiting for a second key could close a cycle with a writer of that key."""
    return try_advisory_xact_lock(_key_lock_name(team_id, key))


def lock_active_memory(team: Team, key: str, *, lock_row: bool = True) -> Memory | None:
    """Take the key's lock, then read its active entry (locked FOR NO KEY UPDATE unless
    `lock_row` is False: a writer that only adds rows pointing at it needs no row lock)."""
    lock_key(team.id, key)
    rows = Memory.objects.filter(team=team, key=key, is_active=True)
    if lock_row:
        rows = rows.select_for_update(no_key=True)
    return rows.first()


def lock_skill_name(team_id: int, name: str) -> None:
    """The lock of a skill name: no writer holds it while waiting for anything else."""
    advisory_xact_lock(f"skill:{team_id}:{name}")
