"""Concurrent writers of one key, through the API, on real connections: the advisory
lock and the partial unique index must leave one active entry and an unbroken chain."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from django.db import connections
from rest_framework.test import APIClient

from memories.models import Memory
from teams.models import Team
from tests.conftest import Agent, operator_view

THREADS = 32

pytestmark = pytest.mark.django_db(transaction=True)


def post_concurrently(agent: Agent, bodies: list[dict[str, str]]) -> list[int]:
    barrier = threading.Barrier(len(bodies))
    statuses: list[int] = [0] * len(bodies)

    def worker(index: int) -> None:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {agent.token}")
        try:
            barrier.wait(timeout=30)
            response = client.post(agent.url("memories/"), bodies[index], format="json")
            statuses[index] = response.status_code
        finally:
            connections.close_all()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(bodies))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return statuses


def chain(team: Team, key: str) -> list[Memory]:
    with operator_view():
        return list(Memory.objects.filter(team=team, key=key))


def test_32_writers_with_reasons_leave_one_active_entry_and_an_unbroken_chain(member: Agent) -> None:
    bodies = [
        {"key": "shared", "content": f"version {i}", "supersede_reason": f"writer {i}"}
        for i in range(THREADS)
    ]

    statuses = post_concurrently(member, bodies)

    assert statuses == [201] * THREADS
    rows = chain(member.team, "shared")
    assert len(rows) == THREADS
    active = [row for row in rows if row.is_active]
    assert len(active) == 1
    # Walk back from the active entry: every row is reached exactly once.
    by_id = {row.id: row for row in rows}
    seen = []
    current: Memory | None = active[0]
    while current is not None:
        seen.append(current.id)
        current = by_id.get(current.supersedes_id) if current.supersedes_id else None
    assert len(seen) == THREADS
    assert len(set(seen)) == THREADS
    roots = [row for row in rows if row.supersedes_id is None]
    assert len(roots) == 1
    # No two versions claim the same predecessor.
    assert max(Counter(row.supersedes_id for row in rows if row.supersedes_id).values()) == 1


def test_32_writers_of_a_new_key_without_reasons_get_one_201_and_409s(member: Agent) -> None:
    bodies = [{"key": "first-wins", "content": f"version {i}"} for i in range(THREADS)]

    statuses = post_concurrently(member, bodies)

    assert Counter(statuses) == {201: 1, 409: THREADS - 1}
    rows = chain(member.team, "first-wins")
    assert len(rows) == 1 and rows[0].is_active
