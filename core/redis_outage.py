"""A request never waits long on a Redis that does not answer
(docs/indexing-and-workers.md, "Redis in the request path").

Requests use the service's Redis in four places: the API throttles count in Django's
cache, `core.yield_to_requests` notes the request's team, a save hands its indexing to the
broker, and injection marks its hourly cap warning in the cache. Each call is bounded at
the socket (MEMORYHUB_REDIS_REQUEST_TIMEOUT_SECONDS to connect and for each answer, no
retries). When a count, a mark or a publish fails, this process marks Redis down for
SKIP_SECONDS: until then the throttles let requests through without asking and saves
leave their entries pending for the reconcile job without trying, so a hung Redis costs
a process one timeout per window, not one per request. The first failure of an outage is
logged. (`core.yield_to_requests` keeps its own, shorter bound and window: its note is a hint,
and its timeout must not stop indexing being enqueued.)
"""

from __future__ import annotations

import logging
import threading
import time

logger = logging.getLogger(__name__)

# Long enough that a burst of requests meets one timeout, short enough that a blip (one
# slow answer of a live Redis) sends few entries the long way round, through the reconcile job.
SKIP_SECONDS = 2.0

_lock = threading.Lock()
_down_until = 0.0


def redis_skipped() -> bool:
    """Whether Redis failed in this process less than SKIP_SECONDS ago."""
    return time.monotonic() < _down_until


def note_redis_failure(use: str, error: BaseException) -> None:
    """Redis did not answer `use` (what was asked of it): skip it for SKIP_SECONDS."""
    global _down_until
    with _lock:
        now = time.monotonic()
        first = now >= _down_until
        _down_until = now + SKIP_SECONDS
    if first:
        logger.warning(
            "Redis did not answer %s (%s): requests skip it for %.0f s",
            use,
            type(error).__name__,
            SKIP_SECONDS,
        )


def forget_redis_failures() -> None:
    """Try Redis again at once (a test that points this process at another Redis)."""
    global _down_until
    with _lock:
        _down_until = 0.0
