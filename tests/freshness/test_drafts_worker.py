"""A contradicting draft, accepted, goes through the ordinary save: a real Celery worker
(tests/worker.py) indexes the new entry and the contradiction flow opens its nudge,
linking the entry the draft was flagged against. Another team sees none of it."""

from __future__ import annotations

from typing import Any

import pytest

from freshness.models import Draft, Nudge, NudgeKind
from tests.conftest import Agent, operator_view
from tests.worker import CeleryProcess, wait_for, wait_for_index_state

pytestmark = pytest.mark.django_db(transaction=True)


def test_accepting_a_contradicting_draft_raises_the_contradiction_on_the_worker(
    worker: CeleryProcess, member: Agent, outsider: Agent
) -> None:
    old = member.client.post(
        member.url("memories/"),
        {"key": "billing-provider", "content": "We use Stripe for billing."},
        format="json",
    )
    assert old.status_code == 201
    wait_for_index_state(member.team.id, "billing-provider")

    extracted = member.client.post(
        member.url("drafts/extract/"),
        {"transcript": "Last week we moved billing from Stripe to Paddle.", "source_session": "s-9"},
        format="json",
    )
    (draft,) = extracted.json()["drafts"]
    assert draft["conflict"] == "contradiction" and draft["conflict_entry"]["id"] == old.json()["id"]

    accepted = member.client.post(member.url(f"drafts/{draft['id']}/accept/"), {}, format="json")
    assert accepted.status_code == 200, accepted.content
    new_key = accepted.json()["key"]
    wait_for_index_state(member.team.id, new_key)

    def nudges() -> list[Any]:
        with operator_view():
            return list(
                Nudge.objects.filter(kind=NudgeKind.CONTRADICTION).values(
                    "team_id", "memory_id", "other_memory_id"
                )
            )

    wait_for(lambda: bool(nudges()), 30, "the contradiction nudge")
    (nudge,) = nudges()
    assert nudge["team_id"] == member.team.id
    assert str(nudge["other_memory_id"]) == old.json()["id"]
    assert str(nudge["memory_id"]) == accepted.json()["memory_entry"]["id"]
    listed = member.client.get(member.url("nudges/"), {"kind": "contradiction"}).json()["results"]
    assert [n["keys"] for n in listed] == [[new_key, "billing-provider"]]
    assert outsider.client.get(outsider.url("nudges/"), {"state": "all"}).json()["results"] == []
    assert outsider.client.get(outsider.url("drafts/"), {"state": "all"}).json()["results"] == []
    with operator_view():
        assert Draft.objects.get(id=draft["id"]).memory_id is not None
