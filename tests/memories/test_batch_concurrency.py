"""Two batches of one team over the same keys, in opposite orders, on real connections:
entries are locked in key order whatever their order in the
request, so neither batch waits on the other in a cycle (no deadlock, no 5xx), and each
key ends with one active entry and an unbroken chain."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connections
from rest_framework.test import APIClient

from memories.models import Memory
from search import hooks as search_hooks
from teams.models import Team
from tests.conftest import make_agent, operator_view

pytestmark = pytest.mark.django_db(transaction=True)

KEYS = [f"key-{i:03d}" for i in range(120)]


def test_two_batches_over_the_same_keys_in_opposite_orders_both_go_through(
    team: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Not this test's subject, and most of its time: freshness's contradiction pass over
    # 240 texts that differ by a key, run in-process once each batch has committed.
    monkeypatch.setattr(search_hooks.memories_indexed, "_receivers", [])
    # Two tokens: one token's writes run one at a time (its write slot), two tokens' do not.
    agents = [make_agent(team, f"bot-{n}", ["read", "write"]) for n in range(2)]
    orders = [KEYS, list(reversed(KEYS))]
    barrier = threading.Barrier(2)
    answers: list[Any] = [None, None]

    def worker(n: int) -> None:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {agents[n].token}")
        entries = [
            {"key": k, "content": f"{k} by writer {n}", "supersede_reason": f"writer {n}"} for k in orders[n]
        ]
        try:
            barrier.wait(timeout=30)
            answers[n] = client.post(agents[n].url("memories/batch/"), {"entries": entries}, format="json")
        finally:
            connections.close_all()

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    for answer in answers:
        assert answer is not None and answer.status_code == 200, answer and answer.content[:300]
        assert answer.json()["counts"]["error"] == 0
    with operator_view():
        rows = list(Memory.objects.filter(team=team))
    assert len(rows) == 2 * len(KEYS)
    for key in KEYS:
        versions = [row for row in rows if row.key == key]
        assert sum(row.is_active for row in versions) == 1
        assert sorted(row.supersedes_id is None for row in versions) == [False, True]
