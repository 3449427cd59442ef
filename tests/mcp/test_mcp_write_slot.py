"""A token's writes over MCP take the same one write slot as over REST
(teams.throttling.write_slot): a memory_save while another write of the token runs
waits, then is a rate_limited tool error; reads go on."""

from __future__ import annotations

from typing import Any

import pytest

from teams.models import AgentToken, Team
from tests.api.test_write_slot import HeldSlot
from tests.conftest import make_agent, operator_view
from tests.mcp.conftest import Server, mcp_client, run_async, structured

pytestmark = pytest.mark.django_db(transaction=True)

SERVER_ENV = {"MEMORYHUB_WRITE_SLOT_WAIT_SECONDS": "0.2"}


def test_a_save_waits_for_the_tokens_write_in_flight(mcp_server: Server, team: Team) -> None:
    token = make_agent(team, "mcp-writer", ["read", "write"]).token
    with operator_view():
        held = HeldSlot(AgentToken.objects.get(team=team, name="mcp-writer").pk)
    answers: list[tuple[bool, dict[str, Any]]] = []

    async def call(tool: str, arguments: dict[str, Any]) -> None:
        async with mcp_client(mcp_server, token) as client:
            result = await client.call_tool(tool, arguments)
            answers.append((result.is_error, structured(result)))

    try:
        run_async(call("memory_save", {"key": "busy", "content": "Saved while another write runs."}))
        run_async(call("memory_list", {}))
        held.release()
        run_async(call("memory_save", {"key": "busy", "content": "Saved while another write runs."}))
    finally:
        held.close()

    assert [is_error for is_error, _ in answers] == [True, False, False]
    assert answers[0][1]["error"] == "rate_limited"
    assert answers[2][1]["key"] == "busy"
