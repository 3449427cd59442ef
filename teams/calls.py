"""One agent call through a front door: what a REST request (teams.viewsets) and an MCP
tool call (agents.mcp.server) both go through, in one place, so the two doors cannot
drift apart on anything that guards them.

Each door authenticates its token (401) and names the team (REST: the URL's team must
be the token's, else 404; MCP: the token's team) before the call is admitted. Then, in
this order, the same for both doors:

1. the token's scope for what the call does (403 `forbidden`, teams.permissions);
2. the token's read or write budget (429 `rate_limited`, teams.throttling; on REST a
   cached token's hit is sent with its check and its answer read here:
   teams.throttling.EarlyBudgetHit);
3. the call's one transaction bound to the team (row-level security, teams.scope; on
   REST the binding travels in the token check's own statement, and a call refused at
   1 or 2 sends nothing after it: teams.scope.BindingInTokenCheck);
4. the token's write slot, for a write, taken with no transaction open and let go only
   after the transaction has ended (teams.throttling.write_slot);
5. the `teams.agent_request` hook (the `X-MemoryHub-Session` heartbeat);
6. for the reads a replica may serve, a transaction on a read replica bound to the
   team, for as long as the action runs (teams.replicas).

A provider call inside the action steps out of the transaction and back in, bound to
the same team (core.request_transaction). The answer is rendered inside the
transaction and passes the team's vault secrets on its way out; an error body is
scrubbed of every credential shape too (teams.renderers). A failure becomes the one
error shape through core.api_errors.exception_handler.

    with AgentCall() as call:
        with call.acting():
            call.admit(request, view, team=team, replica=...)
            body = ...  # the action
        answer = call.answer(body, is_error=...)
"""

from __future__ import annotations

import json
from contextlib import ExitStack
from types import TracebackType
from typing import Any

from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.utils.encoders import JSONEncoder

from core.api_errors import exception_handler
from core.request_transaction import owning_request_transaction
from teams import hooks
from teams.models import AgentToken, Team
from teams.permissions import HasTokenScope
from teams.renderers import redact_answer
from teams.replicas import replica_reads
from teams.scope import TeamBoundTransaction, viewer_of
from teams.throttling import AgentReadThrottle, AgentWriteThrottle, EarlyBudgetHit, request_kind, write_slot


class AgentCall:
    """The per-call stack of one agent call; see the module docstring for its order.
    `view` (in `admit` and `error_answer`) is what DRF's permission and throttle
    classes read of a view: `required_scopes` and `action` (teams.permissions.needed_scope),
    and `serialize_error_extra` for an error's extras."""

    def __init__(self) -> None:
        self.team: Team | None = None
        # The team's vault version for redacting the answer, when the call cannot have
        # changed the vault (teams.vault_matcher); None: read it again.
        self.vault_version: int | None = None
        self.transaction = TeamBoundTransaction()
        # The budget's hit sent with the token's check (REST), read by `admit`.
        self._early_budget: EarlyBudgetHit | None = None
        # What the call holds beyond its transaction (the write slot), let go after it.
        self._held_after_transaction = ExitStack()
        # What the action holds (replica reads), let go when the action returns.
        self._action = ExitStack()
        self._stack = ExitStack()

    def __enter__(self) -> AgentCall:
        with ExitStack() as stack:
            stack.callback(self._close_early_budget)
            stack.enter_context(self._held_after_transaction)
            stack.enter_context(self.transaction)
            stack.enter_context(owning_request_transaction(self.transaction.outside))
            self._stack = stack.pop_all()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        if exc_type is None:
            self.transaction.unbind()
        return self._stack.__exit__(exc_type, exc, traceback)

    def early_budget_hit(self, kind: str) -> EarlyBudgetHit:
        """The budget hit the token's check sends ahead (teams.throttling.EarlyBudgetHit)."""
        self._early_budget = EarlyBudgetHit(kind)
        return self._early_budget

    def _close_early_budget(self) -> None:
        if self._early_budget is not None:
            self._early_budget.close()

    def acting(self) -> ExitStack:
        """The block of the action: what `admit` opens for it ends with it."""
        return self._action

    def admit(self, request: Request, view: Any, *, team: Team, replica: bool = False) -> None:
        """Let the call in, for `team` (its token's, checked by the door), or raise 403/429."""
        token = request.auth
        if not isinstance(token, AgentToken):
            raise exceptions.NotAuthenticated("send 'Authorization: Bearer <token>'")
        scope = HasTokenScope()
        if not scope.has_permission(request, view):
            raise exceptions.PermissionDenied(scope.message)
        for budget in (AgentReadThrottle(self._early_budget), AgentWriteThrottle(self._early_budget)):
            if not budget.allow_request(request, view):
                # wait() is None only with a budget left, which a refused call has not.
                raise exceptions.Throttled(budget.wait() or 1.0)
        self.team = team
        kind = request_kind(request, view)
        # A read writes no vault entry, so the version its token's lookup read with the
        # team's row is still the vault's when the answer is redacted: no second query.
        self.vault_version = team.vault_version if kind == "read" else None
        self.transaction.bind(team.id, viewer=viewer_of(token.user_id), durable=kind == "write")
        if kind == "write":
            # A token's writes run one at a time; waiting for the slot holds no transaction.
            with self.transaction.outside():
                self._held_after_transaction.enter_context(write_slot(token))
        hooks.agent_request.call(team=team, request=request)
        if replica:
            # After the heartbeat's write (a session's last contact, which no routed read
            # reads), so that it does not pin the call to the primary.
            self._action.enter_context(replica_reads(team_id=team.id, viewer=self.transaction.viewer))

    def error_answer(self, exc: Exception, view: Any) -> dict[str, Any] | None:
        """The one error shape of `exc`, or None for a bug (the door answers 500)."""
        response = exception_handler(exc, {"view": view})
        return None if response is None else dict(response.data)

    def answer(self, body: Any, *, is_error: bool) -> Any:
        """`body` as plain JSON values, redacted as every answer is (teams.renderers), for a
        door that renders its own answers (MCP). Inside the call's transaction."""
        plain = json.loads(json.dumps(body, cls=JSONEncoder))
        return redact_answer(
            plain,
            team_id=self.team.id if self.team else None,
            is_error=is_error,
            vault_version=self.vault_version,
        )
