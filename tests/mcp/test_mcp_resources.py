"""Resources and prompts through the real server: the injection block and each active
memory by URI, the "remember what we learned" prompt, and another team's URIs not found
with nothing of that team in the error."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp import MCPError

from memories.writes import save_memory
from teams.models import Team
from teams.scope import team_scope
from tests.conftest import make_agent
from tests.mcp.conftest import Server, mcp_client, run_async

pytestmark = pytest.mark.django_db(transaction=True)


def save(team: Team, key: str, content: str, **extra: Any) -> None:
    with team_scope(team.id):
        save_memory(team=team, key=key, content=content, updated_by="test", allow_duplicate=True, **extra)


def test_memories_and_the_injection_block_are_resources(mcp_server: Server, team: Team) -> None:
    save(team, "who-we-are", "We are the payments team.", type_name="identity")
    save(team, "api-style", "The API answers JSON errors in one shape.", project="api", type_name="decision")
    token = make_agent(team, "reader", ["read"]).token
    seen: dict[str, Any] = {}

    async def main() -> None:
        async with mcp_client(mcp_server, token) as client:
            seen["list"] = (await client.list_resources()).resources
            seen["templates"] = (await client.list_resource_templates()).resource_templates
            seen["memory"] = (await client.read_resource("memoryhub://team/alpha/memory/api-style")).contents
            seen["block"] = (
                await client.read_resource("memoryhub://team/alpha/injection?project=web")
            ).contents
            with pytest.raises(MCPError) as missing:
                await client.read_resource("memoryhub://team/alpha/memory/never-saved")
            seen["missing"] = missing.value.error
            with pytest.raises(MCPError) as malformed:
                await client.read_resource("https://example.com/memory/x")
            seen["malformed"] = malformed.value.error

    run_async(main())

    assert [r.uri for r in seen["list"]] == [
        "memoryhub://team/alpha/injection",
        "memoryhub://team/alpha/memory/api-style",
        "memoryhub://team/alpha/memory/who-we-are",
    ]
    assert seen["list"][1].description == "decision: The API answers JSON errors in one shape."
    assert {t.uri_template for t in seen["templates"]} == {
        "memoryhub://team/alpha/injection{?project}",
        "memoryhub://team/alpha/memory/{key}",
    }
    assert seen["memory"][0].text == "The API answers JSON errors in one shape."
    block = seen["block"][0].text
    assert "We are the payments team." in block and "JSON errors" not in block  # another project's
    assert seen["missing"].code == -32002
    assert seen["missing"].data == {"error": "not_found", "detail": "no active memory under this key"}
    assert seen["malformed"].data["error"] == "invalid"


def test_another_teams_resources_are_not_found(mcp_server: Server, team: Team, other_team: Team) -> None:
    save(other_team, "bravo-plan", "The bravo code word is walrus-lantern-88.", type_name="identity")
    token = make_agent(team, "alpha-bot", ["read"]).token
    answers: list[str] = []

    async def main() -> None:
        async with mcp_client(mcp_server, token) as client:
            answers.append(json.dumps([r.uri for r in (await client.list_resources()).resources]))
            for uri in ("memoryhub://team/bravo/memory/bravo-plan", "memoryhub://team/bravo/injection"):
                with pytest.raises(MCPError) as refused:
                    await client.read_resource(uri)
                assert refused.value.error.data == {"error": "not_found", "detail": "not found"}
                answers.append(json.dumps(refused.value.error.model_dump()))
            block = await client.read_resource("memoryhub://team/alpha/injection")
            answers.append(json.dumps(block.model_dump()))

    run_async(main())
    assert not any("walrus-lantern-88" in answer for answer in answers)


def test_the_remember_prompt_asks_for_lessons_in_the_learnings_shape(mcp_server: Server, team: Team) -> None:
    token = make_agent(team, "reader", ["read"]).token
    seen: dict[str, Any] = {}

    async def main() -> None:
        async with mcp_client(mcp_server, token, surface="full") as client:
            seen["prompts"] = (await client.list_prompts()).prompts
            seen["prompt"] = await client.get_prompt(
                "remember_what_we_learned", {"topic": "the deploy outage"}
            )
        # It asks for learning_record calls: the core list, without that tool, has no prompt.
        async with mcp_client(mcp_server, token) as client:
            seen["core"] = (await client.list_prompts()).prompts
            with pytest.raises(MCPError) as refused:
                await client.get_prompt("remember_what_we_learned", {})
            seen["refused"] = refused.value.error.message

    run_async(main())

    assert [p.name for p in seen["prompts"]] == ["remember_what_we_learned"]
    assert seen["core"] == []
    assert seen["refused"] == "remember_what_we_learned is on the full tool list only, at /mcp/full/"
    text = seen["prompt"].messages[0].content.text
    assert "about the deploy outage" in text and "learning_record" in text
    assert all(field in text for field in ('"topic"', '"claim"', '"confidence"', '"domains"', '"verified"'))
