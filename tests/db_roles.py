"""The test database is created and migrated by the owner role, as `manage.py migrate`
is, and the tests then run logged in as the application role, as the service does
(docs/decisions.md, "Database roles")."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import connection

from teams.roles import APP_ROLE, log_in_as, log_in_as_owner

_app_login: list[tuple[str, str]] = []


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: None) -> None:
    previous = log_in_as_owner(connection)
    if previous is not None:
        _app_login.append(previous)


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: None, django_db_blocker: pytest.FixtureRequest) -> Iterator[None]:
    if not _app_login:
        yield
        return
    with django_db_blocker.unblock(), connection.cursor() as cursor:  # type: ignore[attr-defined]
        # Transactional tests empty the tables with TRUNCATE between tests; the service
        # never may (row-level security does not apply to it), so only here.
        cursor.execute(f"GRANT TRUNCATE ON ALL TABLES IN SCHEMA public TO {APP_ROLE}")
    log_in_as(connection, _app_login[0])
    yield
    # Dropping the test database (without --reuse-db) is its owner's job.
    with django_db_blocker.unblock():  # type: ignore[attr-defined]
        log_in_as_owner(connection)
