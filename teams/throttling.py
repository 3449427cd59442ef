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
from redis import ConnectionPool
from redis.exceptions import NoScriptError, RedisError, ResponseError
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


# What a Redis failure of the throttles is logged as (core.redis_outage).
COUNTS = "the rate limits' counts"


class EarlyBudgetHit:
    """A cached token's budget hit, sent to Redis just before the token's check goes to
    PostgreSQL and read once the check has answered: the two round trips overlap
    instead of following each other (the REST door, teams.viewsets). It is the hit the
    call's throttle would send: `limits`' own moving-window script, key and arguments,
    which a test holds to `limits`' reading of the window. Only where the counts are in
    Redis; otherwise, and when nothing was sent, the throttle hits as it always has.

    The throttle of the same scope and token reads the answer; a call refused before it
    (a 401 the check finds, another team's address, a missing scope) has spent one
    request of its own token's budget, and its answer is read when the call ends, so the
    connection goes back to the pool with nothing left on it."""

    def __init__(self, kind: str) -> None:
        self.throttle = AgentWriteThrottle if kind == "write" else AgentReadThrottle
        self._sent: tuple[str, Any, Any] | None = None

    def send(self, token_id: int) -> None:
        storage = limiter().storage
        if self._sent is not None or redis_skipped() or not isinstance(storage, RedisStorage):
            return
        item = rate_item(getattr(settings, self.throttle.rate_setting))
        identity = str(token_id)
        key = storage.prefixed_key(item.key_for(self.throttle.scope, identity))
        script = storage.lua_acquire_moving_window
        arguments = (time.time(), item.amount, item.get_expiry(), 1)  # as limits' acquire_entry
        pool: ConnectionPool = storage.get_connection().connection_pool  # type: ignore[attr-defined]
        connection = None
        try:
            connection = pool.get_connection()
            connection.send_command("EVALSHA", script.sha, 1, key, *arguments)  # type: ignore[no-untyped-call]
        except (RedisError, OSError) as exc:
            if connection is not None:
                pool.release(connection)  # redis-py disconnected it
            note_redis_failure(COUNTS, exc)
            return
        self._sent = (identity, connection, pool)

    def answer(self, scope: str, identity: str) -> bool | None:
        """Whether the hit sent for this throttle's scope and token found room, or None:
        none was sent (or Redis had not loaded the script yet), and the throttle hits
        itself. Raises what redis-py raises, as a hit of the throttle's would."""
        sent = self._sent
        if sent is None or scope != self.throttle.scope or sent[0] != identity:
            return None
        self._sent = None
        try:
            return bool(self._read(sent))
        except NoScriptError:
            return None

    def close(self) -> None:
        """Read an answer nobody asked for (the call was refused before its throttle)."""
        sent, self._sent = self._sent, None
        if sent is not None:
            try:
                self._read(sent)
            except NoScriptError:
                pass  # not counted: Redis had not loaded the script yet
            except (RedisError, OSError) as exc:
                note_redis_failure(COUNTS, exc)

    @staticmethod
    def _read(sent: tuple[str, Any, Any]) -> Any:
        _, connection, pool = sent
        try:
            return connection.read_response()
        except ResponseError:
            raise  # the reply was read whole: the connection is in step
        except BaseException:
            connection.disconnect()
            raise
        finally:
            pool.release(connection)


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

    def __init__(self, early: EarlyBudgetHit | None = None) -> None:
        self._wait: float | None = None
        self._early = early

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
            found_room = self._early.answer(self.scope, identity) if self._early else None
            if found_room is None:
                found_room = budget.hit(item, self.scope, identity)
            if found_room:
                return True
            window_ends_at, _ = budget.get_window_stats(item, self.scope, identity)
        except (RedisError, OSError) as exc:
            note_redis_failure(COUNTS, exc)
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
