"""DATABASES' ENGINE `core.postgres_backend` (memoryhub/settings.py): Django's own
PostgreSQL backend, except that with CONN_HEALTH_CHECKS its pool checks a connection as
it lends it with core.database_pool.check_lent_connection instead of psycopg_pool's
empty query. Django passes the pool its check itself, so it is swapped on the pool
Django made (tests/memoryhub/test_database_pool.py checks that it took). And a
statement of a prepared cursor (core.prepared_statements) is logged with its values in
place, as every other statement is, not with `$1` placeholders."""

from __future__ import annotations

from typing import Any

from django.db.backends.postgresql import base, operations
from psycopg import errors
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


class DatabaseWrapper(base.DatabaseWrapper):
    ops_class = DatabaseOperations

    @property
    def pool(self) -> Any:
        pool = super().pool
        if pool is not None and pool._check is ConnectionPool.check_connection:
            pool._check = check_lent_connection
        return pool
