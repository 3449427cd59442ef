"""The REST API's rate limits apply to MCP: a tool call spends the token's read or
write budget as its REST endpoint would, and requests without a valid token share the
per-address budget (a server of this module's own, with small budgets)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from teams.models import Team
from tests.conftest import make_agent
from tests.mcp.conftest import Server, mcp_client, run_async, structured

pytestmark = pytest.mark.django_db(transaction=True)

SERVER_ENV = {
    "MEMORYHUB_THROTTLE_WRITE": "2/hour",
    "MEMORYHUB_THROTTLE_READ": "1000/hour",
    "MEMORYHUB_THROTTLE_ANONYMOUS": "2/hour",
}


def test_tool_calls_spend_the_tokens_write_budget_and_reads_their_own(mcp_server: Server, team: Team) -> None:
    token = make_agent(team, "busy-bot", ["read", "write"]).token
    answers: list[tuple[bool, dict[str, Any]]] = []

    async def main() -> None:
        async with mcp_client(mcp_server, token, surface="full") as client:
            for n in range(3):
                saved = await client.call_tool("memory_save", {"key": f"k-{n}", "content": f"Fact {n}."})
                answers.append((saved.is_error, structured(saved)))
            # A search is a read, whatever it costs: the write budget does not apply.
            found = await client.call_tool("memory_search", {"query": "fact", "mode": "keyword"})
            answers.append((found.is_error, structured(found)))

    run_async(main())

    assert [is_error for is_error, _ in answers] == [False, False, True, False]
    refused = answers[2][1]
    assert refused["error"] == "rate_limited" and refused["retry_after"] >= 1
    assert refused["detail"] == f"too many requests; retry in {refused['retry_after']} seconds"


def test_requests_without_a_valid_token_run_into_the_address_budget(mcp_server: Server) -> None:
    headers = {"Authorization": "Bearer mh_guess", "Accept": "application/json, text/event-stream"}
    statuses = [httpx.post(mcp_server.mcp_url, json={}, headers=headers, timeout=30) for _ in range(3)]
    assert [r.status_code for r in statuses] == [401, 401, 429]
    assert statuses[2].json()["error"] == "rate_limited"
    assert int(statuses[2].headers["Retry-After"]) >= 1
