"""The base of every team-scoped API viewset.

A request reaches an action only after, in this order: a valid token (401), the URL's
team being the token's team (404, so the API never reveals that another team exists),
then what every agent call goes through at either door (teams.calls.AgentCall): the
token's scope (403), its budget (429), one transaction bound to that team by
row-level security, the write slot, the session heartbeat and replica reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from django.http import HttpRequest
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import BaseThrottle
from rest_framework.viewsets import ViewSet

from core.errors import InvalidInput, NotFound
from teams.authentication import AgentTokenAuthentication
from teams.calls import AgentCall
from teams.models import AgentToken, Team
from teams.permissions import HasTokenScope
from teams.streaming import TeamScopedStream
from teams.throttling import AnonymousAddressThrottle, request_kind
from teams.validators import TEAM_SLUG_PATTERN, is_team_slug

TEAM_PATH_PARAMETER = OpenApiParameter(
    "team",
    OpenApiTypes.STR,
    OpenApiParameter.PATH,
    pattern=TEAM_SLUG_PATTERN,
    description="The team's slug; a token works only for its own team.",
)


class TeamScopedViewSet(ViewSet):
    authentication_classes = [AgentTokenAuthentication]
    # Checked by the call runner (AgentCall.admit), after the team and before the budget.
    permission_classes = [HasTokenScope]
    # The token's budgets are spent by the call runner, after the scope check; a request
    # without a valid token spends its address's budget in perform_authentication.
    throttle_classes: Sequence[type[BaseThrottle]] = ()
    required_scopes: ClassVar[dict[str, str]] = {}
    # Set once the request is admitted: the token. And whether this response is the one
    # place a secret may be shown (the renderer redacts the team's vault secrets).
    token: AgentToken | None = None
    reveals_secret = False
    _call: AgentCall | None = None
    # The actions whose reads may go to a read replica (teams.replicas; docs/operations.md,
    # "Read replicas"): from the end of the permission checks to the end of the action, in
    # a transaction on the replica bound to the team. A write in the action sends its later
    # reads back to the primary (core.db_router).
    replica_actions: ClassVar[frozenset[str]] = frozenset()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in ("get_queryset", "get_object", "dispatch", "initial", "check_permissions"):
            if name in cls.__dict__:
                raise TypeError(
                    f"{cls.__name__} must not override {name}: team scoping lives in "
                    "TeamScopedViewSet; read through selectors that take the team"
                )

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Response | TeamScopedStream:
        with AgentCall() as call:
            self._call = call
            with call.acting():
                response = super().dispatch(request, *args, **kwargs)
            if isinstance(response, TeamScopedStream):
                # Its body is produced later, in a transaction of its own bound to the
                # same team, and redacted record by record (teams.streaming).
                pass
            elif not isinstance(response, Response):
                # Only a DRF Response passes the renderer that scrubs credentials.
                raise TypeError(f"{type(self).__name__} must answer with a rest_framework Response")
            else:
                # Render inside the transaction, while the team scope still lets the
                # renderer read the team's vault secrets.
                response.render()
        return response

    def perform_authentication(self, request: Request) -> None:
        # The statement that checks a cached token binds the call's transaction too, as
        # admit would (teams.scope.BindingInTokenCheck): a round trip less per request.
        call = self._agent_call()
        kind = request_kind(request, self)
        binding = call.transaction.binding_in_token_check(durable=kind == "write")
        # And its budget hit goes to Redis while the check is in PostgreSQL.
        early_budget = call.early_budget_hit(kind)
        for authenticator in request.authenticators or ():
            if isinstance(authenticator, AgentTokenAuthentication):
                authenticator.binding = binding
                authenticator.early_budget = early_budget
        # DRF checks throttles only after authentication and permissions, so a request
        # without a valid token would never meet one: count it against its address here,
        # before it is refused, and guessing tokens runs into 429.
        try:
            super().perform_authentication(request)
        except exceptions.AuthenticationFailed:
            self._check_anonymous_throttle(request)
            raise
        if request.auth is None:
            self._check_anonymous_throttle(request)

    def _check_anonymous_throttle(self, request: Request) -> None:
        throttle = AnonymousAddressThrottle()
        if not throttle.allow_request(request, self):
            # wait() is None only with a budget left, which a refused request has not.
            self.throttled(request, throttle.wait() or 1.0)

    def check_permissions(self, request: Request) -> None:
        # Team resolution comes before the scope check, so a token of another team gets
        # 404 whatever its scopes.
        token = request.auth
        if not isinstance(token, AgentToken):
            raise exceptions.NotAuthenticated("send 'Authorization: Bearer <token>'")
        slug = self.kwargs.get("team", "")
        if not is_team_slug(slug):
            raise InvalidInput("malformed team slug", field="team")
        if token.team.slug != slug:
            raise NotFound("not found")
        self._agent_call().admit(request, self, team=token.team, replica=self.action in self.replica_actions)
        self.token = token

    @property
    def team(self) -> Team | None:
        """The request's team once its transaction is bound to it (what the renderer
        reads the vault secrets of)."""
        return self._call.team if self._call is not None else None

    @property
    def vault_version(self) -> int | None:
        """The team's vault version the renderer may redact with, without asking again."""
        return self._call.vault_version if self._call is not None else None

    def _agent_call(self) -> AgentCall:
        if self._call is None:
            raise RuntimeError("a TeamScopedViewSet request runs inside its dispatch")
        return self._call

    def get_team(self) -> Team:
        if self.team is None:
            raise RuntimeError("the team is resolved before any action runs")
        return self.team

    def get_token(self) -> AgentToken:
        """The agent token the request authenticated with."""
        if self.token is None:
            raise RuntimeError("the token is resolved before any action runs")
        return self.token

    def serialize_error_extra(self, name: str, value: Any) -> Any:
        return value
