"""Concurrent first writes of one vault key, one token name or one
membership are decided by the database's unique constraints and answer 201/200/409,
never 500 (the check-then-insert let two writers both pass the check)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from rest_framework.test import APIClient

from core.errors import Conflict
from teams import memberships, services
from teams.models import AgentToken, Membership, Team, VaultEntry
from teams.scope import team_scope
from tests.conftest import make_agent, operator_view
from tests.factories import TeamFactory

THREADS = 6
ROUNDS = 4


def _race(work: Callable[[int], str]) -> list[str]:
    """Run `work(i)` in THREADS threads released at once; each has its own connection."""
    outcomes: list[str] = []
    barrier = threading.Barrier(THREADS)

    def run(i: int) -> None:
        try:
            barrier.wait(10)
            outcomes.append(work(i))
        except Exception as exc:  # recorded and asserted on below
            outcomes.append(f"error: {exc!r}")
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads), "a writer hung"
    return outcomes


@pytest.mark.django_db(transaction=True)
def test_concurrent_puts_of_a_new_vault_key_answer_one_201_and_200s() -> None:
    team = TeamFactory(slug="alpha")
    token = make_agent(team, "writer-bot", ["read", "write"]).token

    for round_ in range(ROUNDS):
        key = f"race-{round_}"

        def put(i: int, key: str = key) -> str:
            client = APIClient()
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
            response = client.put(f"/api/v1/teams/alpha/vault/{key}/", {"value": f"v{i}"}, format="json")
            return str(response.status_code)

        outcomes = _race(put)

        assert sorted(outcomes) == ["200"] * (THREADS - 1) + ["201"], outcomes
        with operator_view():
            assert VaultEntry.objects.filter(team=team, key=key).count() == 1


@pytest.mark.django_db(transaction=True)
def test_concurrent_creates_of_one_token_name_make_one_token_and_conflicts() -> None:
    team = TeamFactory(slug="alpha")

    for round_ in range(ROUNDS):
        name = f"bot-{round_}"

        def create(i: int, name: str = name) -> str:
            try:
                services.create_token(team=team, name=name, scopes=["read"], actor="t")
            except Conflict:
                return "conflict"
            return "created"

        outcomes = _race(create)

        assert sorted(outcomes) == ["conflict"] * (THREADS - 1) + ["created"], outcomes
        with operator_view():
            assert AgentToken.objects.filter(team=team, name=name).count() == 1


@pytest.mark.django_db(transaction=True)
def test_concurrent_adds_of_one_member_make_one_membership_and_conflicts() -> None:
    team = TeamFactory(slug="alpha")
    users = get_user_model().objects
    owner = users.create_user(username="olivia")
    with team_scope(team.id):
        by = Membership.objects.create(team=team, user=owner, role=Membership.Role.OWNER)

    for round_ in range(ROUNDS):
        username = f"newcomer-{round_}"
        users.create_user(username=username)

        def add(i: int, username: str = username, team: Team = team) -> str:
            try:
                with team_scope(team.id):
                    memberships.add_member(team=team, username=username, role="member", by=by)
            except Conflict:
                return "conflict"
            return "added"

        outcomes = _race(add)

        assert sorted(outcomes) == ["added"] + ["conflict"] * (THREADS - 1), outcomes
        with operator_view():
            assert Membership.objects.filter(team=team, user__username=username).count() == 1
