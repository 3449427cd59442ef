"""The due job: an entry past its team's window gets exactly one `due`
nudge however often the job runs; identity never does; two distinct confirmers earn the
longer window; every team is looked at in its own scope."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from freshness import services, tasks
from freshness.models import Nudge, NudgeKind, NudgeState
from memories.freshness import Freshness, FreshnessWindows, freshness_of
from memories.models import Memory
from memories.writes import confirm_memory
from teams.models import Team
from teams.scope import team_scope
from tests.conftest import Agent, operator_view


def age(memory_id: str, days: float) -> None:
    with operator_view():
        past = timezone.now() - dt.timedelta(days=days)
        Memory.objects.filter(id=memory_id).update(created_at=past, last_confirmed_at=past)


def nudges(team: Team, **filters: object) -> list[Nudge]:
    with operator_view():
        return list(Nudge.objects.filter(team=team, **filters).select_related("memory"))


def test_an_entry_past_its_window_gets_exactly_one_nudge_over_two_runs(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    stale = save(member, "payments", "We use Stripe.", type="decision")
    recent = save(member, "ci", "CI runs on GitHub Actions.", type="decision")
    age(stale["id"], 31)
    age(recent["id"], 29)

    first = services.mark_due_entries()
    second = services.mark_due_entries()

    (nudge,) = nudges(member.team)
    assert nudge.kind == NudgeKind.DUE and nudge.state == NudgeState.OPEN
    assert str(nudge.memory_id) == stale["id"]
    assert nudge.message.startswith("'payments' was last confirmed 31 days ago. Is it still true?")
    assert (first.checked, first.flagged, first.errors) == (1, 1, 0)
    assert (second.checked, second.flagged, second.errors) == (0, 0, 0)
    body = member.client.get(member.url("memories/payments/")).json()
    assert body["freshness"] == "due"


def test_identity_is_never_due(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    who = save(member, "who-we-are", "We are the payments team.", type="identity")
    age(who["id"], 3650)

    run = services.mark_due_entries()

    assert run.flagged == 0 and nudges(member.team) == []
    assert member.client.get(member.url("memories/who-we-are/")).json()["freshness"] == "fresh"


def test_lessons_have_ninety_days(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    lesson = save(member, "friday", "Never deploy on Friday.", type="lesson")
    age(lesson["id"], 60)
    assert services.mark_due_entries().flagged == 0
    age(lesson["id"], 91)
    assert services.mark_due_entries().flagged == 1


def test_two_distinct_confirmers_earn_the_ninety_day_window(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    shared = save(member, "shared", "Deploys go through the release branch.", type="context")
    alone = save(member, "alone", "The staging box is small.", type="context")
    with team_scope(member.team.id):
        confirm_memory(team=member.team, key="shared", confirmed_by="ada")
        confirm_memory(team=member.team, key="shared", confirmed_by="bob")
        confirm_memory(team=member.team, key="alone", confirmed_by="ada")
        confirm_memory(team=member.team, key="alone", confirmed_by="ada")
    age(shared["id"], 45)
    age(alone["id"], 45)

    services.mark_due_entries()

    assert [n.memory.key for n in nudges(member.team)] == ["alone"]


def test_windows_are_per_team(member: Agent, outsider: Agent, save) -> None:  # type: ignore[no-untyped-def]
    Team.objects.filter(id=outsider.team.id).update(freshness_context_days=None)
    ours = save(member, "ours", "Alpha context.")
    theirs = save(outsider, "theirs", "Bravo context.")
    age(ours["id"], 40)
    age(theirs["id"], 40)

    services.mark_due_entries()

    assert [n.memory.key for n in nudges(member.team)] == ["ours"]
    assert nudges(outsider.team) == []


def test_each_team_gets_nudges_only_for_its_own_entries(member: Agent, outsider: Agent, save) -> None:  # type: ignore[no-untyped-def]
    ours = save(member, "ours", "Alpha context.")
    theirs = save(outsider, "theirs", "Bravo context.")
    age(ours["id"], 40)
    age(theirs["id"], 40)

    run = services.mark_due_entries()

    assert run.flagged == 2 and run.teams == 2
    (alpha,) = nudges(member.team)
    (bravo,) = nudges(outsider.team)
    assert alpha.memory.team_id == member.team.id and bravo.memory.team_id == outsider.team.id


def test_a_run_is_bounded_and_the_next_goes_on_where_it_stopped(member: Agent, outsider: Agent, save) -> None:  # type: ignore[no-untyped-def]
    facts = ["The database is Postgres.", "Deploys happen on Tuesdays.", "The office cat is called Miso."]
    for n, fact in enumerate(facts):
        age(save(member, f"a{n}", fact, allow_duplicate=True)["id"], 40)
    age(save(outsider, "b0", "Bravo fact.")["id"], 40)

    first = services.mark_due_entries(limit=2)
    second = services.mark_due_entries(limit=2, start_after_team=first.resume_after_team)

    assert (first.checked, first.flagged) == (2, 2)
    assert (second.checked, second.flagged) == (2, 2)
    assert len(nudges(member.team)) == 3 and len(nudges(outsider.team)) == 1


def test_a_run_pages_past_entries_with_an_open_nudge_oldest_first(member: Agent, save, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Pages of DUE_PAGE_SIZE candidates: a page whose entries all have an open due
    nudge is passed over, not the end of the team; a dismissed nudge's entry is due
    again (only open nudges hold an entry back)."""
    monkeypatch.setattr(services, "DUE_PAGE_SIZE", 2)
    facts = [
        "The database is Postgres.",
        "Deploys happen on Tuesdays.",
        "The office cat is called Miso.",
        "Backups run at midnight.",
        "The wiki lives in Notion.",
    ]
    for n, fact in enumerate(facts):
        age(save(member, f"k{n}", fact, allow_duplicate=True)["id"], 60 - n)  # k0 the oldest

    def flagged_keys() -> list[str]:
        return sorted(n.memory.key for n in nudges(member.team, state=NudgeState.OPEN))

    first = services.mark_due_entries(limit=2)
    assert (first.checked, flagged_keys()) == (2, ["k0", "k1"])
    second = services.mark_due_entries(limit=2)
    assert (second.checked, flagged_keys()) == (2, ["k0", "k1", "k2", "k3"])
    (k1,) = [n for n in nudges(member.team) if n.memory.key == "k1"]
    with team_scope(member.team.id):
        services.resolve_nudge(team=member.team, nudge_id=k1.id, action="dismiss", actor="writer-bot")
    third = services.mark_due_entries(limit=5)
    assert (third.checked, third.flagged) == (2, 2)
    assert flagged_keys() == ["k0", "k1", "k2", "k3", "k4"]
    assert services.mark_due_entries().checked == 0


def test_the_jobs_never_read_entries_and_nudges_in_one_query(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    """The cause of the slow freshness pass (docs/freshness.md, "The due
    job"): an anti-join of a team's entries with its nudges is planned from the
    nudge table's statistics, which lag behind the thousands of nudges a run adds and
    know nothing of a team created since they were taken; the planner's nested loop
    then re-read every nudge of the team for each entry. The jobs read each table on
    its own, so no estimate can make a run quadratic."""
    age(save(member, "ours", "Alpha context.")["id"], 400)

    with CaptureQueriesContext(connection) as captured:
        due = services.mark_due_entries()
        prune = services.propose_prunes()

    assert (due.flagged, prune.proposed) == (1, 1)
    selects = [q["sql"] for q in captured.captured_queries if q["sql"].lstrip().upper().startswith("SELECT")]
    assert any("memories_memory" in sql for sql in selects) and any(
        "freshness_nudge" in sql for sql in selects
    )
    assert [sql for sql in selects if "memories_memory" in sql and "freshness_nudge" in sql] == []


def test_a_failing_team_is_counted_and_the_others_go_on(
    member: Agent, outsider: Agent, save, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    age(save(member, "ours", "Alpha context.")["id"], 40)
    age(save(outsider, "theirs", "Bravo context.")["id"], 40)
    real = services._mark_team_due

    def failing_for_alpha(team_id: int, **kwargs: object) -> tuple[int, int]:
        if team_id == member.team.id:
            raise RuntimeError("boom")
        return real(team_id, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(services, "_mark_team_due", failing_for_alpha)
    run = services.mark_due_entries()

    assert (run.errors, run.flagged) == (1, 1)
    assert nudges(member.team) == [] and len(nudges(outsider.team)) == 1


def test_the_celery_task_runs_the_job_and_keeps_its_cursor(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    age(save(member, "ours", "Alpha context.")["id"], 40)

    result = tasks.mark_due()

    assert result["flagged"] == 1 and result["errors"] == 0
    assert tasks.mark_due.name == "freshness.mark_due"


def test_confirming_resolves_the_open_due_nudge(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    age(save(member, "ours", "Alpha context.")["id"], 40)
    services.mark_due_entries()

    member.client.post(member.url("memories/ours/confirm/"), {}, format="json")

    (nudge,) = nudges(member.team)
    assert nudge.state == NudgeState.RESOLVED and nudge.resolution == "confirm"
    assert nudge.resolved_by == "writer-bot"
    assert services.mark_due_entries().flagged == 0


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ({}, Freshness.DUE),
        ({"anchor_broken_at": True}, Freshness.ANCHOR_BROKEN),
        ({"anchor_broken_at": True, "contradicted_at": True}, Freshness.CONTRADICTED),
    ],
)
def test_freshness_state_order(team: Team, flags: dict[str, bool], expected: str) -> None:
    now = timezone.now()
    memory = Memory(
        team=team,
        key="k",
        type="context",
        is_active=True,
        last_confirmed_at=now - dt.timedelta(days=31),
        **{flag: now for flag in flags},
    )

    assert freshness_of(memory, FreshnessWindows.for_team(team), now) == expected
    memory.is_active = False
    assert freshness_of(memory, FreshnessWindows.for_team(team), now) is None
