"""API rate limits (docs/security.md, "Rate limits").

Each agent token has a budget of reads and one of writes per period
(MEMORYHUB_THROTTLE_READ / _WRITE); requests without a valid token share a budget per
client address (MEMORYHUB_THROTTLE_ANONYMOUS). Over budget, a request answers 429
`rate_limited` with Retry-After. The counts live in Django's cache: the Redis named by
REDIS_URL when there is one, so every web process shares them.

A budget bounds how many writes a token sends, not how many run at once: two clients
sharing a token and saving 64 KiB texts back to back kept both cores busy and every
other team waited. So a token's writes also run one at a time, across every process
(`write_slot`): a write waits up to MEMORYHUB_WRITE_SLOT_WAIT_SECONDS for the one
before it to finish, holding no transaction, then answers 429 if it still runs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.db import DatabaseError
from redis.exceptions import RedisError
from rest_framework import exceptions
from rest_framework.permissions import SAFE_METHODS
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

from core.client_address import client_address
from core.locks import advisory_session_unlock, try_advisory_session_lock
from core.metric_definitions import THROTTLED_REQUESTS
from core.redis_outage import note_redis_failure, redis_skipped
from teams.models import AgentToken
from teams.permissions import needed_scope

logger = logging.getLogger(__name__)


class _SettingsRateThrottle(SimpleRateThrottle):
    """Reads its rate from settings on every request (DRF binds THROTTLE_RATES at import,
    which override_settings and a changed environment cannot reach), and lets requests
    through when the cache cannot be reached: a limit is protection, not a dependency.
    Each cache call is bounded (CACHES' socket timeouts), and after one fails the
    throttles do not ask again for a while (core.redis_outage)."""

    rate_setting = ""

    def get_rate(self) -> str | None:
        rate: str | None = getattr(settings, self.rate_setting)
        return rate

    def allow_request(self, request: Request, view: Any) -> bool:
        if redis_skipped():
            return True
        try:
            allowed: bool = super().allow_request(request, view)
        except (RedisError, OSError) as exc:
            note_redis_failure("the rate limits' counts", exc)
            return True
        if not allowed:
            THROTTLED_REQUESTS.labels(scope=self.scope).inc()
        return allowed

    def get_ident(self, request: Request) -> str:
        return client_address(request)


def request_kind(request: Request, view: Any) -> str:
    """ "read" or "write": a search is a POST that only reads, as its scope says."""
    if request.method in SAFE_METHODS or needed_scope(request, view) == AgentToken.Scope.READ:
        return "read"
    return "write"


class _AgentTokenThrottle(_SettingsRateThrottle):
    kind = ""

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        token = request.auth
        if not isinstance(token, AgentToken) or request_kind(request, view) != self.kind:
            return None
        return self.cache_format % {"scope": self.scope, "ident": token.pk}


class AgentReadThrottle(_AgentTokenThrottle):
    scope = "agent_read"
    kind = "read"
    rate_setting = "MEMORYHUB_THROTTLE_READ"


class AgentWriteThrottle(_AgentTokenThrottle):
    scope = "agent_write"
    kind = "write"
    rate_setting = "MEMORYHUB_THROTTLE_WRITE"


class AnonymousAddressThrottle(_SettingsRateThrottle):
    """Requests without a valid token, per client address. TeamScopedViewSet applies it
    before answering 401, so guessing tokens runs into 429."""

    scope = "anonymous"
    rate_setting = "MEMORYHUB_THROTTLE_ANONYMOUS"

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        if isinstance(request.auth, AgentToken):
            return None
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


WRITE_SLOT_POLL_SECONDS = 0.025


def write_slot_name(token_id: int) -> str:
    return f"agent-token-writes:{token_id}"


@contextmanager
def write_slot(token: AgentToken) -> Iterator[None]:
    """Hold the token's one write slot for the block (a PostgreSQL session advisory lock,
    so it spans processes and the request's transactions). Waits for it, polling, up to
    MEMORYHUB_WRITE_SLOT_WAIT_SECONDS, then raises Throttled (429 with Retry-After).
    The caller holds no transaction while this waits."""
    name = write_slot_name(token.pk)
    deadline = time.monotonic() + settings.MEMORYHUB_WRITE_SLOT_WAIT_SECONDS
    while not try_advisory_session_lock(name):
        if time.monotonic() >= deadline:
            THROTTLED_REQUESTS.labels(scope="write_slot").inc()
            raise exceptions.Throttled(1.0, detail="another write of this token is still running")
        time.sleep(WRITE_SLOT_POLL_SECONDS)
    try:
        yield
    finally:
        try:
            advisory_session_unlock(name)
        except DatabaseError as exc:  # the connection is gone, and its session lock with it
            logger.warning("releasing the write slot of token %s: %s", token.pk, exc)
