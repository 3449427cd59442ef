"""Agents authenticate with `Authorization: Bearer <token>`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache

from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.request import Request

from core.compiled_once import CompiledOnce
from core.errors import InvalidInput
from core.prepared_statements import model_columns, model_instances
from teams import token_cache
from teams.models import AgentToken, Team
from teams.scope import BindingInTokenCheck, token_lookup_scope, viewer_of
from teams.throttling import EarlyBudgetHit

# Recording every use would turn every read into a write; a minute is precise enough.
LAST_USED_RESOLUTION = timedelta(minutes=1)

TEAM_ROW = CompiledOnce(lambda team_id: Team.objects.filter(id=team_id).order_by("pk")[:1], team_id=int)
BINDING_COLUMN = "call_binding"


@dataclass(frozen=True)
class AgentPrincipal:
    """request.user for an agent: the token's name is who wrote a change."""

    token: AgentToken
    is_authenticated: bool = True
    is_anonymous: bool = False

    @property
    def name(self) -> str:
        return self.token.name

    def __str__(self) -> str:
        return self.token.name


class AgentTokenAuthentication(BaseAuthentication):
    # Set by a door whose call binds its transaction once admitted (teams.viewsets): the
    # statement that checks a cached token binds it too.
    binding: BindingInTokenCheck | None = None
    # And the budget hit that goes to Redis while the check is in PostgreSQL.
    early_budget: EarlyBudgetHit | None = None

    def authenticate(self, request: Request) -> tuple[AgentPrincipal, AgentToken] | None:
        parts = get_authorization_header(request).split()
        if not parts:
            return None
        if parts[0].lower() != b"bearer" or len(parts) != 2:
            raise exceptions.AuthenticationFailed("use 'Authorization: Bearer <token>'")
        try:
            raw = parts[1].decode("ascii")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("invalid token") from None
        token = _find_live_token(raw, binding=self.binding, early_budget=self.early_budget)
        return AgentPrincipal(token), token

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="memoryhub"'


def _find_live_token(
    raw: str, *, binding: BindingInTokenCheck | None = None, early_budget: EarlyBudgetHit | None = None
) -> AgentToken:
    token_hash = AgentToken.hash_token(raw)
    token = _cached_live_token(token_hash, binding, early_budget)
    if token is not None:
        return token
    with token_lookup_scope(token_hash):
        token = AgentToken.objects.select_related("team").filter(token_hash=token_hash).first()
        if token is None:
            raise exceptions.AuthenticationFailed("invalid token")
        _refuse_dead(token)
        _record_use(token)
    # The team's token version came in the token's own statement: a revocation after it
    # moves the version, so the entry cannot outlive it.
    token_cache.remember_token(token, token_version=token.team.token_version)
    return token


def _cached_live_token(
    token_hash: str, binding: BindingInTokenCheck | None, early_budget: EarlyBudgetHit | None
) -> AgentToken | None:
    """The token from this process's cache, checked against its team's row (read in one
    statement, which the request needs anyway): None when it is not cached or the team's
    tokens changed since (teams.token_cache)."""
    entry = token_cache.cached_token(token_hash)
    if entry is None:
        return None
    if early_budget is not None:
        early_budget.send(entry.id)
    team = _team_row(entry, binding)
    if team is None or team.token_version != entry.token_version:
        token_cache.forget_token(token_hash)
        return None
    token = entry.token_for(team)
    _refuse_dead(token)
    if _use_is_stale(token, timezone.now()):
        with token_lookup_scope(token_hash):
            _record_use(token)
    return token


def _team_row(entry: token_cache.CachedToken, binding: BindingInTokenCheck | None) -> Team | None:
    """The row of the cached token's team; with `binding`, the same statement binds the
    call's transaction to that team, as the token's viewer."""
    if binding is None:
        team: Team | None = TEAM_ROW.first(team_id=entry.team_id)
        return team
    viewer = viewer_of(entry.user_id)
    column, params = binding.column(entry.team_id, viewer=viewer, name=BINDING_COLUMN)
    sql = f'SELECT {column}, {_team_columns()} FROM "teams_team" WHERE "teams_team"."id" = %s'  # noqa: S608
    team = next(iter(model_instances(Team, sql, [*params, entry.team_id])), None)
    if team is not None:
        binding.made(entry.team_id, viewer=viewer, values=team.__dict__.pop(BINDING_COLUMN))
    return team


@cache
def _team_columns() -> str:
    return model_columns(Team, '"teams_team"')


def _refuse_dead(token: AgentToken) -> None:
    if token.is_revoked:
        raise exceptions.AuthenticationFailed("this token has been revoked")
    if token.is_expired(timezone.now()):
        token_cache.forget_token(token.token_hash)
        raise exceptions.AuthenticationFailed("this token has expired")


def _use_is_stale(token: AgentToken, now: datetime) -> bool:
    return token.last_used_at is None or token.last_used_at < now - LAST_USED_RESOLUTION


def _record_use(token: AgentToken) -> None:
    """Write `last_used_at` when it is older than a minute; most requests find it recent
    and send nothing. The UPDATE's own condition keeps concurrent requests (and
    processes) from writing it twice. Inside the token's lookup scope."""
    now = timezone.now()
    if not _use_is_stale(token, now):
        return
    stale = now - LAST_USED_RESOLUTION
    AgentToken.objects.filter(pk=token.pk).filter(
        Q(last_used_at__isnull=True) | Q(last_used_at__lt=stale)
    ).update(last_used_at=now)
    token.last_used_at = now
    token_cache.note_use(token.token_hash, now)


def is_live_token(raw: str) -> bool:
    """Whether `raw` names a token that is neither revoked nor expired, without recording
    its use: the web server's guard asks before it spends time reading a request's body
    (memoryhub.request_guard), so made-up tokens cannot each claim threads of their own.
    A token this process found live within the cache's TTL answers without a query: the
    guard only tells made-up tokens from real ones, and authentication, after it, checks
    the token's version and refuses a revoked one (teams.token_cache)."""
    token_hash = AgentToken.hash_token(raw)
    cached = token_cache.cached_token(token_hash)
    if cached is not None and (cached.expires_at is None or cached.expires_at > timezone.now()):
        return True
    with transaction.atomic(), token_lookup_scope(token_hash):
        token = AgentToken.objects.filter(token_hash=token_hash).only("revoked_at", "expires_at").first()
    return token is not None and not token.is_revoked and not token.is_expired(timezone.now())


SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,63}$")


def agent_actor(request: Request) -> str:
    """Who a change is attributed to: the token's name, plus the agent session if the
    client sent X-MemoryHub-Session."""
    principal = request.user
    if not isinstance(principal, AgentPrincipal):
        raise exceptions.NotAuthenticated("send 'Authorization: Bearer <token>'")
    name = principal.name
    session = request.headers.get("X-MemoryHub-Session", "").strip()
    if not session:
        return name
    if not SESSION_ID.fullmatch(session):
        raise InvalidInput(
            "X-MemoryHub-Session is 1-64 characters: letters, digits and . _ : @ -",
            field="X-MemoryHub-Session",
        )
    return f"{name}/{session}"
