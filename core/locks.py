"""PostgreSQL advisory locks, named by a string.

A name is hashed to the 64-bit lock key with `hashtextextended`, so any string names a
lock. Transaction-scoped locks end with the transaction (COMMIT or ROLLBACK), never
outlive it; a session lock lasts until it is unlocked or the connection closes, across
the transactions of a request that commits halfway (core.request_transaction)."""

from __future__ import annotations

from django.db import connection


def advisory_xact_lock(name: str) -> None:
    """Wait for, then hold, the lock `name` until the transaction ends."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [name])


def try_advisory_xact_lock(name: str) -> bool:
    """Take the lock `name` if nobody holds it; never waits."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(hashtextextended(%s, 0))", [name])
        row = cursor.fetchone()
    return bool(row and row[0])


def try_advisory_session_lock(name: str) -> bool:
    """Take the session lock `name` if nobody holds it; never waits."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", [name])
        row = cursor.fetchone()
    return bool(row and row[0])


def advisory_session_unlock(name: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", [name])
