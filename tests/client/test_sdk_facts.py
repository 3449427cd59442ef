"""The SDK's fact methods against the real server (the MCP tests' gunicorn on this run's
database): fact_set, fact_get, facts, fact_history and fact_delete, sync and async;
refusals are the SDK's exceptions with the server's code; a read-only token sees no
`high` fact; another team's facts are out of reach."""

from __future__ import annotations

from typing import Any

import pytest

from memoryhub_client import (
    AsyncMemoryHub,
    Conflict,
    Forbidden,
    InvalidRequest,
    MemoryHub,
    NotFound,
    cursor_of,
)
from teams.models import Team
from tests.conftest import make_agent
from tests.mcp.conftest import Server, run_async

pytestmark = pytest.mark.django_db(transaction=True)


def hub_of(server: Server, token: str, team: str = "alpha") -> MemoryHub:
    return MemoryHub(server.base, token, team=team)


def test_set_get_list_history_and_delete_a_fact(mcp_server: Server, team: Team) -> None:
    token = make_agent(team, "sdk-bot", ["read", "write"]).token
    with hub_of(mcp_server, token) as hub:
        created = hub.fact_set("payments", "provider", "Paddle", domains=["billing"])
        unchanged = hub.fact_set("payments", "provider", "Paddle")
        with pytest.raises(Conflict) as refused:
            hub.fact_set("payments", "provider", "Stripe")
        superseded = hub.fact_set("payments", "provider", "Stripe", reason="moved in March")
        hub.fact_set("project-alpha", "database", "Postgres 16", scope="project:alpha")
        got = hub.fact_get("payments", "provider")
        then = hub.fact_get("payments", "provider", as_of=created["created_at"])
        by_domain = hub.facts(domain="billing")
        by_scope = hub.facts(scope="project:alpha")
        first = hub.facts(limit=1)
        history = hub.fact_history("payments", "provider", limit=1)
        older = hub.fact_history("payments", "provider", limit=1, cursor=cursor_of(history["next"]))
        hub.fact_delete("payments", "provider")
        with pytest.raises(NotFound):
            hub.fact_get("payments", "provider")
        with pytest.raises(NotFound):
            hub.fact_delete("payments", "provider")
        with pytest.raises(InvalidRequest) as bad:
            hub.fact_set("payments", "provider", "x", confidence=2)

    assert created["outcome"] == "created" and unchanged["outcome"] == "unchanged"
    assert refused.value.code == "conflict" and refused.value.body["current"]["value"] == "Paddle"
    assert superseded["outcome"] == "superseded" and superseded["supersede_reason"] == "moved in March"
    assert got["value"] == "Stripe" and then["value"] == "Paddle" and got["domains"] == ["billing"]
    assert [f["entity"] for f in by_domain.results] == ["payments"]
    assert [f["value"] for f in by_scope.results] == ["Postgres 16"]
    assert len(first.results) == 1 and first.next_cursor is not None
    assert [v["value"] for v in history["history"]] == ["Stripe"]
    assert [v["state"] for v in older["history"]] == ["superseded"]
    assert bad.value.status == 400


def test_the_async_client_makes_the_same_fact_calls(mcp_server: Server, team: Team) -> None:
    token = make_agent(team, "async-bot", ["read", "write"]).token

    async def scenario() -> dict[str, Any]:
        async with AsyncMemoryHub(mcp_server.base, token, team="alpha") as hub:
            await hub.fact_set("ci", "provider", "GitHub Actions")
            got = await hub.fact_get("ci", "provider")
            listed = await hub.facts(entity="ci")
            history = await hub.fact_history("ci", "provider")
            await hub.fact_delete("ci", "provider")
            return {"got": got, "listed": listed, "history": history}

    answers = run_async(scenario())
    assert answers["got"]["value"] == "GitHub Actions"
    assert [f["key"] for f in answers["listed"].results] == ["provider"]
    assert [v["state"] for v in answers["history"]["history"]] == ["active"]


def test_high_facts_stay_from_read_only_tokens_and_other_teams(
    mcp_server: Server, team: Team, other_team: Team
) -> None:
    writer = make_agent(team, "writer", ["read", "write"]).token
    reader = make_agent(team, "reader", ["read"]).token
    outsider = make_agent(other_team, "bravo", ["read", "write"]).token
    with hub_of(mcp_server, writer) as hub:
        hub.fact_set("vault", "region", "alpha-secret-eu-9", sensitivity="high")
    with hub_of(mcp_server, reader) as hub:
        with pytest.raises(NotFound):
            hub.fact_get("vault", "region")
        assert hub.facts().results == []
        with pytest.raises(Forbidden):
            hub.fact_set("vault", "region", "x", reason="y")
    with hub_of(mcp_server, outsider, team="alpha") as hub:
        with pytest.raises(NotFound) as foreign:
            hub.fact_get("vault", "region")
    assert "alpha-secret-eu-9" not in str(foreign.value.body)
    with hub_of(mcp_server, outsider, team="bravo") as hub:
        with pytest.raises(NotFound):
            hub.fact_get("vault", "region")
        assert hub.facts().results == []
