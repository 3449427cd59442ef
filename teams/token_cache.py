"""What authentication learned about a live token, kept per process for a short while
(docs/tenancy.md, "Token cache").

A hit spares the token's lookup in its own scope (three statements) but not the check
that it still holds: authentication reads the token's team row on every request anyway
(the request works with it), and that row's `token_version` moves, by a trigger, in the
very transaction that revokes, expires, re-scopes or deletes any of the team's tokens. A
cached entry whose version is not the row's is dropped and the token looked up again, so
a revoked token answers 401 on its next request in every process. The TTL only bounds
how long an entry of a token nobody uses stays in memory.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, replace
from datetime import datetime

from django.conf import settings

from teams.models import AgentToken, Team

# Bounds the memory; a token pushed out is simply looked up again.
MAX_CACHED_TOKENS = 4096


@dataclass(frozen=True)
class CachedToken:
    """The token's row as authentication read it (no team content), with the team's
    token version read in the same statement."""

    id: int
    team_id: int
    name: str
    token_hash: str
    prefix: str
    scopes: tuple[str, ...]
    created_at: datetime
    last_used_at: datetime | None
    expires_at: datetime | None
    user_id: int | None
    token_version: int
    cached_at: float

    def token_for(self, team: Team) -> AgentToken:
        """A fresh instance for one request: nothing a request does to it reaches the cache."""
        token = AgentToken(
            id=self.id,
            team_id=self.team_id,
            name=self.name,
            token_hash=self.token_hash,
            prefix=self.prefix,
            scopes=list(self.scopes),
            created_at=self.created_at,
            revoked_at=None,
            last_used_at=self.last_used_at,
            expires_at=self.expires_at,
            user_id=self.user_id,
        )
        token.team = team
        token._state.adding = False
        return token


_cache: OrderedDict[str, CachedToken] = OrderedDict()
_lock = threading.Lock()


def cached_token(token_hash: str) -> CachedToken | None:
    """The entry of a token seen live within the TTL, if any (unchecked: see the module)."""
    with _lock:
        entry = _cache.get(token_hash)
        if entry is None:
            return None
        if time.monotonic() - entry.cached_at > settings.MEMORYHUB_TOKEN_CACHE_SECONDS:
            del _cache[token_hash]
            return None
        _cache.move_to_end(token_hash)
        return entry


def remember_token(token: AgentToken, *, token_version: int) -> None:
    """Keep a live token, looked up with its team's row, whose `token_version` was read
    in the same statement as the token."""
    if settings.MEMORYHUB_TOKEN_CACHE_SECONDS <= 0:
        return
    entry = CachedToken(
        id=token.pk,
        team_id=token.team_id,
        name=token.name,
        token_hash=token.token_hash,
        prefix=token.prefix,
        scopes=tuple(token.scopes),
        created_at=token.created_at,
        last_used_at=token.last_used_at,
        expires_at=token.expires_at,
        user_id=token.user_id,
        token_version=token_version,
        cached_at=time.monotonic(),
    )
    with _lock:
        _cache[token.token_hash] = entry
        _cache.move_to_end(token.token_hash)
        while len(_cache) > MAX_CACHED_TOKENS:
            _cache.popitem(last=False)


def note_use(token_hash: str, used_at: datetime) -> None:
    """The token's `last_used_at` was just written: the next hits need not write it."""
    with _lock:
        entry = _cache.get(token_hash)
        if entry is not None:
            _cache[token_hash] = replace(entry, last_used_at=used_at)


def forget_token(token_hash: str) -> None:
    with _lock:
        _cache.pop(token_hash, None)


def forget_all() -> None:
    """Empty the cache (tests that reuse ids across rolled-back transactions)."""
    with _lock:
        _cache.clear()
