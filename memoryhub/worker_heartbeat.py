"""The Celery worker's heartbeat, which /readyz reads (docs/operations.md, "Why the probes
are built this way").

Each worker writes one key per queue it consumes to the broker's Redis,
`memoryhub:worker-heartbeat:<queue>`, with a lifetime of
MEMORYHUB_WORKER_HEARTBEAT_TTL_SECONDS, a third of which apart. /readyz asks only whether
the key of the default queue exists: one GET, no broadcast to every worker and no wait
for their answers. A worker that stops or dies stops renewing it, and it expires.

The beats come from a thread of the worker's main process with a Redis client of its own,
not from the consumer's event loop: the loop stands still while the consumer waits to
reconnect to a broker that came back, and readiness should recover when the broker does.
"""

from __future__ import annotations

import logging
import socket
import threading
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

logger = logging.getLogger(__name__)

KEY_PREFIX = "memoryhub:worker-heartbeat:"


def heartbeat_key(queue: str) -> str:
    return f"{KEY_PREFIX}{queue}"


def redis_client(broker_url: str, *, timeout: float) -> redis.Redis:
    """A client of the broker's Redis: short timeouts and a single immediate retry (a
    pooled connection a restarted Redis closed fails once, then a new one is made)."""
    return redis.Redis.from_url(
        # kombu spells a unix socket redis+socket://, redis-py unix:// (as settings.CACHES).
        broker_url.replace("redis+socket://", "unix://", 1),
        socket_connect_timeout=timeout,
        socket_timeout=timeout,
        retry=Retry(NoBackoff(), 1),
    )


class WorkerHeartbeat(threading.Thread):
    def __init__(self, *, broker_url: str, queues: list[str], ttl_seconds: float, name: str) -> None:
        super().__init__(name="memoryhub-heartbeat", daemon=True)
        self.keys = [heartbeat_key(queue) for queue in queues]
        self.ttl_ms = max(1, int(ttl_seconds * 1000))
        self.interval = ttl_seconds / 3
        self.worker_name = name
        self.client = redis_client(broker_url, timeout=min(1.0, self.interval))
        self.stopping = threading.Event()

    def beat(self) -> None:
        pipeline = self.client.pipeline(transaction=False)
        for key in self.keys:
            pipeline.set(key, self.worker_name, px=self.ttl_ms)
        pipeline.execute()

    def run(self) -> None:
        failing = False
        while True:
            try:
                self.beat()
            except (redis.RedisError, OSError) as error:
                if not failing:  # once per outage, not once a second
                    logger.warning("worker heartbeat: the broker does not answer (%s)", type(error).__name__)
                failing = True
            else:
                if failing:
                    logger.info("worker heartbeat: the broker answers again")
                failing = False
            if self.stopping.wait(self.interval):
                break
        self.client.close()


_heartbeat: WorkerHeartbeat | None = None


def start_heartbeat(sender: Any, **_: object) -> None:
    """worker_ready (sent by the consumer): beat for every queue this worker consumes
    (its -Q, or the default queue)."""
    global _heartbeat
    from django.conf import settings

    app = sender.app
    if app.conf.task_always_eager or _heartbeat is not None:
        return
    _heartbeat = WorkerHeartbeat(
        broker_url=app.conf.broker_url,
        queues=sorted(app.amqp.queues.consume_from),
        ttl_seconds=float(settings.MEMORYHUB_WORKER_HEARTBEAT_TTL_SECONDS),
        name=getattr(sender, "hostname", "") or socket.gethostname(),
    )
    _heartbeat.start()


def stop_heartbeat(**_: object) -> None:
    """worker_shutdown: stop beating. The key is left to expire: another worker may be
    renewing it."""
    global _heartbeat
    if _heartbeat is not None:
        _heartbeat.stopping.set()
        _heartbeat.join(5)
        _heartbeat = None
