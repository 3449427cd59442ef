"""The load drill's smoke version (`make drill` runs the full one): a few agents of two
teams for a few seconds against a live server, then every acknowledged write checked."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from teams.services import create_team, create_token
from tests.drill.load import AgentPlan, Write, drive, failures, summarize, verify

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]  # the load drill's smoke run


def plans_for(teams: int, agents_per_team: int) -> list[AgentPlan]:
    plans = []
    for t in range(teams):
        team = create_team(slug=f"smoke-{t}", name=f"Smoke {t}")
        for a in range(agents_per_team):
            token = create_token(team=team, name=f"agent-{a}", scopes=["read", "write"], actor="test").raw
            plans.append(AgentPlan(team=team.slug, token=token, name=f"agent{t}x{a}"))
    return plans


def test_a_short_load_drill_loses_no_write_and_shows_no_team_another_teams_data(live_server: Any) -> None:
    plans = plans_for(teams=2, agents_per_team=3)

    # In a thread of its own: once the browser tests have run in this process, Playwright's
    # event loop runs in the main thread, and asyncio.run (in drive) refuses to start there.
    with ThreadPoolExecutor(max_workers=1) as executor:
        outcome, elapsed = executor.submit(drive, live_server.url, plans, seconds=6, max_requests=40).result()
    report = summarize(outcome, elapsed)
    report["verification"] = verify(live_server.url, plans, outcome)

    assert report["verification"]["acknowledged_writes"] > 0
    assert {op for op, _ in outcome.statuses} == {"search", "save", "injection", "read"}
    assert failures(report) == []

    # The checks can fail: a write acknowledged but not held is reported as lost.
    (_team, key), writes = next(iter(outcome.writes.items()))
    writes.append(Write("a text the service never received", acknowledged=True))
    tampered = verify(live_server.url, plans, outcome)
    assert tampered["lost_or_altered"] and tampered["wrong_active"]
    assert any(key in finding for finding in tampered["lost_or_altered"])
