"""Celery tasks: thin wrappers over freshness.services (scheduled by beat; the schedule
lives in one place, not here)."""

from __future__ import annotations

from celery import shared_task
from django.core.cache import cache

# Where the last run stopped (a team id): the next run goes on from there.
DUE_CURSOR_CACHE_KEY = "freshness:mark_due:resume_after_team"
PRUNE_CURSOR_CACHE_KEY = "freshness:propose_prunes:resume_after_team"


@shared_task(name="freshness.mark_due", ignore_result=True)
def mark_due() -> dict[str, int]:
    """Open `due` nudges for entries past their window: bounded per run, idempotent."""
    from freshness import services
    from teams.jobs import recorded_run

    with recorded_run("freshness.mark_due") as outcome:
        run = services.mark_due_entries(start_after_team=int(cache.get(DUE_CURSOR_CACHE_KEY) or 0))
        cache.set(DUE_CURSOR_CACHE_KEY, run.resume_after_team, timeout=None)
        outcome.update(run.as_dict())
    return run.as_dict()


@shared_task(name="freshness.propose_prunes", ignore_result=True)
def propose_prunes() -> dict[str, int]:
    """Open `prune` nudges proposing to archive old, never read, unrated entries:
    bounded per run, idempotent; nothing is archived or deleted here."""
    from freshness import services
    from teams.jobs import recorded_run

    with recorded_run("freshness.propose_prunes") as outcome:
        run = services.propose_prunes(start_after_team=int(cache.get(PRUNE_CURSOR_CACHE_KEY) or 0))
        cache.set(PRUNE_CURSOR_CACHE_KEY, run.resume_after_team, timeout=None)
        outcome.update(run.as_dict())
    return run.as_dict()


ANCHOR_CURSOR_CACHE_KEY = "freshness:check_anchors:resume_after_team"


@shared_task(name="freshness.check_anchors", ignore_result=True)
def check_anchors() -> dict[str, int]:
    """Check due url and api anchors of every team (freshness.anchor_checks): bounded per
    run, each anchor at most once per interval; broken ones flag their entry."""
    from freshness import anchor_checks
    from teams.jobs import recorded_run

    with recorded_run("freshness.check_anchors") as outcome:
        run = anchor_checks.check_anchors(start_after_team=int(cache.get(ANCHOR_CURSOR_CACHE_KEY) or 0))
        cache.set(ANCHOR_CURSOR_CACHE_KEY, run.resume_after_team, timeout=None)
        outcome.update(run.as_dict())
    return run.as_dict()
