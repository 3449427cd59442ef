"""The daily log page: the day to every member of the team, 404 to anyone else."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.test import Client

from tests.agents.test_daily_log import a_busy_day
from tests.conftest import Agent
from tests.dashboard.conftest import Cast


def page(client: Client, slug: str, **params: str) -> Any:
    return client.get(f"/teams/{slug}/log/", params)


def test_the_page_shows_the_day_to_every_member(member: Agent, cast: Cast) -> None:
    a_busy_day(member)

    response = page(cast.client("viewer"), member.team.slug)

    assert response.status_code == 200
    html = response.content.decode()
    assert "deploy-friday" in html and "holidays too" in html and "tidy the deploy rules" in html
    yesterday = (datetime.now(UTC) - timedelta(days=1)).date().isoformat()
    assert f"?date={yesterday}" in html


def test_the_page_refuses_a_bad_day_and_hides_other_teams(member: Agent, cast: Cast) -> None:
    a_busy_day(member)

    assert page(cast.client("viewer"), member.team.slug, date="not-a-day").status_code == 400
    foreign = page(cast.client("outsider"), member.team.slug)
    assert foreign.status_code == 404 and b"deploy-friday" not in foreign.content
