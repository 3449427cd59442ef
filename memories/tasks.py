"""Celery tasks of memories: thin wrappers over its services."""

from __future__ import annotations

from celery import shared_task
from django.core.cache import cache

RETENTION_JOB = "memories.delete_expired_conversations"
# Where the last run stopped (a team id): the next run goes on from there.
RETENTION_CURSOR_CACHE_KEY = "memories:delete_expired_conversations:resume_after_team"


@shared_task(name=RETENTION_JOB, ignore_result=True)
def delete_expired_conversations() -> dict[str, int]:
    """Delete conversations older than their team's retention: bounded per run
    (MEMORYHUB_CONVERSATION_RETENTION_BATCH), idempotent."""
    from memories.conversations import services
    from teams.jobs import recorded_run

    with recorded_run(RETENTION_JOB) as outcome:
        run = services.delete_expired_everywhere(
            start_after_team=int(cache.get(RETENTION_CURSOR_CACHE_KEY) or 0)
        )
        cache.set(RETENTION_CURSOR_CACHE_KEY, run.resume_after_team, timeout=None)
        outcome.update(run.as_dict())
    return run.as_dict()
