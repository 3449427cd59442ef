"""API rate limits (docs/security.md, "Rate limits").

Each agent token has a budget of reads and one of writes per period
(MEMORYHUB_THROTTLE_READ / _WRITE); requests without a valid token share a budget per
client address (MEMORYHUB_THROTTLE_ANONYMOUS). Over budget, a request answers 429
`rate_limited` with Retry-After. The counts are moving windows (`limits`) in the Redis of
Django's cache, named by REDIS_URL, so every web process shares them; without a Redis,
each process counts its own.

A budget bounds how many writes a token sends, not how many run at once: two clients
sharing a token and saving 64 KiB texts back to back kept both cores busy and every
other team waited. So a token's writes also run one at a time, across every process
(`write_slot`): a write waits up to MEMORYHUB_WRITE_SLOT_WAIT_SECONDS for the one
before it to finish, holding no transaction, then answers 429 if it still runs.
"""

from __future__ import annotations

import functools
import logging
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.db import DatabaseError
from limits import RateLimitItem, RateLimitItemPerSecond
from limits.storage import MemoryStorage, RedisStorage, Storage
from limits.strategies import MovingWindowRateLimiter
from redis.exceptions import RedisError
from rest_framework import exceptions
from rest_framework.permissions import SAFE_METHODS
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from core.client_address import client_address
from core.locks import advisory_session_unlock, try_advisory_session_lock
from core.metric_definitions import THROTTLED_REQUESTS
from core.redis_outage import note_redis_failure, redis_skipped
from core.settings_env import rate_in_seconds
from teams.models import AgentToken
from teams.permissions import needed_scope

logger = logging.getLogger(__name__)


def rate_item(rate: str) -> RateLimitItem:
    """`600/min` (core.settings_env.read_rate checked it at start-up) as the limit `limits`
    checks: 600 requests per 60 seconds."""
    parsed = rate_in_seconds(rate)
    if parsed is None:
        raise ValueError(f"not a rate: {rate!r}")
    count, seconds = parsed
    return RateLimitItemPerSecond(count, seconds)


@functools.cache
def _limiter_on(backend: str, location: str) -> MovingWindowRateLimiter:
    if backend.endswith("RedisCache"):
        options = settings.CACHES["default"].get("OPTIONS", {})
        storage: Storage = RedisStorage(location, key_prefix="memoryhub:throttle", **options)
    else:
        storage = MemoryStorage()
    return MovingWindowRateLimiter(storage)


def limiter() -> MovingWindowRateLimiter:
    """The moving-window limiter on the cache's Redis (every process shares its counts),
    or on this process's memory when the cache is local: one per cache, per process."""
    cache = settings.CACHES["default"]
    return _limiter_on(cache["BACKEND"], str(cache.get("LOCATION", "")))


class _SettingsRateThrottle(BaseThrottle):
    """A moving window of `rate` requests per period: each request is one Redis round
    trip (a script that counts and records it, O(1) in the window), a refused one a
    second (when the oldest request leaves the window, for Retry-After). The rate is
    read from settings on every request, so override_settings and a changed environment
    reach it. Requests go through when the cache cannot be reached: a limit is
    protection, not a dependency. Each call is bounded (CACHES' socket timeouts), and
    after one fails the throttles do not ask again for a while (core.redis_outage)."""

    scope = ""
    rate_setting = ""

    def __init__(self) -> None:
        self._wait: float | None = None

    def identity(self, request: Request, view: Any) -> str | None:
        """Whose budget the request spends, or None when this throttle does not apply."""
        raise NotImplementedError

    def allow_request(self, request: Request, view: Any) -> bool:
        identity = self.identity(request, view)
        if identity is None or redis_skipped():
            return True
        item = rate_item(getattr(settings, self.rate_setting))
        try:
            budget = limiter()
            if budget.hit(item, self.scope, identity):
                return True
            window_ends_at, _ = budget.get_window_stats(item, self.scope, identity)
        except (RedisError, OSError) as exc:
            note_redis_failure("the rate limits' counts", exc)
            return True
        # A place in the window frees strictly after `period`: the first whole second past it.
        self._wait = float(math.floor(max(window_ends_at - time.time(), 0.0)) + 1)
        THROTTLED_REQUESTS.labels(scope=self.scope).inc()
        return False

    def wait(self) -> float | None:
        return self._wait


def request_kind(request: Request, view: Any) -> str:
    """ "read" or "write": a search is a POST that only reads, as its scope says."""
    if request.method in SAFE_METHODS or needed_scope(request, view) == AgentToken.Scope.READ:
        return "read"
    return "write"


class _AgentTokenThrottle(_SettingsRateThrottle):
    kind = ""

    def identity(self, request: Request, view: Any) -> str | None:
        token = request.auth
        if not isinstance(token, AgentToken) or request_kind(request, view) != self.kind:
            return None
        return str(token.pk)


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

    def identity(self, request: Request, view: Any) -> str | None:
        if isinstance(request.auth, AgentToken):
            return None
        return client_address(request)


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
