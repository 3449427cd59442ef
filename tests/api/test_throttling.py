"""API rate limits. Each agent token has a budget of reads and one
of writes; requests without a valid token have one per client address. Over budget, a
request answers 429 `rate_limited` in the one error shape, with Retry-After."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import limits.storage.memory
import pytest
import redis.connection
from django.db import connection
from redis import Redis
from rest_framework.test import APIClient

import teams.throttling
from core.redis_outage import redis_skipped
from memoryhub.embedded_redis import EmbeddedRedis
from teams import services
from teams.models import AgentToken, Team
from teams.throttling import limiter
from tests.conftest import Agent, operator_view
from tests.search.conftest import free_port


@pytest.fixture(autouse=True)
def fresh_counts() -> Iterator[None]:
    limiter().storage.reset()
    yield
    limiter().storage.reset()


def exhaust(agent: Agent, budget: int, path: str = "memories/") -> Any:
    for _ in range(budget):
        assert agent.client.get(agent.url(path)).status_code == 200
    return agent.client.get(agent.url(path))


def assert_rate_limited(response: Any, *, at_most: int) -> int:
    assert response.status_code == 429, response.content
    body = response.json()
    assert body["error"] == "rate_limited"
    assert "retry in" in body["detail"]
    retry_after = int(response["Retry-After"])
    assert 1 <= retry_after <= at_most
    assert body["retry_after"] == retry_after
    return retry_after


def test_a_token_over_its_read_budget_answers_429_with_retry_after(member: Agent, settings: Any) -> None:
    settings.MEMORYHUB_THROTTLE_READ = "3/min"

    assert_rate_limited(exhaust(member, 3), at_most=60)


def test_one_teams_token_over_budget_does_not_limit_another_teams_token(
    member: Agent, outsider: Agent, settings: Any
) -> None:
    settings.MEMORYHUB_THROTTLE_READ = "3/min"
    assert_rate_limited(exhaust(member, 3), at_most=60)

    assert outsider.client.get(outsider.url("memories/")).status_code == 200


def test_writes_have_a_budget_of_their_own_and_a_search_counts_as_a_read(
    member: Agent, settings: Any
) -> None:
    settings.MEMORYHUB_THROTTLE_WRITE = "2/min"
    notes = ["Deploys happen on Tuesdays.", "The staging database is rebuilt nightly.", "Use UTC."]
    for number, note in enumerate(notes[:2]):
        saved = member.client.post(
            member.url("memories/"), {"key": f"n{number}", "content": note}, format="json"
        )
        assert saved.status_code == 201, saved.content

    refused = member.client.post(member.url("memories/"), {"key": "n2", "content": notes[2]}, format="json")

    assert_rate_limited(refused, at_most=60)
    assert member.client.get(member.url("memories/")).status_code == 200
    searched = member.client.post(member.url("search/"), {"query": "note"}, format="json")
    assert searched.status_code == 200, searched.content


def test_a_limited_token_is_let_through_again_after_retry_after(
    member: Agent, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.MEMORYHUB_THROTTLE_READ = "1/min"
    # The throttles' clock (theirs and their storage's, in this process), moved by the
    # test rather than waited out.
    started = now = time.time()
    clock = SimpleNamespace(time=lambda: now, monotonic=time.monotonic, sleep=time.sleep)
    monkeypatch.setattr(limits.storage.memory, "time", clock)
    monkeypatch.setattr(teams.throttling, "time", clock)
    assert member.client.get(member.url("memories/")).status_code == 200
    # The clock stands still: the first whole second strictly after the minute.
    retry_after = assert_rate_limited(member.client.get(member.url("memories/")), at_most=61)

    now = started + 59  # the minute is not over
    assert member.client.get(member.url("memories/")).status_code == 429
    now = started + retry_after
    assert member.client.get(member.url("memories/")).status_code == 200


def test_requests_without_a_valid_token_are_limited_per_client_address(member: Agent, settings: Any) -> None:
    settings.MEMORYHUB_THROTTLE_ANONYMOUS = "2/min"
    anonymous = APIClient()
    guesser = APIClient(HTTP_AUTHORIZATION="Bearer not-a-real-token")
    url = member.url("memories/")

    assert anonymous.get(url).status_code == 401
    assert guesser.get(url).status_code == 401
    # The address's budget is spent, with or without a (bad) token.
    assert_rate_limited(guesser.get(url), at_most=60)
    assert_rate_limited(anonymous.get(url), at_most=60)

    assert anonymous.get(url, REMOTE_ADDR="192.0.2.7").status_code == 401
    assert member.client.get(url).status_code == 200


def test_x_forwarded_for_is_ignored_unless_behind_a_proxy(member: Agent, settings: Any) -> None:
    settings.MEMORYHUB_THROTTLE_ANONYMOUS = "1/min"
    anonymous = APIClient()
    url = member.url("memories/")
    assert anonymous.get(url, HTTP_X_FORWARDED_FOR="198.51.100.1").status_code == 401

    # A client cannot dodge the limit by claiming another address...
    assert_rate_limited(anonymous.get(url, HTTP_X_FORWARDED_FOR="198.51.100.2"), at_most=60)

    # ...but behind a proxy, the address the proxy saw is the client.
    settings.MEMORYHUB_PROXY_COUNT = 1
    assert anonymous.get(url, HTTP_X_FORWARDED_FOR="198.51.100.3").status_code == 401
    assert anonymous.get(url, HTTP_X_FORWARDED_FOR="spoofed, 198.51.100.4").status_code == 401
    assert_rate_limited(anonymous.get(url, HTTP_X_FORWARDED_FOR="198.51.100.4"), at_most=60)


def test_limits_do_not_take_the_api_down_when_the_cache_is_unreachable(member: Agent, settings: Any) -> None:
    settings.MEMORYHUB_THROTTLE_READ = "1/min"
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{free_port()}/0",
        }
    }

    for _ in range(3):
        assert member.client.get(member.url("memories/")).status_code == 200


def test_the_schema_documents_429(db: None) -> None:
    schema = APIClient().get("/api/schema/", HTTP_ACCEPT="application/json").json()

    operation = schema["paths"]["/api/v1/teams/{team}/memories/"]["get"]
    assert "429" in operation["responses"]
    assert "Retry-After" in operation["responses"]["429"]["description"]


def test_a_request_spends_its_budget_in_one_redis_round_trip(
    member: Agent, settings: Any, embedded_redis: EmbeddedRedis
) -> None:
    location = embedded_redis.url.replace("redis+socket://", "unix://", 1)
    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": location}
    }
    settings.MEMORYHUB_THROTTLE_READ = "3/min"
    redis = Redis.from_url(location)
    redis.flushall()
    assert member.client.get(member.url("memories/")).status_code == 200  # loads the script
    redis.config_resetstat()

    allowed = [member.client.get(member.url("memories/")).status_code for _ in range(2)]
    spent = {name: stats["calls"] for name, stats in redis.info("commandstats").items()}
    refused = member.client.get(member.url("memories/"))

    assert allowed == [200, 200]
    # One script call per request (the commands it runs inside Redis count apart), no
    # read of the window and write back.
    assert spent["cmdstat_evalsha"] == 2, spent
    assert not {"cmdstat_get", "cmdstat_set", "cmdstat_eval"} & spent.keys(), spent
    assert_rate_limited(refused, at_most=60)
    (window,) = redis.keys("memoryhub:throttle:*")
    assert redis.llen(window) == 3


@pytest.fixture
def redis_counts(settings: Any, embedded_redis: EmbeddedRedis) -> Redis:
    """The budgets counted in the suite's own Redis, emptied."""
    location = embedded_redis.url.replace("redis+socket://", "unix://", 1)
    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": location}
    }
    redis = Redis.from_url(location)
    redis.flushall()
    return redis


def test_a_cached_tokens_budget_goes_to_redis_while_its_check_is_in_postgresql(
    member: Agent, redis_counts: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert member.client.get(member.url("memories/")).status_code == 200  # caches the token
    events: list[str] = []

    def statement(execute: Any, sql: str, *args: Any) -> Any:
        if '"teams_team"' in sql:
            events.append("check")
        return execute(sql, *args)

    for method in ("send_command", "read_response"):
        original = getattr(redis.connection.AbstractConnection, method)

        def recorded(
            self: Any, *args: Any, _original: Any = original, _name: str = method, **kwargs: Any
        ) -> Any:
            events.append(_name)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(redis.connection.AbstractConnection, method, recorded)

    with connection.execute_wrapper(statement):
        assert member.client.get(member.url("memories/")).status_code == 200

    # The budget's one script call is sent before the check and its answer read after.
    assert events == ["send_command", "check", "read_response"]


def test_a_budget_spent_ahead_is_limits_own_window(member: Agent, redis_counts: Redis, settings: Any) -> None:
    settings.MEMORYHUB_THROTTLE_READ = "3/min"
    with operator_view():
        token_id = str(AgentToken.objects.get(name="writer-bot").pk)
    item = teams.throttling.rate_item(settings.MEMORYHUB_THROTTLE_READ)
    budget = limiter()

    statuses = [member.client.get(member.url("memories/")).status_code for _ in range(3)]

    assert statuses == [200, 200, 200]
    assert budget.get_window_stats(item, "agent_read", token_id).remaining == 0
    assert not budget.test(item, "agent_read", token_id)
    assert_rate_limited(member.client.get(member.url("memories/")), at_most=60)


def test_a_call_refused_after_its_check_has_spent_its_tokens_budget_and_leaves_redis_in_step(
    member: Agent, other_team: Team, redis_counts: Redis, settings: Any
) -> None:
    settings.MEMORYHUB_THROTTLE_READ = "3/min"
    assert member.client.get(member.url("memories/")).status_code == 200  # caches the token

    elsewhere = member.client.get(member.url("memories/", team=other_team.slug))

    assert elsewhere.status_code == 404
    # Each later call reads its own answer: the 404's was read before its connection
    # went back to the pool.
    assert member.client.get(member.url("memories/")).status_code == 200
    assert_rate_limited(member.client.get(member.url("memories/")), at_most=60)
    (window,) = redis_counts.keys("memoryhub:throttle:*")
    assert redis_counts.llen(window) == 3


def test_a_budget_sent_ahead_before_redis_knows_the_script_is_counted_all_the_same(
    member: Agent, redis_counts: Redis, settings: Any
) -> None:
    settings.MEMORYHUB_THROTTLE_READ = "3/min"
    assert member.client.get(member.url("memories/")).status_code == 200
    redis_counts.script_flush()

    assert member.client.get(member.url("memories/")).status_code == 200
    assert member.client.get(member.url("memories/")).status_code == 200

    (window,) = redis_counts.keys("memoryhub:throttle:*")
    assert redis_counts.llen(window) == 3
    assert_rate_limited(member.client.get(member.url("memories/")), at_most=60)


def test_a_revocation_the_check_finds_answers_401_and_leaves_redis_in_step(
    member: Agent, admin_member: Agent, readonly_member: Agent, redis_counts: Redis, settings: Any
) -> None:
    settings.MEMORYHUB_THROTTLE_READ = "2/min"
    for agent in (member, admin_member):
        assert agent.client.get(agent.url("memories/")).status_code == 200  # caches the token
    answers: list[int] = []
    connections: list[int] = []
    for agent, name in ((member, "writer-bot"), (admin_member, "admin-bot")):
        services.revoke_token(team=agent.team, name=name, actor="test")
        revoked = agent.client.get(agent.url("memories/"))
        answers.append(revoked.status_code)
        assert revoked.json()["detail"] == "this token has been revoked"
        connections.append(redis_counts.info("stats")["total_connections_received"])
    reader = readonly_member
    answers += [reader.client.get(reader.url("memories/")).status_code for _ in range(3)]

    assert answers == [401, 401, 200, 200, 429]
    # Each 401's early answer was read before its connection went back to the pool:
    # redis-py would otherwise find data waiting on it at its next use and connect anew.
    assert redis_counts.info("stats")["total_connections_received"] == connections[0] == connections[1]


def test_a_redis_that_hangs_under_a_refused_calls_early_answer_is_noted_and_not_waited_for_again(
    member: Agent, other_team: Team, settings: Any, embedded_redis: EmbeddedRedis
) -> None:
    location = embedded_redis.url.replace("redis+socket://", "unix://", 1)
    bound = {"socket_timeout": 0.25, "socket_connect_timeout": 0.25}  # as the settings bound it
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": location,
            "OPTIONS": bound,
        }
    }
    teams.throttling._limiter_on.cache_clear()  # a limiter of this location without the bound
    Redis.from_url(location).flushall()
    assert member.client.get(member.url("memories/")).status_code == 200  # caches the token
    os.kill(embedded_redis.process.pid, signal.SIGSTOP)
    try:
        elsewhere = member.client.get(member.url("memories/", team=other_team.slug))
        noted = redis_skipped()
        again = member.client.get(member.url("memories/", team=other_team.slug))
    finally:
        os.kill(embedded_redis.process.pid, signal.SIGCONT)
        teams.throttling._limiter_on.cache_clear()

    assert elsewhere.status_code == again.status_code == 404
    assert noted
