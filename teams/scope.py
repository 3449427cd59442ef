"""The second lock: PostgreSQL row-level security keyed on transaction-local settings.

Every team-scoped table carries a policy that lets a row through only when
`memoryhub.team_id` (set with `set_config(..., true)`, i.e. SET LOCAL) names its team,
or when an operator path has entered the audited bypass scope. Because the settings
are transaction-local they vanish at COMMIT or ROLLBACK and can never leak into the
next request on a reused or pooled connection.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection, transaction

logger = logging.getLogger("memoryhub.audit")

TEAM_SETTING = "memoryhub.team_id"
BYPASS_SETTING = "memoryhub.bypass"
TOKEN_HASH_SETTING = "memoryhub.token_hash"  # noqa: S105 (a setting name)


def _set_local(name: str, value: str) -> str:
    """Set a transaction-local setting and return the value it had before."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting(%s, true), set_config(%s, %s, true)", [name, name, value])
        previous = cursor.fetchone()[0]
    return previous or ""


def _require_transaction() -> None:
    if not connection.in_atomic_block:
        raise RuntimeError("team scope must be set inside transaction.atomic()")


def set_request_team(team_id: int) -> str:
    """Bind the current transaction to one team; returns the previous binding, which
    the caller restores with `reset_request_team` when the request ends.

    Used by the API once per request, inside the request's transaction."""
    _require_transaction()
    return _set_local(TEAM_SETTING, str(int(team_id)))


def reset_request_team(previous: str) -> None:
    if connection.in_atomic_block and connection.is_usable() and not connection.needs_rollback:
        _set_local(TEAM_SETTING, previous)


@contextmanager
def team_scope(team_id: int) -> Iterator[None]:
    """Run a block in a transaction that sees only `team_id`'s rows.

    For tasks and commands; restores the previous scope on exit so scopes nest."""
    with transaction.atomic():
        previous = _set_local(TEAM_SETTING, str(int(team_id)))
        try:
            yield
        finally:
            if connection.is_usable() and not connection.needs_rollback:
                _set_local(TEAM_SETTING, previous)


@contextmanager
def dangerously_bypass_team_scope(*, reason: str, actor: str = "system") -> Iterator[None]:
    """See every team's rows. Only operator paths (admin, maintenance commands, beat
    jobs) may enter; request code never does. Every entry is logged for audit."""
    logger.info("team scope bypass entered by %s: %s", actor, reason)
    with transaction.atomic():
        previous = _set_local(BYPASS_SETTING, "on")
        try:
            yield
        finally:
            if connection.is_usable() and not connection.needs_rollback:
                _set_local(BYPASS_SETTING, previous)


@contextmanager
def token_lookup_scope(token_hash: str) -> Iterator[None]:
    """Let the authentication step see exactly one token row: the one whose hash the
    caller can prove it holds. Nothing else of any team becomes visible."""
    _require_transaction()
    previous = _set_local(TOKEN_HASH_SETTING, token_hash)
    try:
        yield
    finally:
        if connection.is_usable() and not connection.needs_rollback:
            _set_local(TOKEN_HASH_SETTING, previous)
