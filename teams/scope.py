"""The second lock: PostgreSQL row-level security keyed on transaction-local settings.

Every team-scoped table carries a policy that lets a row through only when
`memoryhub.team_id` (set with `set_config(..., true)`, i.e. SET LOCAL) names its team,
or when an operator path has entered the audited bypass scope. Because the settings
are transaction-local they vanish at COMMIT or ROLLBACK and can never leak into the
next request on a reused or pooled connection.

Every scope below is one use of `_local_setting`, the one primitive that sets such a
setting for a block and restores what it was, so scopes nest.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

from django.db import connection, transaction

logger = logging.getLogger("memoryhub.audit")

TEAM_SETTING = "memoryhub.team_id"
BYPASS_SETTING = "memoryhub.bypass"
TOKEN_HASH_SETTING = "memoryhub.token_hash"  # noqa: S105 (a setting name)
USER_SETTING = "memoryhub.user_id"


def _set_local(name: str, value: str) -> str:
    """Set a transaction-local setting and return the value it had before."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting(%s, true), set_config(%s, %s, true)", [name, name, value])
        previous = cursor.fetchone()[0]
    return previous or ""


def _restore(name: str, previous: str) -> None:
    # After an error the transaction is going to roll back, which clears it anyway.
    if connection.in_atomic_block and connection.is_usable() and not connection.needs_rollback:
        _set_local(name, previous)


@contextmanager
def _local_setting(name: str, value: str, *, own_transaction: bool) -> Iterator[None]:
    """Hold `name = value` for the block. With `own_transaction`, the block runs in its
    own atomic block (a savepoint inside an outer one); otherwise the caller must
    already be inside a transaction, or the setting would end with the statement."""
    if not own_transaction and not connection.in_atomic_block:
        raise RuntimeError("team scope must be set inside transaction.atomic()")
    with transaction.atomic() if own_transaction else _already_atomic():
        previous = _set_local(name, value)
        try:
            yield
        finally:
            _restore(name, previous)


@contextmanager
def _already_atomic() -> Iterator[None]:
    yield


def set_request_team(team_id: int) -> str:
    """Bind the current transaction to one team; returns the previous binding, which
    the caller restores with `reset_request_team` when the request ends.

    Used by the API once per request, inside the request's transaction."""
    if not connection.in_atomic_block:
        raise RuntimeError("team scope must be set inside transaction.atomic()")
    return _set_local(TEAM_SETTING, str(int(team_id)))


def reset_request_team(previous: str) -> None:
    _restore(TEAM_SETTING, previous)


def team_scope(team_id: int) -> AbstractContextManager[None]:
    """Run a block in a transaction that sees only `team_id`'s rows.

    For tasks, commands and dashboard pages; restores the previous scope on exit."""
    return _local_setting(TEAM_SETTING, str(int(team_id)), own_transaction=True)


@contextmanager
def dangerously_bypass_team_scope(*, reason: str, actor: str = "system") -> Iterator[None]:
    """See every team's rows. Only operator paths (admin, maintenance commands, beat
    jobs) may enter; request code never does. Every entry is logged for audit."""
    logger.info("team scope bypass entered by %s: %s", actor, reason)
    with _local_setting(BYPASS_SETTING, "on", own_transaction=True):
        yield


def token_lookup_scope(token_hash: str) -> AbstractContextManager[None]:
    """Let the authentication step see exactly one token row: the one whose hash the
    caller can prove it holds. Nothing else of any team becomes visible."""
    return _local_setting(TOKEN_HASH_SETTING, token_hash, own_transaction=False)


def own_memberships_scope(user_id: int) -> AbstractContextManager[None]:
    """Let this transaction see the membership rows of one person (and nothing else of
    any team): the dashboard's team picker. See teams.rls.MEMBERSHIP_POLICY."""
    return _local_setting(USER_SETTING, str(int(user_id)), own_transaction=True)
