"""The test database is created and migrated by the owner role, as `manage.py migrate`
is, and emptied by it (`manage.py flush`, between transactional tests). The tests then run
on one connection that plays both of the service's logins (memoryhub/settings_test.py
says why): logged in as the operator, it takes the application role for its session,
so everything runs as the application role except the operator scope's blocks, which set
the operator role for their transaction (docs/tenancy.md, "The operator's login")."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import psycopg
import pytest
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created
from psycopg import sql

from teams.roles import APP_ROLE, OPERATOR_ROLE, OWNER_ROLE, log_in_as, log_in_as_owner

_test_login: list[tuple[str, str]] = []


def _take_the_application_role(sender: Any, connection: BaseDatabaseWrapper, **kwargs: Any) -> None:
    # Only the connection that plays both logins: a test's own operator alias stays the operator.
    if connection.alias == DEFAULT_DB_ALIAS and connection.settings_dict["USER"] == OPERATOR_ROLE:
        with connection.cursor() as cursor:
            cursor.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(APP_ROLE)).as_string())


connection_created.connect(_take_the_application_role, weak=False)


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: None) -> None:
    previous = log_in_as_owner(connection)
    if previous is not None:
        _test_login.append(previous)


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: None, django_db_blocker: pytest.FixtureRequest) -> Iterator[None]:
    if not _test_login:
        yield
        return
    log_in_as(connection, _test_login[0])
    yield
    # Dropping the test database (without --reuse-db) is its owner's job.
    with django_db_blocker.unblock():  # type: ignore[attr-defined]
        log_in_as_owner(connection)


def service_login(role: str) -> tuple[str, str]:
    """(user, password) the service logs in with as `role` (owner, application, operator)."""
    if role == OWNER_ROLE:
        db = connection.settings_dict
        return str(db.get("OWNER_USER") or db["USER"]), str(db.get("OWNER_PASSWORD") or "")
    alias = {APP_ROLE: "default", OPERATOR_ROLE: "operator"}[role]
    login = settings.SERVICE_LOGINS[alias]
    return str(login["USER"]), str(login["PASSWORD"])


def connect_as(role: str, *, dbname: str | None = None, **options: Any) -> psycopg.Connection[Any]:
    """A connection of its own to this run's test database (or `dbname`), logged in as
    the service logs in as `role`."""
    db = connection.settings_dict
    user, password = service_login(role)
    return psycopg.connect(
        dbname=dbname or db["NAME"],
        host=db["HOST"] or None,
        port=db["PORT"] or None,
        user=user,
        password=password or None,
        **options,
    )


def service_database_url(role: str, *, dbname: str | None = None) -> str:
    """This run's test database (or `dbname`) as a DATABASE_URL logged in as `role`."""
    db = connection.settings_dict
    user, password = service_login(role)
    credentials = quote(user, safe="") + (":" + quote(password, safe="") if password else "")
    host = db["HOST"] or "localhost"
    # A socket folder (the embedded server) is written postgres://user@//folder/name.
    location = f"/{host}" if host.startswith("/") else host + (f":{db['PORT']}" if db["PORT"] else "")
    return f"postgres://{credentials}@{location}/{quote(dbname or db['NAME'], safe='')}"
