"""The cast: a team with its agents (write, read-only, admin) and an outsider team."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from rest_framework.test import APIClient

from core.redis_outage import forget_redis_failures
from teams import services
from teams.models import Team
from teams.scope import dangerously_bypass_team_scope
from tests.factories import TeamFactory

pytest_plugins = ["tests.tiers", "tests.db_roles", "tests.worker", "tests.freshness.anchor_site"]


@pytest.fixture(autouse=True)
def _redis_not_marked_down() -> None:
    """A test that met a Redis failure (core.redis_outage) must not make the next one skip Redis."""
    forget_redis_failures()


@dataclass
class Agent:
    team: Team
    token: str
    client: APIClient

    def url(self, path: str = "", team: str | None = None) -> str:
        return f"/api/v1/teams/{team or self.team.slug}/{path}"


def make_agent(team: Team, name: str, scopes: list[str]) -> Agent:
    issued = services.create_token(team=team, name=name, scopes=scopes, actor="test")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.raw}")
    return Agent(team=team, token=issued.raw, client=client)


@pytest.fixture
def team(db: None) -> Team:
    return TeamFactory(slug="alpha", name="Alpha")


@pytest.fixture
def other_team(db: None) -> Team:
    return TeamFactory(slug="bravo", name="Bravo")


@pytest.fixture
def member(team: Team) -> Agent:
    return make_agent(team, "writer-bot", ["read", "write"])


@pytest.fixture
def readonly_member(team: Team) -> Agent:
    return make_agent(team, "reader-bot", ["read"])


@pytest.fixture
def admin_member(team: Team) -> Agent:
    return make_agent(team, "admin-bot", ["admin"])


@pytest.fixture
def outsider(other_team: Team) -> Agent:
    return make_agent(other_team, "bravo-bot", ["read", "write", "admin"])


@contextmanager
def operator_view() -> Iterator[None]:
    """See every team's rows, for assertions about database state."""
    with dangerously_bypass_team_scope(reason="test assertion"):
        yield


@pytest.fixture
def save(django_capture_on_commit_callbacks: Any):  # type: ignore[no-untyped-def]
    """Save through the API and run what the save enqueued after commit (indexing),
    as the in-process default does in production."""

    def save(agent: Agent, key: str, content: str, **extra: Any) -> dict[str, Any]:
        with django_capture_on_commit_callbacks(execute=True):
            response = agent.client.post(
                agent.url("memories/"), {"key": key, "content": content, **extra}, format="json"
            )
        assert response.status_code == 201, response.content
        return response.json()

    return save


def search(agent: Agent, query: str, **extra: Any) -> dict[str, Any]:
    response = agent.client.post(agent.url("search/"), {"query": query, **extra}, format="json")
    assert response.status_code == 200, response.content
    return response.json()
