"""The three database roles (docs/tenancy.md, "Database roles") as the code sees them.

The service's connection logs in as the application role, which owns nothing, cannot
bypass row-level security and is a member of no role. Operator paths run on a connection
of their own, logged in as the operator role (settings.OPERATOR_DATABASE; the switch is
teams.scope.dangerously_bypass_team_scope). Migrations, `flush` and the test database's
creation log in as the owner role instead, when the settings name one (`OWNER_USER` in
the database settings; the embedded server does): `as_owner` switches a connection over
for a block.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the embedded server's boot imports the role names before Django loads
    from django.db.backends.base.base import BaseDatabaseWrapper

OWNER_ROLE = "memoryhub_owner"
APP_ROLE = "memoryhub_app"
OPERATOR_ROLE = "memoryhub_operator"


def log_in_as_owner(connection: BaseDatabaseWrapper) -> tuple[str, str] | None:
    """Make `connection` log in as the owner from its next query; returns the login it
    had (for `log_in_as`), or None when no owner is configured or it already is one."""
    settings = connection.settings_dict
    owner = settings.get("OWNER_USER")
    if not owner or settings["USER"] == owner:
        return None
    previous = (settings["USER"], settings["PASSWORD"])
    log_in_as(connection, (owner, settings.get("OWNER_PASSWORD", "")))
    return previous


def log_in_as(connection: BaseDatabaseWrapper, login: tuple[str, str]) -> None:
    if connection.in_atomic_block:
        raise RuntimeError("cannot change the database login inside a transaction")
    connection.close()
    # A connection pool is made once, logged in as the login of its first connection:
    # close it, so the next connection comes from a pool of the new login.
    close_pool = getattr(connection, "close_pool", None)
    if close_pool is not None:
        close_pool()
    connection.settings_dict["USER"], connection.settings_dict["PASSWORD"] = login


@contextmanager
def as_owner(connection: BaseDatabaseWrapper) -> Iterator[None]:
    """Run the block on `connection` logged in as the owner role (see the module)."""
    previous = log_in_as_owner(connection)
    try:
        yield
    finally:
        if previous is not None:
            log_in_as(connection, previous)
