"""With a Redis, every web process spends one budget: gunicorn with two processes as
`make run` serves, on the suite's embedded Redis. Requests without a token on new
connections (each may land on either process), in rounds until both processes have
answered some: exactly the budget's count get through, whichever process answered them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.multiprocess import MultiProcessCollector
from redis import Redis

from memoryhub.embedded_redis import EmbeddedRedis
from tests.web_server import WebServer, send_rounds_until, server_env
from tests.worker import database_url

BUDGET = 10
ROUND = 48  # requests sent at once, 8 at a time
MAX_ROUNDS = 50


@pytest.fixture
def server_on_redis(
    django_db_setup: None, django_db_blocker: Any, embedded_redis: EmbeddedRedis, tmp_path: Path
) -> Iterator[tuple[str, Path, Redis]]:
    with django_db_blocker.unblock():
        url = database_url()
    metrics = tmp_path / "metrics"
    env = server_env(
        url,
        REDIS_URL=embedded_redis.url,
        WEB_CONCURRENCY="2",
        MEMORYHUB_THROTTLE_ANONYMOUS=f"{BUDGET}/min",
        MEMORYHUB_METRICS_DIR=str(metrics),
        MEMORYHUB_METRICS_TOKEN="rate-limits-metrics-token",  # metrics files are kept only with a token
    )
    redis = Redis.from_url(embedded_redis.url.replace("redis+socket://", "unix://", 1))
    for key in redis.scan_iter("memoryhub:throttle:*"):
        redis.delete(key)
    server = WebServer(env, tmp_path / "gunicorn.log").start()
    try:
        yield server.base, metrics / "web", redis
    finally:
        server.stop()


def statuses_per_process(folder: Path) -> dict[str, Counter[str]]:
    """The statuses each gunicorn process answered (its own metrics file)."""
    answered: dict[str, Counter[str]] = {}
    for path in folder.glob("counter_*.db"):
        for family in MultiProcessCollector.merge([str(path)], accumulate=True):
            for sample in family.samples:
                if (
                    sample.name == "memoryhub_http_requests_total"
                    and sample.labels.get("route") == "memory-list"
                ):
                    answered.setdefault(path.name, Counter())[sample.labels["status"]] += int(sample.value)
    return answered


def test_two_web_processes_spend_one_budget(server_on_redis: tuple[str, Path, Redis]) -> None:
    base, folder, redis = server_on_redis

    # A new connection per request: a kept-alive one stays with the process that took it.
    statuses: Counter[int] = Counter()
    with httpx.Client(base_url=base, timeout=30, limits=httpx.Limits(max_keepalive_connections=0)) as client:
        with ThreadPoolExecutor(8) as pool:

            def send_round() -> None:
                statuses.update(
                    pool.map(lambda _: client.get("/api/v1/teams/alpha/memories/").status_code, range(ROUND))
                )

            send_rounds_until(lambda: len(statuses_per_process(folder)) == 2, send_round, rounds=MAX_ROUNDS)
    sent = statuses.total()

    answered = statuses_per_process(folder)
    assert len(answered) == 2, answered  # both processes answered (else the test proves nothing)
    assert statuses == {401: BUDGET, 429: sent - BUDGET}, (statuses, answered)
    assert len(list(redis.scan_iter("memoryhub:throttle:*"))) == 1
