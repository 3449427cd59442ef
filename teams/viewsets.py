"""The base of every team-scoped API viewset.

A request reaches an action only after, in this order: a valid token (401),
the URL's team being the token's team (404, so the API never reveals that another
team exists), and the token's scope (403). The whole request runs in one
transaction bound to that team by row-level security, except while an embedding
provider answers (core.request_transaction): then what the request did so far is
committed, and it goes on in a new transaction bound to the same team.
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any, ClassVar

from django.http import HttpRequest
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.viewsets import ViewSet

from core.errors import InvalidInput, NotFound
from core.request_transaction import owning_request_transaction
from teams import hooks
from teams.authentication import AgentTokenAuthentication
from teams.models import AgentToken, Team
from teams.permissions import HasTokenScope
from teams.replicas import replica_reads
from teams.scope import TeamBoundTransaction
from teams.streaming import TeamScopedStream
from teams.throttling import AnonymousAddressThrottle, request_kind, write_slot
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
    permission_classes = [HasTokenScope]
    required_scopes: ClassVar[dict[str, str]] = {}
    # Set per request: the token and the team from the URL, and whether this response is
    # the one place a secret may be shown (the renderer redacts the team's vault secrets).
    token: AgentToken | None = None
    team: Team | None = None
    reveals_secret = False
    # The actions whose reads may go to a read replica (teams.replicas; docs/decisions.md,
    # "Read replicas (issue 13)"): from the end of the permission checks to the end of the
    # action, in a transaction on the replica bound to the team. A write in the action
    # sends its later reads back to the primary (core.db_router).
    replica_actions: ClassVar[frozenset[str]] = frozenset()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in ("get_queryset", "get_object", "dispatch", "initial"):
            if name in cls.__dict__:
                raise TypeError(
                    f"{cls.__name__} must not override {name}: team scoping lives in "
                    "TeamScopedViewSet; read through selectors that take the team"
                )

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Response | TeamScopedStream:
        # What the request holds beyond its transaction (a token's write slot) is let go
        # once the transaction has ended, committed or rolled back.
        with ExitStack() as self._held_after_transaction:
            return self._dispatch_in_transaction(request, *args, **kwargs)

    def _dispatch_in_transaction(
        self, request: HttpRequest, *args: Any, **kwargs: Any
    ) -> Response | TeamScopedStream:
        with TeamBoundTransaction() as self._transaction:
            with owning_request_transaction(self._transaction.outside), ExitStack() as self._replica_reads:
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
            self._transaction.unbind()
        return response

    def perform_authentication(self, request: Request) -> None:
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
        # Team resolution sits between authentication and scope checks, so a token
        # of another team gets 404 whatever its scopes.
        token = request.auth
        if not isinstance(token, AgentToken):
            raise exceptions.NotAuthenticated("send 'Authorization: Bearer <token>'")
        slug = self.kwargs.get("team", "")
        if not is_team_slug(slug):
            raise InvalidInput("malformed team slug", field="team")
        if token.team.slug != slug:
            raise NotFound("not found")
        self.token = token
        self.team = token.team
        self._transaction.bind(self.team.id)
        super().check_permissions(request)
        if request_kind(request, self) == "write":
            # A token's writes run one at a time (teams.throttling.write_slot); waiting
            # for the slot holds no transaction.
            with self._transaction.outside():
                self._held_after_transaction.enter_context(write_slot(token))
        hooks.agent_request.call(team=self.team, request=request)
        if self.action in self.replica_actions:
            # After the heartbeat's write (a session's last contact, which no routed read
            # reads), so that it does not pin the request to the primary.
            self._replica_reads.enter_context(replica_reads(team_id=self.team.id))

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
