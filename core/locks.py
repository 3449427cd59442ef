"""PostgreSQL transaction-scoped advisory locks, named by a string.

A name is hashed to the 64-bit lock key with `hashtextextended`, so any string names a
lock; the lock ends with the transaction (COMMIT or ROLLBACK), never outlives it."""

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
