"""The second lock: PostgreSQL row-level security keyed on transaction-local settings.

Every team-scoped table carries a policy that lets a row through only when
`memoryhub.team_id` (set with `set_config(..., true)`, i.e. SET LOCAL) names its team.
Because these settings are transaction-local they vanish at COMMIT or ROLLBACK and can
never leak into the next request on a reused or pooled connection.

Operator paths see every team on a login of their own (docs/tenancy.md, "The operator's
login"): for the block of `dangerously_bypass_team_scope`, this thread's default connection
*is* the operator login's connection (settings.OPERATOR_DATABASE, role memoryhub_operator,
BYPASSRLS). Everything in the block runs there: the ORM, raw SQL through
`django.db.connection`, `transaction.atomic()` and its on-commit callbacks, so the block is
one transaction on one connection, as a single login's would be. The application's
connection logs in as memoryhub_app, which is a member of no role: no statement run on it
can reach the operator.

Every scope below is one use of `_local_settings`, the one primitive that sets such
settings (`role` among them) for a block and restores what they were, so scopes nest.
A team's scope sets the application role: nested inside the bypass, on the operator's
connection, it still sees only its own team.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction

from core.yield_to_requests import note_team_request
from teams.roles import APP_ROLE, OPERATOR_ROLE

logger = logging.getLogger("memoryhub.audit")

TEAM_SETTING = "memoryhub.team_id"
TOKEN_HASH_SETTING = "memoryhub.token_hash"  # noqa: S105 (a setting name)
USER_SETTING = "memoryhub.user_id"
# Whose personal entries the transaction sees (teams.rls.PERSONAL_CONDITION): a user's
# id, TEAM_ONLY, or EVERY_OWNER for the team's own jobs. Unset sees none of them.
VIEWER_SETTING = "memoryhub.viewer"
TEAM_ONLY = "team"
EVERY_OWNER = "*"
ROLE_SETTING = "role"
SYNCHRONOUS_COMMIT_SETTING = "synchronous_commit"
# How "not set" is written back when a scope restores a setting: `SET ROLE NONE`, back to
# the role the connection logged in as.
_UNSET = {ROLE_SETTING: "none"}


def _setting_columns(settings: dict[str, str]) -> tuple[str, list[str]]:
    """A select list that reads what `settings` hold, then sets them transaction-locally:
    PostgreSQL evaluates a select list in order, so the reads see the values before."""
    names = list(settings)
    reads = ", ".join(["current_setting(%s, true)"] * len(names))
    writes = ", ".join(["set_config(%s, %s, true)"] * len(names))
    params: list[str] = [*names]
    for name in names:
        params += [name, settings[name]]
    return f"{reads}, {writes}", params


def _previous_values(settings: dict[str, str], row: Sequence[Any]) -> dict[str, str]:
    return {name: value or "" for name, value in zip(settings, row[: len(settings)], strict=True)}


def _set_local(settings: dict[str, str]) -> dict[str, str]:
    """Set transaction-local settings in one statement; return the values they had."""
    columns, params = _setting_columns(settings)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {columns}", params)
        return _previous_values(settings, cursor.fetchone())


def _restore(previous: dict[str, str]) -> None:
    # After an error the transaction is going to roll back, which clears it anyway.
    if connection.in_atomic_block and connection.is_usable() and not connection.needs_rollback:
        _set_local({name: value or _UNSET.get(name, "") for name, value in previous.items()})


@contextmanager
def _local_settings(settings: dict[str, str], *, own_transaction: bool) -> Iterator[None]:
    """Hold `settings` for the block. With `own_transaction`, the block runs in its own
    atomic block (a savepoint inside an outer one); otherwise the caller must already be
    inside a transaction, or the settings would end with the statement."""
    if not own_transaction and not connection.in_atomic_block:
        raise RuntimeError("team scope must be set inside transaction.atomic()")
    # Settings made with set_config(..., true) end with their transaction: a block that
    # opened the transaction leaves them to its COMMIT or ROLLBACK (a round trip less).
    opens_the_transaction = own_transaction and not connection.in_atomic_block
    with transaction.atomic() if own_transaction else _already_atomic():
        previous = _set_local(settings)
        try:
            yield
        finally:
            if not opens_the_transaction:
                _restore(previous)


@contextmanager
def _already_atomic() -> Iterator[None]:
    yield


def viewer_of(user_id: int | None) -> str:
    """The viewer setting of a caller: a person's id, or TEAM_ONLY for a team's token."""
    return TEAM_ONLY if user_id is None else str(int(user_id))


def set_request_team(team_id: int, *, viewer: str, durable: bool = True) -> dict[str, str]:
    """Bind the current transaction to one team, seen as `viewer` (viewer_of); returns
    the previous binding, which the caller restores with `reset_request_team` when the
    request ends. A read's transaction (`durable=False`) writes only counters (access
    counts, a token's last use, a session's last contact): its COMMIT does not wait for
    the disk, and a database crash may lose its last fraction of a second of them, never
    half of one (docs/operations.md, "The read path's round trips").

    Used by the API once per request, inside the request's transaction."""
    if not connection.in_atomic_block:
        raise RuntimeError("team scope must be set inside transaction.atomic()")
    return _set_local(_binding(team_id, viewer=viewer, durable=durable))


def _binding(team_id: int, *, viewer: str, durable: bool) -> dict[str, str]:
    binding = {TEAM_SETTING: str(int(team_id)), VIEWER_SETTING: viewer}
    if not durable:
        binding[SYNCHRONOUS_COMMIT_SETTING] = "off"
    return binding


def reset_request_team(previous: dict[str, str]) -> None:
    _restore(previous)


def team_scope(team_id: int, *, viewer: str = EVERY_OWNER) -> AbstractContextManager[None]:
    """Run a block in a transaction that sees only `team_id`'s rows, and the personal
    entries `viewer` may see: by default every member's, for the team's own jobs and
    commands; a dashboard page passes the signed-in person (viewer_of).

    Restores the previous scope on exit. Inside the operator bypass it takes the
    application role for the block, so it never sees more than the team."""
    return _local_settings(
        {TEAM_SETTING: str(int(team_id)), VIEWER_SETTING: viewer, ROLE_SETTING: APP_ROLE},
        own_transaction=True,
    )


@contextmanager
def dangerously_bypass_team_scope(*, reason: str, actor: str = "system") -> Iterator[None]:
    """See every team's rows. Only operator paths (admin, maintenance commands, beat
    jobs) may enter; request code never does. Every entry is logged for audit.

    The block runs on the operator login's connection, in a transaction of its own, as the
    operator role; see the module docstring."""
    logger.info("team scope bypass entered by %s: %s", actor, reason)
    with _on_operator_connection(), _local_settings({ROLE_SETTING: OPERATOR_ROLE}, own_transaction=True):
        yield


@contextmanager
def _on_operator_connection() -> Iterator[None]:
    """Make the operator login's connection this thread's default one for the block."""
    application = connections[DEFAULT_DB_ALIAS]
    operator = connections[settings.OPERATOR_DATABASE]
    if operator is application:  # nested in the bypass, or one connection plays both parts
        yield
        return
    if application.in_atomic_block:
        # The operator's connection could not see what this transaction wrote, and would
        # wait forever on the rows it holds locked: operator work starts outside of it.
        raise RuntimeError("the operator scope cannot start inside a transaction of the application's login")
    connections[DEFAULT_DB_ALIAS] = operator
    try:
        yield
    finally:
        connections[DEFAULT_DB_ALIAS] = application


def token_lookup_scope(token_hash: str) -> AbstractContextManager[None]:
    """Let the authentication step see exactly one token row: the one whose hash the
    caller can prove it holds. Nothing else of any team becomes visible."""
    return _local_settings({TOKEN_HASH_SETTING: token_hash}, own_transaction=False)


def own_memberships_scope(user_id: int) -> AbstractContextManager[None]:
    """Let this transaction see the membership rows of one person (and nothing else of
    any team): the dashboard's team picker. See teams.rls.OWN_MEMBERSHIPS_CONDITION.
    Like a team's scope, it takes the application role for the block."""
    return _local_settings({USER_SETTING: str(int(user_id)), ROLE_SETTING: APP_ROLE}, own_transaction=True)


class TeamBoundTransaction:
    """The one transaction of an API request or an MCP tool call, bound to the team once
    the token has named it (`bind`). `outside()` (registered with
    core.request_transaction.owning_request_transaction) commits what was done so far,
    runs its block with no transaction of ours open while a provider answers, and goes
    on in a new transaction bound to the same team. Only straight from this
    transaction: inside a service's own atomic block (a savepoint), before the team is
    bound, or after an error, the block runs where it is."""

    def __init__(self) -> None:
        self.team_id: int | None = None
        self.viewer = TEAM_ONLY
        self.durable = True
        self._previous_binding: dict[str, str] = {}
        # The binding the token check's statement made (BindingInTokenCheck), until `bind`.
        self._bound_in_token_check: tuple[int, str, bool, dict[str, str]] | None = None

    def __enter__(self) -> TeamBoundTransaction:
        self._atomic = transaction.atomic()
        self._atomic.__enter__()
        self._depth = len(connection.atomic_blocks)
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._atomic.__exit__(*exc_info)

    def binding_in_token_check(self, *, durable: bool) -> BindingInTokenCheck:
        return BindingInTokenCheck(self, durable)

    def bind(self, team_id: int, *, viewer: str, durable: bool = True) -> None:
        self.team_id, self.viewer, self.durable = team_id, viewer, durable
        made, self._bound_in_token_check = self._bound_in_token_check, None
        if made is not None and made[:3] == (team_id, viewer, durable):
            self._previous_binding = made[3]
        else:
            self._previous_binding = set_request_team(team_id, viewer=viewer, durable=durable)
        # Workers indexing other teams' entries wait while this team is being served.
        note_team_request(team_id)

    def unbind(self) -> None:
        """Restore the binding found at `bind`: it matters only when an outer transaction
        (a test's) goes on after this one. The request's own transaction ends right
        after, and its COMMIT or ROLLBACK clears the setting without a round trip."""
        if self.team_id is not None and self._depth > 1:
            reset_request_team(self._previous_binding)

    @contextmanager
    def outside(self) -> Iterator[None]:
        nested = len(connection.atomic_blocks) != self._depth
        if self.team_id is None or nested or connection.needs_rollback:
            yield
            return
        team_id = self.team_id
        self.unbind()
        self._atomic.__exit__(None, None, None)
        try:
            yield
        finally:
            self._atomic = transaction.atomic()
            self._atomic.__enter__()
            self.bind(team_id, viewer=self.viewer, durable=self.durable)


@dataclass(frozen=True)
class BindingInTokenCheck:
    """The call's binding sent in the statement that checks a cached token against its
    team's row (teams.authentication): one round trip instead of two on every request.
    It binds to the token's own team, as the viewer the token is, which is what `bind`
    sets once the call is admitted; a call refused before that (401, 404, 403, 429)
    sends no statement in between and ends its transaction, which clears the binding."""

    transaction: TeamBoundTransaction
    durable: bool

    def column(self, team_id: int, *, viewer: str, name: str) -> tuple[str, list[str]]:
        """One column, `name`, for the check's select list: the binding's settings as they
        were, then as set."""
        if not connection.in_atomic_block:
            raise RuntimeError("team scope must be set inside transaction.atomic()")
        columns, params = _setting_columns(_binding(team_id, viewer=viewer, durable=self.durable))
        return f"ARRAY[{columns}] AS {name}", params

    def made(self, team_id: int, *, viewer: str, values: Sequence[str]) -> None:
        """The check's statement returned the team's row, and with it `values` (the
        column's): the transaction is bound."""
        settings = _binding(team_id, viewer=viewer, durable=self.durable)
        self.transaction._bound_in_token_check = (
            team_id,
            viewer,
            self.durable,
            _previous_values(settings, values),
        )
