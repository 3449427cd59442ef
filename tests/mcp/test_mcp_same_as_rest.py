"""A tool does what its REST endpoint does, because both map their arguments with the
same use case: where the two copies had drifted, MCP now honours what REST honours.
In-process, on the server's own path (tests.mcp.conftest.call_in_process)."""

from __future__ import annotations

from typing import Any

import pytest

from memories.writes import archive_memory, save_memory
from teams.scope import team_scope
from tests.conftest import Agent
from tests.mcp.conftest import call_in_process

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def archived(member: Agent) -> None:
    """Two entries on caching, one of them archived."""
    with team_scope(member.team.id):
        save_memory(team=member.team, key="cache-pages", content="We cache rendered pages.", updated_by="t")
        save_memory(
            team=member.team, key="cache-api", content="We cache API answers for a minute.", updated_by="t"
        )
        archive_memory(team=member.team, key="cache-pages", archived_by="t")


def mcp(agent: Agent, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    status, body = call_in_process(agent.token, tool, arguments)
    assert status == 200 and "error" not in body, body
    return body


def test_search_honours_include_archived_as_rest_does(member: Agent, archived: None) -> None:
    def keys(body: dict[str, Any]) -> set[str]:
        return {result["key"] for result in body["results"]}

    for include_archived, expected in ((False, {"cache-api"}), (True, {"cache-api", "cache-pages"})):
        arguments = {"query": "cache", "mode": "keyword", "include_archived": include_archived}
        rest = member.client.post(member.url("search/"), arguments, format="json").json()
        assert keys(mcp(member, "memory_search", arguments)) == keys(rest) == expected


def test_list_honours_include_archived_as_rest_does(member: Agent, archived: None) -> None:
    listed = mcp(member, "memory_list", {"include_archived": True})
    rest = member.client.get(member.url("memories/"), {"include_archived": "true"}).json()
    assert (
        {m["key"] for m in listed["results"]}
        == {m["key"] for m in rest["results"]}
        == {"cache-api", "cache-pages"}
    )


def test_history_shows_confirmations_as_rest_does(member: Agent) -> None:
    mcp(member, "memory_save", {"key": "deploys", "content": "Deploys wait for the canary."})
    mcp(member, "memory_confirm", {"key": "deploys", "note": "checked the pipeline"})

    history = mcp(member, "memory_history", {"key": "deploys"})["history"]
    rest = member.client.get(member.url("memories/deploys/history/")).json()["history"]
    assert [(e["kind"], e["reason"]) for e in history] == [(e["kind"], e["reason"]) for e in rest]
    assert ("confirmed", "checked the pipeline") in [(e["kind"], e["reason"]) for e in history]
