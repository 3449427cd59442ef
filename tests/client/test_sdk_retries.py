"""The SDK's retries against the real server's rate limit (a server of this module's own,
with one write an hour): a 429 is sent again after the wait the server names, as many
times as the policy says, and raised with its code and `retry_after` when it still
refuses; a wait longer than the policy's `max_wait` is never waited for."""

from __future__ import annotations

import pytest

from memoryhub_client import AsyncMemoryHub, MemoryHub, RateLimited, RetryPolicy
from teams.models import Team
from tests.conftest import make_agent
from tests.mcp.conftest import Server, run_async

pytestmark = pytest.mark.django_db(transaction=True)

SERVER_ENV = {"MEMORYHUB_THROTTLE_WRITE": "1/hour"}


def test_a_refusal_is_sent_again_after_the_servers_wait_then_raised(mcp_server: Server, team: Team) -> None:
    token = make_agent(team, "eager-bot", ["read", "write"]).token
    waits: list[float] = []
    policy = RetryPolicy(attempts=3, max_wait=7200, sleep=waits.append)
    with MemoryHub(mcp_server.base, token, team="alpha", retry=policy) as hub:
        hub.save("first", "One fact.")
        with pytest.raises(RateLimited) as refused:
            hub.save("second", "Another fact.")
        read = hub.get("first")  # reads have their own budget

    assert refused.value.code == "rate_limited" and refused.value.status == 429
    assert refused.value.retry_after is not None and 3000 < refused.value.retry_after <= 3600
    assert len(waits) == 2  # three attempts, two waits: each at least what the server asked
    assert all(wait >= refused.value.retry_after for wait in waits)
    assert read["content"] == "One fact."


def test_a_wait_past_max_wait_is_raised_at_once(mcp_server: Server, team: Team) -> None:
    token = make_agent(team, "eager-bot", ["read", "write"]).token
    waits: list[float] = []
    with MemoryHub(mcp_server.base, token, team="alpha", retry=RetryPolicy(sleep=waits.append)) as hub:
        hub.save("first", "One fact.")
        with pytest.raises(RateLimited) as refused:
            hub.save("second", "Another fact.")

    assert waits == [] and refused.value.retry_after is not None and refused.value.retry_after > 30
    assert "retry in" in str(refused.value)


def test_the_async_client_retries_the_same_way(mcp_server: Server, team: Team) -> None:
    token = make_agent(team, "eager-bot", ["read", "write"]).token
    waits: list[float] = []

    async def scenario() -> RateLimited:
        policy = RetryPolicy(attempts=2, max_wait=7200, sleep=waits.append)
        async with AsyncMemoryHub(mcp_server.base, token, team="alpha", retry=policy) as hub:
            await hub.save("first", "One fact.")
            try:
                await hub.save("second", "Another fact.")
            except RateLimited as exc:
                return exc
        raise AssertionError("the second save was not refused")

    refused = run_async(scenario())

    assert refused.code == "rate_limited" and len(waits) == 1
