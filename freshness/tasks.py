"""Celery tasks: thin wrappers over freshness.services (scheduled by beat; the schedule
lives in one place, not here)."""

from __future__ import annotations

from celery import shared_task
from django.core.cache import cache

# Where the last run stopped (a team id): the next run goes on from there.
DUE_CURSOR_CACHE_KEY = "freshness:mark_due:resume_after_team"


@shared_task(name="freshness.mark_due", ignore_result=True)
def mark_due() -> dict[str, int]:
    """Open `due` nudges for entries past their window: bounded per run, idempotent."""
    from freshness import services

    run = services.mark_due_entries(start_after_team=int(cache.get(DUE_CURSOR_CACHE_KEY) or 0))
    cache.set(DUE_CURSOR_CACHE_KEY, run.resume_after_team, timeout=None)
    return run.as_dict()
