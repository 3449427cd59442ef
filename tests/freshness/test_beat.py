"""Beat: the schedule lives in the database with MemoryHub's jobs created by a
migration; each run is recorded; a real beat and worker (embedded Redis) run the due job
for every team, each in its own scope; the session sweep covers every team."""

from __future__ import annotations

import datetime as dt
import importlib
from collections.abc import Callable
from typing import Any

import pytest
from django.apps import apps
from django.utils import timezone
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from agents.models import AgentSession
from agents.sessions import expire_stale_sessions_everywhere
from freshness.models import Nudge, NudgeKind
from memories.models import Memory
from memoryhub.celery import app as celery_app
from teams import jobs
from teams.models import JobRun
from tests.conftest import Agent, operator_view
from tests.worker import SCHEDULED_NAME, CeleryProcess, schedule_every_second, wait_for

DEFAULTS_MIGRATION = importlib.import_module("freshness.migrations.0004_default_beat_schedule")
JOB_SECONDS = 60.0  # a hang detector


@pytest.mark.django_db
def test_the_default_jobs_are_created_once_by_name_and_an_operators_change_stays() -> None:
    PeriodicTask.objects.all().delete()

    DEFAULTS_MIGRATION.create_jobs(apps, None)
    minutes = PeriodicTask.objects.get(task="agents.expire_sessions")
    minutes.interval, _ = IntervalSchedule.objects.get_or_create(every=10, period=IntervalSchedule.MINUTES)
    minutes.save()
    DEFAULTS_MIGRATION.create_jobs(apps, None)

    tasks = sorted(PeriodicTask.objects.values_list("task", flat=True))
    assert tasks == sorted(task for _, task, _, _ in DEFAULTS_MIGRATION.DEFAULT_JOBS)
    assert PeriodicTask.objects.get(task="agents.expire_sessions").interval.every == 10


def test_every_scheduled_task_is_one_the_worker_knows() -> None:
    celery_app.loader.import_default_modules()

    unknown = [task for _, task, _, _ in DEFAULTS_MIGRATION.DEFAULT_JOBS if task not in celery_app.tasks]

    assert unknown == []


@pytest.mark.django_db
def test_a_run_is_recorded_with_its_counts_or_its_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jobs, "KEEP_RUNS", 3)

    for checked in range(4):
        with jobs.recorded_run("test.job") as outcome:
            outcome["checked"] = checked
    with pytest.raises(ZeroDivisionError), jobs.recorded_run("test.job"):
        1 / 0  # noqa: B018

    runs = list(JobRun.objects.filter(job="test.job").order_by("started_at", "id"))
    assert [(run.succeeded, run.outcome, run.error) for run in runs] == [
        (True, {"checked": 2}, ""),
        (True, {"checked": 3}, ""),
        (False, {}, "ZeroDivisionError"),
    ]
    assert all(run.finished_at is not None and run.finished_at >= run.started_at for run in runs)


@pytest.mark.django_db
def test_the_session_sweep_expires_stale_sessions_of_every_team_and_only_those(
    member: Agent, outsider: Agent
) -> None:
    ids = {}
    for agent, name in ((member, "a"), (outsider, "b")):
        for freshness in ("stale", "live"):
            response = agent.client.post(
                agent.url("sessions/"), {"current_task": f"{name}-{freshness}"}, format="json"
            )
            assert response.status_code == 201, response.content
            ids[(name, freshness)] = response.json()["session"]["id"]
    with operator_view():
        stale = [ids[("a", "stale")], ids[("b", "stale")]]
        AgentSession.objects.filter(pk__in=stale).update(
            last_heartbeat_at=timezone.now() - dt.timedelta(hours=2)
        )

    run = expire_stale_sessions_everywhere()

    assert run == {"teams": 2, "expired": 2, "errors": 0}
    with operator_view():
        ended = dict(AgentSession.objects.values_list("pk", "end_reason"))
    assert {str(pk): reason for pk, reason in ended.items()} == {
        ids[("a", "stale")]: "expired",
        ids[("b", "stale")]: "expired",
        ids[("a", "live")]: "",
        ids[("b", "live")]: "",
    }


@pytest.mark.django_db(transaction=True)
def test_beat_and_a_worker_run_the_due_job_for_every_team_from_the_database_schedule(
    start_worker: Callable[..., CeleryProcess],
    start_beat: Callable[..., CeleryProcess],
    member: Agent,
    outsider: Agent,
) -> None:
    stale = {}
    for agent in (member, outsider):
        response = agent.client.post(
            agent.url("memories/"),
            {"key": "payments", "content": f"{agent.team.slug} bills through Stripe.", "type": "decision"},
            format="json",
        )
        assert response.status_code == 201
        stale[agent.team.id] = response.json()["id"]
    with operator_view():
        past = timezone.now() - dt.timedelta(days=45)
        Memory.objects.filter(id__in=stale.values()).update(created_at=past, last_confirmed_at=past)
    schedule_every_second("freshness.mark_due")

    worker = start_worker()
    beat = start_beat(worker.env["MEMORYHUB_QUEUE"])

    def nudged() -> dict[int, Any]:
        with operator_view():
            return dict(Nudge.objects.filter(kind=NudgeKind.DUE).values_list("team_id", "memory_id"))

    wait_for(lambda: len(nudged()) == 2, JOB_SECONDS, "a due nudge in each team")
    assert {team: str(memory) for team, memory in nudged().items()} == stale
    assert f"Sending due task {SCHEDULED_NAME} (freshness.mark_due)" in beat.log_since(0)
    wait_for(
        lambda: JobRun.objects.filter(job="freshness.mark_due", succeeded=True).exists(),
        JOB_SECONDS,
        "a recorded run",
    )
    run = JobRun.objects.filter(job="freshness.mark_due", succeeded=True).order_by("started_at").first()
    assert run is not None and run.outcome["errors"] == 0
    # Each team's nudge is its own: the other team's agent never sees it.
    for agent, other in ((member, outsider), (outsider, member)):
        body = agent.client.get(agent.url("nudges/")).content.decode()
        assert stale[agent.team.id] in body and stale[other.team.id] not in body
        assert other.team.slug not in body
