"""The SDK's rules that need no server: which answers are retried and how long a retry
waits, how a wait is read from an answer, which exception an answer raises, and that
the sync and async clients offer the same methods with the same arguments."""

from __future__ import annotations

import email.utils
import inspect
from datetime import UTC, datetime, timedelta

import pytest

from memoryhub_client import (
    AsyncMemoryHub,
    Conflict,
    InvalidRequest,
    MemoryHub,
    MemoryHubError,
    NotFound,
    RateLimited,
    RetryPolicy,
    ServerError,
    ServerUnavailable,
    cursor_of,
)
from memoryhub_client.config import ConfigError
from memoryhub_client.errors import error_from_answer, retry_after_seconds


def test_only_429_and_503_with_a_wait_within_max_wait_are_retried() -> None:
    policy = RetryPolicy(max_wait=30)

    assert policy.should_retry(RateLimited("later", status=429, retry_after=5))
    assert policy.should_retry(ServerUnavailable("down", status=503, retry_after=30))
    assert not policy.should_retry(RateLimited("later", status=429, retry_after=None))
    assert not policy.should_retry(RateLimited("later", status=429, retry_after=31))
    assert not policy.should_retry(ServerError("boom", status=500, retry_after=1))
    assert not policy.should_retry(Conflict("taken", status=409))


def test_a_retry_waits_the_servers_time_or_a_doubling_backoff_when_longer() -> None:
    policy = RetryPolicy(max_wait=30, backoff=0.5)
    later = RateLimited("later", status=429, retry_after=2)
    now = RateLimited("later", status=429, retry_after=0)

    assert 2 <= policy.wait_seconds(later, 1) <= 2.2
    assert 0.5 <= policy.wait_seconds(now, 1) <= 0.55
    assert 2 <= policy.wait_seconds(now, 3) <= 2.2
    assert policy.wait_seconds(now, 10) == 30  # never past max_wait


def test_the_wait_comes_from_the_body_then_the_header_in_seconds_or_as_a_date() -> None:
    soon = email.utils.format_datetime(datetime.now(UTC) + timedelta(seconds=120), usegmt=True)

    assert retry_after_seconds({"retry_after": 5}, {"Retry-After": "9"}) == 5
    assert retry_after_seconds({}, {"Retry-After": "9"}) == 9
    assert 100 < (retry_after_seconds(None, {"Retry-After": soon}) or 0) <= 120
    assert retry_after_seconds({}, {"Retry-After": "soon-ish"}) is None
    assert retry_after_seconds({"retry_after": True}, {}) is None


@pytest.mark.parametrize(
    ("status", "expected"),
    [(400, InvalidRequest), (404, NotFound), (409, Conflict), (413, InvalidRequest), (429, RateLimited),
     (503, ServerUnavailable), (500, ServerError), (502, ServerError), (418, MemoryHubError)],
)  # fmt: skip
def test_each_status_raises_its_exception_with_the_servers_body(status: int, expected: type) -> None:
    body = {"error": "some_code", "detail": "what went wrong", "retry_after": 3}

    error = error_from_answer(status, body, {})

    assert type(error) is expected
    assert (error.status, error.code, error.detail, error.retry_after) == (
        status,
        "some_code",
        "what went wrong",
        3,
    )


def test_a_pages_cursor_is_read_from_its_link() -> None:
    assert cursor_of("http://h/api/v1/teams/t/memories/?cursor=cD0yMDI2&limit=2") == "cD0yMDI2"
    assert cursor_of(None) is None and cursor_of("http://h/api/v1/teams/t/memories/") is None


def test_the_sync_and_async_clients_offer_the_same_methods_with_the_same_arguments() -> None:
    def methods(cls: type) -> dict[str, list[inspect.Parameter]]:
        return {
            name: list(inspect.signature(member).parameters.values())
            for name, member in vars(cls).items()
            if callable(member)
            and not name.startswith("_")
            and name not in {"close", "aclose", "from_environment"}
        }

    sync, asynchronous = methods(MemoryHub), methods(AsyncMemoryHub)

    assert set(sync) == set(asynchronous)
    assert sync == asynchronous  # the answers differ: awaitables, async iterators
    assert all(inspect.iscoroutinefunction(getattr(AsyncMemoryHub, name)) for name in sync if name not in
               {"iter_memories", "export"})  # fmt: skip


def test_a_client_never_shows_its_token() -> None:
    hub = MemoryHub("http://127.0.0.1:9", "mh_secret-token", team="alpha")

    assert "mh_secret-token" not in repr(hub) and "mh_secret-token" not in repr(hub._connection)
    hub.close()


def test_a_client_needs_a_team_a_token_and_an_http_url() -> None:
    with pytest.raises(ValueError, match="team"):
        MemoryHub("http://127.0.0.1:9", "t", team="")
    with pytest.raises(ValueError, match="token"):
        MemoryHub("http://127.0.0.1:9", "", team="alpha")
    with pytest.raises(ConfigError, match="http"):
        MemoryHub("ftp://example", "t", team="alpha")
