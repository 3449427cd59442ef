"""DATABASES' ENGINE `core.postgres_backend` (memoryhub/settings.py): Django's own
PostgreSQL backend, except that with CONN_HEALTH_CHECKS its pool checks a connection as
it lends it with core.database_pool.check_lent_connection instead of psycopg_pool's
empty query. Django passes the pool its check itself, so it is swapped on the pool
Django made (tests/memoryhub/test_database_pool.py checks that it took). And a
statement of a prepared cursor (core.prepared_statements) is logged with its values in
place, as every other statement is, not with `$1` placeholders. And a UTC timestamp is
read in C (UtcTimestamptzLoader)."""

from __future__ import annotations

import datetime
import functools
from typing import Any

from django.db.backends.postgresql import base, operations
from django.db.backends.postgresql.psycopg_any import BaseTzLoader
from psycopg import adapt, errors
from psycopg_pool import ConnectionPool

from core.database_pool import check_lent_connection


class DatabaseOperations(operations.DatabaseOperations):
    def last_executed_query(self, cursor: Any, sql: str, params: Any) -> str:
        if isinstance(cursor, base.ServerBindingCursor):
            try:
                return str(self.compose_sql(sql, params))
            except errors.DataError:
                return sql  # as Django's own: the statement, unlogged values
        return super().last_executed_query(cursor, sql, params)


class UtcTimestamptzLoader(BaseTzLoader):  # type: ignore[misc]
    """Django's timestamptz loader for a session in UTC (what it registers with USE_TZ
    and no TIME_ZONE of the database), with PostgreSQL's text for it (`2026-11-29
    08:00:00.123456+00`) parsed by `datetime.fromisoformat`, in C: 1.6 µs instead of
    6.4 in psycopg's Python parser: about 0.9 ms of CPU over the 191 a hybrid search reads
    at 1,000 memories.
    Any other text (another offset, infinity, BC, a year past 9999) goes to Django's."""

    timezone = datetime.UTC

    def load(self, data: Any) -> Any:
        text = bytes(data).decode()
        if text.endswith("+00"):
            try:
                return datetime.datetime.fromisoformat(text).replace(tzinfo=datetime.UTC)
            except ValueError:
                pass
        return super().load(data)


@functools.cache
def _with_utc_timestamp_loader(template: adapt.AdaptersMap) -> adapt.AdaptersMap:
    """Django's adapters (a map it makes once per time zone) with the C loader, made once
    too: Django asks for the parameters on every request, pooled or not, and a
    connection copies the map it is given."""
    context = adapt.AdaptersMap(template)
    context.register_loader("timestamptz", UtcTimestamptzLoader)
    return context


class DatabaseWrapper(base.DatabaseWrapper):
    ops_class = DatabaseOperations

    def get_connection_params(self) -> dict[str, Any]:
        params: dict[str, Any] = super().get_connection_params()
        if self.timezone is datetime.UTC and "context" in params:
            params["context"] = _with_utc_timestamp_loader(params["context"])
        return params

    @property
    def pool(self) -> Any:
        pool = super().pool
        if pool is not None and pool._check is ConnectionPool.check_connection:
            pool._check = check_lent_connection
        return pool
