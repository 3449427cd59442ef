"""Background work yields to other teams' requests (docs/indexing-and-workers.md, "Indexing
yields to other teams").

The web and the workers share the cores. A request notes its team when it starts
(`note_team_request`): one ZADD to the Redis the service already runs, of the team id
with the time, into one sorted set with a member per team, so its size is the number of
teams; a process sends a team's note at most once per fifth of the window, from a
thread of its own, so that no request waits for that round trip. A worker
indexing team A's entries asks between embedding batches whether a
request of another team started within the last MEMORYHUB_FOREGROUND_WINDOW_MS, and
waits while one has, at most MEMORYHUB_INDEX_YIELD_MAX_MS per batch, so indexing
always goes on (`yield_to_other_teams`). A save's near-duplicate check, which embeds
the opening of the new text inside the request (search.duplicates_on_save), waits the same way once
before embedding. A team's own requests never pause its own indexing or saves: one team
flooding the service slows its own work, not the others' reads.

Both sides fail open and fast: without Redis (the tests' in-process tasks) or while it
does not answer (a short timeout, then no attempt for a few seconds) nothing is noted
and nothing waits.
"""

from __future__ import annotations

import logging
import os
import threading
import time

import redis
from django.conf import settings
from redis.backoff import NoBackoff
from redis.retry import Retry

logger = logging.getLogger(__name__)

KEY = "memoryhub:foreground-teams"
TIMEOUT_SECONDS = 0.05
# After a failure, neither side tries Redis again for this long: a request never pays
# the timeout twice in a row while Redis is down.
RETRY_AFTER_SECONDS = 5.0
POLL_SECONDS = 0.01

# A team's note is sent again once this share of the window has passed.
NOTE_SHARE_OF_WINDOW = 5
MAX_TEAMS_REMEMBERED = 10_000
# When this process last noted each team (ms); emptied when it grows past the bound.
_noted_at: dict[int, int] = {}

# What the requests noted and the sender has not sent yet: team id -> time (ms).
_pending: dict[int, int] = {}
_pending_lock = threading.Lock()
_wake_sender = threading.Event()
_sender_pid = 0

_lock = threading.Lock()
_client: redis.Redis | None = None
_client_url = ""
_down_until = 0.0


def _redis() -> redis.Redis | None:
    global _client, _client_url
    url = settings.REDIS_URL
    if not url or time.monotonic() < _down_until:
        return None
    with _lock:
        if _client is None or _client_url != url:
            _client = redis.Redis.from_url(
                # kombu spells a unix socket redis+socket://, redis-py unix://.
                url.replace("redis+socket://", "unix://", 1),
                socket_connect_timeout=TIMEOUT_SECONDS,
                socket_timeout=TIMEOUT_SECONDS,
                retry=Retry(NoBackoff(), 0),
            )
            _client_url = url
        return _client


def _failed(error: Exception) -> None:
    global _down_until
    if time.monotonic() >= _down_until:
        logger.warning("foreground notes: Redis does not answer (%s)", type(error).__name__)
    _down_until = time.monotonic() + RETRY_AFTER_SECONDS


def _now_ms() -> int:
    return int(time.time() * 1000)


def note_team_request(team_id: int) -> None:
    """A request of `team_id` is being served. A process that noted the team less than
    a fifth of the window ago notes nothing: the note it made still says so, at most that
    much earlier, and a team's back-to-back requests cost one ZADD per fifth of the window
    instead of one each. The ZADD is the sender thread's: the request only hands it the
    note, and waits for no round trip to Redis for it (docs/indexing-and-workers.md)."""
    if settings.MEMORYHUB_INDEX_YIELD_MAX_MS <= 0 or not settings.REDIS_URL or time.monotonic() < _down_until:
        return
    now = _now_ms()
    last = _noted_at.get(team_id)
    # A clock set back since reads as not noted: a note too many, never one missing.
    if last is not None and 0 <= now - last < settings.MEMORYHUB_FOREGROUND_WINDOW_MS // NOTE_SHARE_OF_WINDOW:
        return
    if len(_noted_at) >= MAX_TEAMS_REMEMBERED:
        _noted_at.clear()
    _noted_at[team_id] = now
    with _pending_lock:
        _pending[team_id] = now
    _start_sender()
    _wake_sender.set()


def send_pending_notes() -> None:
    """Send the notes not sent yet, in one ZADD, from the calling thread (the sender's,
    or a test that reads them next)."""
    with _pending_lock:
        if not _pending:
            return
        notes = {str(team_id): noted_at for team_id, noted_at in _pending.items()}
        _pending.clear()
    client = _redis()
    if client is None:
        return
    try:
        client.zadd(KEY, notes)
    except (redis.RedisError, OSError) as error:
        _failed(error)


def _start_sender() -> None:
    """One sender thread per process, started by the process's first note (a forked
    worker starts its own)."""
    global _sender_pid
    if _sender_pid == os.getpid():
        return
    with _pending_lock:
        if _sender_pid != os.getpid():
            threading.Thread(
                target=_send_notes_forever, name="memoryhub-foreground-notes", daemon=True
            ).start()
            _sender_pid = os.getpid()


def _send_notes_forever() -> None:
    while True:
        _wake_sender.wait()
        _wake_sender.clear()
        try:
            send_pending_notes()
        except Exception:  # the thread outlives any one note: a bug is logged, not fatal
            logger.exception("foreground notes: sending failed")


def other_teams_active(team_id: int) -> bool:
    """Whether a request of another team than `team_id` started within the window."""
    client = _redis()
    if client is None:
        return False
    since = _now_ms() - settings.MEMORYHUB_FOREGROUND_WINDOW_MS
    try:
        # Members older than the window are of no use to anyone: dropped here, so the
        # set holds at most the teams of the last window.
        pipeline = client.pipeline(transaction=False)
        pipeline.zremrangebyscore(KEY, "-inf", f"({since}")
        pipeline.zrange(KEY, 0, -1)
        _, active = pipeline.execute()
    except (redis.RedisError, OSError) as error:
        _failed(error)
        return False
    own = str(team_id).encode()
    return any(member != own for member in active)


def yield_to_other_teams(team_id: int) -> float:
    """Wait while other teams' requests are being served, at most
    MEMORYHUB_INDEX_YIELD_MAX_MS; returns the seconds waited."""
    budget = settings.MEMORYHUB_INDEX_YIELD_MAX_MS / 1000
    if budget <= 0:
        return 0.0
    started = time.monotonic()
    deadline = started + budget
    waited = False
    while time.monotonic() < deadline and other_teams_active(team_id):
        time.sleep(POLL_SECONDS)
        waited = True
    return time.monotonic() - started if waited else 0.0
