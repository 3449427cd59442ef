"""One team's bad data never stops a beat job for the others, for every job in beat's
schedule (the jobs the migrations create). Each case plants, in team A, the worst
realistic row for its job (one the job reads and cannot process: an anchor stored before
validation, a timestamp PostgreSQL holds and Python cannot), and due work in team B; the
job runs; B's work is done and the run is on record. A job added to the schedule without
a case here fails `test_every_scheduled_job_has_a_bad_team_case`."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.conf import settings
from django.db import connection
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.operations import RunPython
from django.test import override_settings
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from agents.models import AgentSession
from freshness.models import AnchorCheck, Nudge, NudgeKind
from memories import writes
from memories.conversations.models import Conversation
from memories.conversations.services import Line, store_conversation
from memories.models import Memory
from memoryhub.celery import app as celery_app
from teams.models import JobRun, Team
from teams.scope import team_scope
from tests.conftest import operator_view
from tests.freshness.anchor_site import Site

# PostgreSQL's timestamps reach past Python's datetime range: a row holding one (written
# by hand, or restored from elsewhere) cannot be read into Python at all.
UNREADABLE_TIME = "-infinity"


def sql(statement: str, params: list[Any]) -> None:
    with operator_view(), connection.cursor() as cursor:
        cursor.execute(statement, params)


def entry(
    team: Team, key: str, *, anchor: dict[str, Any] | None = None, type_name: str = "decision"
) -> uuid.UUID:
    with team_scope(team.id):
        saved = writes.save_memory(
            team=team,
            key=key,
            content=f"{team.slug}: {key}.",
            type_name=type_name,
            anchor=anchor,
            updated_by="t",
        )
    return saved.memory.id


def aged(memory_id: uuid.UUID, days: int) -> None:
    past = timezone.now() - dt.timedelta(days=days)
    sql(
        "UPDATE memories_memory SET created_at = %s, last_confirmed_at = %s WHERE id = %s",
        [past, past, memory_id],
    )


def session(team: Team, *, idle_for: dt.timedelta) -> uuid.UUID:
    with team_scope(team.id):
        last = timezone.now() - idle_for
        return AgentSession.objects.create(team=team, agent="bot", started_at=last, last_heartbeat_at=last).id


def task(name: str) -> Any:
    celery_app.loader.import_default_modules()  # every app's tasks, as a worker loads them
    return celery_app.tasks[name]


def nudged(memory_id: uuid.UUID, kind: str) -> bool:
    with operator_view():
        return Nudge.objects.filter(memory_id=memory_id, kind=kind).exists()


# --------------------------------------------------------------------------- one case per job


@dataclass(frozen=True)
class JobCase:
    plant_bad: Callable[[Team, Site], None]
    plant_work: Callable[[Team, Site], uuid.UUID]
    done: Callable[[uuid.UUID], bool]
    # What the run's record says about the bad team (counted, never fatal).
    recorded: Callable[[dict[str, Any]], bool]


def _reconcile_bad(team: Team, site: Site) -> None:
    memory_id = entry(team, "unreadable")
    sql(
        "UPDATE memories_memory SET index_state = 'pending', index_queued_at = NULL, updated_at = %s WHERE id = %s",
        [UNREADABLE_TIME, memory_id],
    )


def _reconcile_work(team: Team, site: Site) -> uuid.UUID:
    memory_id = entry(team, "left-pending")
    sql(
        "UPDATE memories_memory SET index_state = 'pending', index_queued_at = NULL, updated_at = %s WHERE id = %s",
        [timezone.now() - dt.timedelta(hours=1), memory_id],
    )
    return memory_id


def _indexed(memory_id: uuid.UUID) -> bool:
    with operator_view():
        return Memory.objects.get(id=memory_id).index_state == "indexed"


def _sessions_bad(team: Team, site: Site) -> None:
    session_id = session(team, idle_for=dt.timedelta(hours=2))
    sql(
        "UPDATE agents_agentsession SET started_at = %s, last_heartbeat_at = %s WHERE id = %s",
        [UNREADABLE_TIME, UNREADABLE_TIME, session_id],
    )


def _expired(session_id: uuid.UUID) -> bool:
    with operator_view():
        return AgentSession.objects.get(id=session_id).end_reason == AgentSession.EndReason.EXPIRED


def _due_bad(team: Team, site: Site) -> None:
    sql(
        "UPDATE memories_memory SET last_confirmed_at = %s WHERE id = %s",
        [UNREADABLE_TIME, entry(team, "unreadable")],
    )


def _due_work(team: Team, site: Site) -> uuid.UUID:
    memory_id = entry(team, "payments")
    aged(memory_id, 45)
    return memory_id


def _prune_bad(team: Team, site: Site) -> None:
    memory_id = entry(team, "unreadable")
    aged(memory_id, 400)
    sql("UPDATE memories_memory SET created_at = %s WHERE id = %s", [UNREADABLE_TIME, memory_id])


def _prune_work(team: Team, site: Site) -> uuid.UUID:
    memory_id = entry(team, "old-unread")
    aged(memory_id, 400)
    return memory_id


def _anchors_bad(team: Team, site: Site) -> None:
    # Saved before anchor URLs were validated: the octal host once made the run die.
    memory_id = entry(team, "octal-anchor")
    anchor = {"type": "url", "value": f"http://0177.0.0.1:{site.port}/alpha"}
    sql("UPDATE memories_memory SET anchor = %s::jsonb WHERE id = %s", [json.dumps(anchor), memory_id])


def _anchors_work(team: Team, site: Site) -> uuid.UUID:
    site.serve("/bravo", body=b"bravo runbook")
    return entry(team, "runbook", anchor={"type": "url", "value": site.url("/bravo")})


def _anchor_checked(memory_id: uuid.UUID) -> bool:
    with operator_view():
        return AnchorCheck.objects.filter(memory_id=memory_id, ok=True).exists()


def _retention_bad(team: Team, site: Site) -> None:
    # A retention past what a date can hold (written by hand; the settings page refuses it).
    _old_conversation(team)
    sql("UPDATE teams_team SET conversation_retention_days = 2000000000 WHERE id = %s", [team.id])


def _old_conversation(team: Team) -> uuid.UUID:
    with team_scope(team.id):
        stored = store_conversation(
            team=team,
            lines=[Line("user", f"{team.slug} said")],
            actor="t",
            created_at=timezone.now() - dt.timedelta(days=45),
        )
    return stored.id


def _conversation_gone(conversation_id: uuid.UUID) -> bool:
    with operator_view():
        return not Conversation.objects.filter(id=conversation_id).exists()


CASES: dict[str, JobCase] = {
    "memories.delete_expired_conversations": JobCase(
        _retention_bad,
        lambda team, site: _old_conversation(team),
        _conversation_gone,
        lambda outcome: (outcome["errors"], outcome["teams"], outcome["deleted"]) == (1, 2, 1),
    ),
    "search.reconcile_index_states": JobCase(
        _reconcile_bad, _reconcile_work, _indexed, lambda outcome: outcome["claimed"] == 2
    ),
    "agents.expire_sessions": JobCase(
        _sessions_bad,
        lambda team, site: session(team, idle_for=dt.timedelta(hours=2)),
        _expired,
        lambda outcome: outcome == {"teams": 2, "expired": 2, "errors": 0},
    ),
    "freshness.mark_due": JobCase(
        _due_bad,
        _due_work,
        lambda memory_id: nudged(memory_id, NudgeKind.DUE),
        lambda outcome: outcome["errors"] == 1 and outcome["teams"] == 2,
    ),
    "freshness.propose_prunes": JobCase(
        _prune_bad,
        _prune_work,
        lambda memory_id: nudged(memory_id, NudgeKind.PRUNE),
        lambda outcome: outcome["errors"] == 1 and outcome["teams"] == 2,
    ),
    "freshness.check_anchors": JobCase(
        _anchors_bad,
        _anchors_work,
        _anchor_checked,
        lambda outcome: (outcome["checked"], outcome["ok"], outcome["invalid"]) == (2, 1, 1),
    ),
}


@pytest.mark.django_db
@override_settings(
    MEMORYHUB_ANCHOR_ALLOWED_NETWORKS=["127.0.0.0/8"],
    MEMORYHUB_ANCHOR_CHECK_INTERVAL_SECONDS=0,
    MEMORYHUB_RECONCILE_AFTER_SECONDS=60,
)
@pytest.mark.parametrize("job", sorted(CASES))
def test_one_teams_bad_row_never_stops_a_job_for_the_others(
    job: str, team: Team, other_team: Team, site: Site
) -> None:
    case = CASES[job]
    case.plant_bad(team, site)
    work = case.plant_work(other_team, site)

    task(job)()

    assert case.done(work), f"{job} did not do the other team's work"
    run = JobRun.objects.filter(job=job).order_by("-started_at").first()
    assert run is not None and run.succeeded, (job, run and run.error)
    assert case.recorded(run.outcome), run.outcome


# --------------------------------------------------------------------------- the schedule's jobs


def scheduled_tasks() -> set[str]:
    """The tasks beat's schedule holds after every migration: each of the project's
    migrations that depends on django_celery_beat has its data functions run again on an
    empty schedule (they create the jobs by name)."""
    PeriodicTask.objects.all().delete()
    loader = MigrationLoader(None, ignore_no_migrations=True)
    for (app_label, _name), migration in sorted(loader.disk_migrations.items()):
        app_path = Path(apps.get_app_config(app_label).path)
        if not app_path.is_relative_to(settings.BASE_DIR) or "site-packages" in app_path.parts:
            continue
        if not any(dependency[0] == "django_celery_beat" for dependency in migration.dependencies):
            continue
        for operation in migration.operations:
            if isinstance(operation, RunPython):
                operation.code(apps, None)
    return set(PeriodicTask.objects.values_list("task", flat=True))


@pytest.mark.django_db
def test_every_scheduled_job_has_a_bad_team_case() -> None:
    scheduled = scheduled_tasks()

    assert len(scheduled) >= 5  # the discovery found the schedule
    assert scheduled == set(CASES)
    assert all(task(name) for name in scheduled)
