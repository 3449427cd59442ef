"""The prune job: proposes archiving entries that are old, never read and
never rated, bounded per run, team by team in each team's scope, idempotent; the
proposal is archived by resolving it and the entry restored by one call. Nothing is
archived or deleted by the job itself."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db.models import F
from django.utils import timezone

from freshness import services
from freshness.models import Nudge, NudgeKind, NudgeState
from memories.models import Memory
from tests.conftest import Agent, operator_view


def age(memory_id: str, days: float) -> None:
    with operator_view():
        past = timezone.now() - dt.timedelta(days=days)
        Memory.objects.filter(id=memory_id).update(created_at=past, last_confirmed_at=past)


def prune_nudges(team: Any) -> list[Nudge]:
    with operator_view():
        return list(Nudge.objects.filter(team=team, kind=NudgeKind.PRUNE).select_related("memory"))


def test_only_old_unread_unrated_entries_are_proposed_once(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    stale = save(member, "old-idea", "We could shard the sessions table by month.")
    read = save(member, "old-read", "The VPN config lives in the ops vault.")
    rated = save(member, "old-rated", "Releases go out on Tuesdays.")
    who = save(member, "who", "I am the release agent.", type="identity")
    young = save(member, "young", "Ada is on call this week.")
    for saved in (stale, read, rated, who):
        age(saved["id"], 200)
    age(young["id"], 30)
    with operator_view():
        Memory.objects.filter(id=read["id"]).update(access_count=1, last_accessed_at=timezone.now())
        Memory.objects.filter(id=rated["id"]).update(upvotes=1)

    first = services.propose_prunes()
    second = services.propose_prunes()

    assert (first.checked, first.proposed, first.errors) == (1, 1, 0)
    assert (second.checked, second.proposed) == (0, 0)
    (nudge,) = prune_nudges(member.team)
    assert nudge.memory.key == "old-idea" and nudge.state == NudgeState.OPEN
    assert "never read or rated" in nudge.message and nudge.details["days_old"] == 200
    with operator_view():
        assert Memory.objects.filter(team=member.team, is_active=True).count() == 5


def test_a_run_is_bounded_and_the_next_goes_on(member: Agent, outsider: Agent, save) -> None:  # type: ignore[no-untyped-def]
    for agent in (member, outsider):
        for n in range(3):
            age(save(agent, f"idea-{n}", f"Idea number {n} about {agent.team.slug} caching.")["id"], 365)

    first = services.propose_prunes(limit=4)
    second = services.propose_prunes(limit=4, start_after_team=first.resume_after_team)

    assert (first.proposed, second.proposed) == (4, 2)
    assert len(prune_nudges(member.team)) == 3 and len(prune_nudges(outsider.team)) == 3
    with operator_view():
        # Each team's nudges name only its own entries.
        assert not Nudge.objects.exclude(team_id=F("memory__team_id")).exists()


def test_archive_then_restore_through_the_api(member: Agent, outsider: Agent, save) -> None:  # type: ignore[no-untyped-def]
    saved = save(member, "old-idea", "We could shard the sessions table by month.")
    age(saved["id"], 200)
    services.propose_prunes()
    (nudge,) = prune_nudges(member.team)

    outsider_try = outsider.client.post(
        outsider.url(f"nudges/{nudge.id}/resolve/"), {"action": "archive"}, format="json"
    )
    wrong = member.client.post(
        member.url(f"nudges/{nudge.id}/resolve/"), {"action": "supersede"}, format="json"
    )
    archived = member.client.post(
        member.url(f"nudges/{nudge.id}/resolve/"), {"action": "archive"}, format="json"
    )

    assert outsider_try.status_code == 404 and b"old-idea" not in outsider_try.content
    assert wrong.status_code == 400 and wrong.json()["error"] == "action_not_applicable"
    assert archived.status_code == 200 and archived.json()["resolution"] == "archive"
    with operator_view():
        row = Memory.objects.get(id=saved["id"])
    assert row.archived_at is not None and row.archived_by == "writer-bot" and not row.is_active
    listed = member.client.get(member.url("memories/")).json()["results"]
    with_archived = member.client.get(member.url("memories/"), {"include_archived": "true"}).json()["results"]
    assert listed == [] and [m["state"] for m in with_archived] == ["archived"]
    # An archived entry is never proposed again (nor anything deleted).
    assert services.propose_prunes().proposed == 0

    restored = member.client.post(member.url("memories/old-idea/restore/"), {}, format="json")

    assert restored.status_code == 200 and restored.json()["id"] == saved["id"]
    assert [m["key"] for m in member.client.get(member.url("memories/")).json()["results"]] == ["old-idea"]
    # A dismissed or resolved proposal is not made again for the same version.
    assert services.propose_prunes().proposed == 0
