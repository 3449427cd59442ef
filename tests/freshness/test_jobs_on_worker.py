"""Freshness on real Celery processes: the worker that indexes an
entry finds its contradiction, which is resolved by supersede; beat sends the prune job,
whose proposal is archived and restored. Two teams each time: a team's entries are never
judged against the other's, each job runs in each team's scope, and neither team's agent
sees the other's nudges. (The due job on beat: test_beat.py; anchors: test_anchor_checks.py.)"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import pytest
from django.utils import timezone

from freshness.models import Nudge, NudgeKind, NudgeState
from memories.models import Memory
from teams.models import Team
from tests.conftest import Agent, operator_view
from tests.worker import CeleryProcess, schedule_every_second, wait_for, wait_for_index_state

JOB_SECONDS = 60.0  # a hang detector
OLD_BILLING = "We use Stripe for billing."
NEW_BILLING = "We moved billing from Stripe to Paddle."


def nudges(kind: str) -> list[Nudge]:
    with operator_view():
        return list(Nudge.objects.filter(kind=kind).select_related("memory", "other_memory"))


def post(agent: Agent, key: str, content: str, **extra: Any) -> dict[str, Any]:
    response = agent.client.post(
        agent.url("memories/"), {"key": key, "content": content, **extra}, format="json"
    )
    assert response.status_code == 201, response.content
    body: dict[str, Any] = response.json()
    return body


@pytest.mark.django_db(transaction=True)
def test_the_worker_that_indexes_an_entry_raises_its_contradiction_which_supersede_resolves(
    worker: CeleryProcess, member: Agent, outsider: Agent
) -> None:
    old = post(member, "billing", OLD_BILLING)
    wait_for_index_state(member.team.id, "billing")
    # The other team holds the same old belief: it must never be linked to this team's.
    theirs = post(outsider, "billing", OLD_BILLING)
    wait_for_index_state(outsider.team.id, "billing")
    new = post(member, "billing-now", NEW_BILLING, allow_duplicate=True)
    wait_for_index_state(member.team.id, "billing-now")

    wait_for(lambda: len(nudges(NudgeKind.CONTRADICTION)) == 1, JOB_SECONDS, "the contradiction nudge")
    (nudge,) = nudges(NudgeKind.CONTRADICTION)
    assert nudge.team_id == member.team.id
    assert (str(nudge.memory_id), str(nudge.other_memory_id)) == (new["id"], old["id"])
    assert theirs["id"] not in body_of(outsider, "nudges/") + body_of(member, "nudges/")
    assert str(nudge.id) not in body_of(outsider, "nudges/")

    resolved = member.client.post(
        member.url(f"nudges/{nudge.id}/resolve/"), {"action": "supersede"}, format="json"
    )

    assert resolved.status_code == 200, resolved.content
    with operator_view():
        older, newer, other_team = (Memory.objects.get(id=i) for i in (old["id"], new["id"], theirs["id"]))
    assert older.archived_at is not None and not older.is_active
    assert newer.is_active and newer.contradicted_at is None
    assert other_team.is_active and other_team.contradicted_at is None


@pytest.mark.django_db(transaction=True)
def test_beat_sends_the_prune_job_for_every_team_and_the_proposal_is_archived_and_restored(
    start_worker: Callable[..., CeleryProcess],
    start_beat: Callable[..., CeleryProcess],
    member: Agent,
    outsider: Agent,
    team: Team,
    other_team: Team,
) -> None:
    stale = {}
    for agent in (member, outsider):
        saved = post(agent, "old-idea", f"{agent.team.slug} could shard the sessions table by month.")
        stale[agent.team.id] = saved["id"]
    with operator_view():
        past = timezone.now() - dt.timedelta(days=200)
        Memory.objects.filter(id__in=stale.values()).update(created_at=past, last_confirmed_at=past)
    schedule_every_second("freshness.propose_prunes")

    worker = start_worker()
    start_beat(worker.env["MEMORYHUB_QUEUE"])

    wait_for(lambda: len(nudges(NudgeKind.PRUNE)) == 2, JOB_SECONDS, "a prune proposal in each team")
    proposals = {n.team_id: n for n in nudges(NudgeKind.PRUNE)}
    assert {t: str(n.memory_id) for t, n in proposals.items()} == stale
    mine, theirs = proposals[team.id], proposals[other_team.id]
    assert str(theirs.id) not in body_of(member, "nudges/") and other_team.slug not in body_of(
        member, "nudges/"
    )
    refused = member.client.post(
        member.url(f"nudges/{theirs.id}/resolve/"), {"action": "archive"}, format="json"
    )
    assert refused.status_code == 404 and other_team.slug.encode() not in refused.content

    archived = member.client.post(
        member.url(f"nudges/{mine.id}/resolve/"), {"action": "archive"}, format="json"
    )

    assert archived.status_code == 200, archived.content
    with operator_view():
        assert Memory.objects.get(id=stale[team.id]).archived_at is not None
        assert Nudge.objects.get(id=theirs.id).state == NudgeState.OPEN
    assert member.client.get(member.url("memories/old-idea/")).status_code == 404

    restored = member.client.post(member.url("memories/old-idea/restore/"), {}, format="json")

    assert restored.status_code == 200 and restored.json()["id"] == stale[team.id]
    assert member.client.get(member.url("memories/old-idea/")).json()["id"] == stale[team.id]


def body_of(agent: Agent, path: str) -> str:
    response = agent.client.get(agent.url(path))
    assert response.status_code == 200, response.content
    return response.content.decode()
