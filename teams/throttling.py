"""API rate limits (docs/decisions.md, "Rate limits and web hardening").

Each agent token has a budget of reads and one of writes per period
(MEMORYHUB_THROTTLE_READ / _WRITE); requests without a valid token share a budget per
client address (MEMORYHUB_THROTTLE_ANONYMOUS). Over budget, a request answers 429
`rate_limited` with Retry-After. The counts live in Django's cache: the Redis named by
REDIS_URL when there is one, so every web process shares them.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from redis.exceptions import RedisError
from rest_framework.permissions import SAFE_METHODS
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

from core.client_address import client_address
from teams.models import AgentToken
from teams.permissions import needed_scope

logger = logging.getLogger(__name__)


class _SettingsRateThrottle(SimpleRateThrottle):
    """Reads its rate from settings on every request (DRF binds THROTTLE_RATES at import,
    which override_settings and a changed environment cannot reach), and lets requests
    through when the cache cannot be reached: a limit is protection, not a dependency."""

    rate_setting = ""

    def get_rate(self) -> str | None:
        rate: str | None = getattr(settings, self.rate_setting)
        return rate

    def allow_request(self, request: Request, view: Any) -> bool:
        try:
            allowed: bool = super().allow_request(request, view)
        except (RedisError, OSError) as exc:
            logger.warning("rate limits are not enforced: the cache is unreachable (%s)", exc)
            return True
        return allowed

    def get_ident(self, request: Request) -> str:
        return client_address(request)


def _request_kind(request: Request, view: Any) -> str:
    """ "read" or "write": a search is a POST that only reads, as its scope says."""
    if request.method in SAFE_METHODS or needed_scope(request, view) == AgentToken.Scope.READ:
        return "read"
    return "write"


class _AgentTokenThrottle(_SettingsRateThrottle):
    kind = ""

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        token = request.auth
        if not isinstance(token, AgentToken) or _request_kind(request, view) != self.kind:
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
