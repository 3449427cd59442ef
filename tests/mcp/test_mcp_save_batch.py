"""memory_save_batch: the REST batch save as an MCP tool, through the
real server (gunicorn, /mcp/) and the SDK's client: one result per entry in order, a key
derived when left out, an entry's error in REST's error shape, sending again unchanged."""

from __future__ import annotations

from typing import Any

import pytest

from memories.models import Memory
from teams.models import Team
from tests.conftest import make_agent, operator_view
from tests.mcp.conftest import Server, mcp_client, run_async, structured

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_batch_saves_each_entry_and_reports_it_in_order(mcp_server: Server, team: Team) -> None:
    token = make_agent(team, "batch-bot", ["read", "write"]).token
    entries = [
        {"key": "deploy-rule", "content": "Deploys wait for the canary."},
        {"content": "Postgres upgrades need a fresh base backup first."},
        {"key": "typed", "content": "x", "type": "poem"},
        {"key": "deploy-rule", "content": "Named twice."},
    ]
    answers: list[Any] = []

    async def main() -> None:
        async with mcp_client(mcp_server, token, surface="full") as client:
            for _ in range(2):
                result = await client.call_tool("memory_save_batch", {"entries": entries})
                assert not result.is_error
                answers.append(structured(result))
            refused = await client.call_tool("memory_save_batch", {"entries": []})
            answers.append((refused.is_error, structured(refused)))

    run_async(main())

    first, again, (is_error, empty) = answers
    assert [r["status"] for r in first["results"]] == ["created", "created", "error", "error"]
    assert first["results"][1]["key"].startswith("mem:postgres-upgrades-need-a-fresh-base-back:")
    assert first["results"][2]["error"]["error"] == "unknown_type"
    assert first["results"][3]["error"]["error"] == "duplicate_key_in_batch"
    assert [r["status"] for r in again["results"]] == ["unchanged", "unchanged", "error", "error"]
    assert is_error and empty["error"] == "invalid"
    with operator_view():
        memory = Memory.objects.get(team=team, key="deploy-rule")
    assert memory.updated_by == "batch-bot" and str(memory.id) == first["results"][0]["id"]


def test_a_read_only_token_may_not_call_it(mcp_server: Server, team: Team) -> None:
    token = make_agent(team, "reader-bot", ["read"]).token
    answers: list[Any] = []

    async def main() -> None:
        async with mcp_client(mcp_server, token, surface="full") as client:
            result = await client.call_tool("memory_save_batch", {"entries": [{"key": "a", "content": "b"}]})
            answers.append((result.is_error, structured(result)))

    run_async(main())

    assert answers[0][0] and answers[0][1]["error"] == "forbidden"
    with operator_view():
        assert not Memory.objects.filter(team=team).exists()
