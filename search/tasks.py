"""Celery tasks: thin wrappers over search.services.

Every task takes the team id explicitly and enters that team's scope inside the
service; every task is idempotent, so a retry, a duplicate delivery or a run after
the entry was superseded or deleted is harmless.

search.services enqueues these tasks, so the tasks import the services inside their
bodies (HackSoft's pattern for the services <-> tasks pair)."""

from __future__ import annotations

import logging
import uuid

from celery import shared_task
from django.conf import settings
from django.db import transaction

logger = logging.getLogger(__name__)


@shared_task(name="search.index_memory", ignore_result=True)
def index_memory(team_id: int, memory_id: str) -> str:
    from search import services

    return services.index_memory(team_id=team_id, memory_id=memory_id)


@shared_task(name="search.reindex_team", ignore_result=True)
def reindex_team(team_id: int, profile: str | None = None) -> dict[str, object]:
    from search import services

    report = services.reindex_team(team_id=team_id, profile=profile)
    return {"memories": report.memories, "chunks_embedded": report.chunks_embedded, "model": report.model}


@shared_task(name="search.reconcile_index_states", ignore_result=True)
def reconcile_index_states() -> int:
    """Re-enqueue entries left pending or failed (broker or provider was down)."""
    from search import services

    stuck = services.pending_memories(
        older_than_seconds=settings.MEMORYHUB_RECONCILE_AFTER_SECONDS,
        limit=settings.MEMORYHUB_RECONCILE_BATCH,
    )
    for team_id, memory_id in stuck:
        index_memory.delay(team_id, str(memory_id))
    if stuck:
        logger.info("reconcile re-enqueued %d memories", len(stuck))
    return len(stuck)


def index_after_commit(*, team_id: int, memory_id: uuid.UUID | str) -> None:
    """Enqueue indexing once the current transaction commits (the receiver of
    memories.hooks.memory_written).

    A broker that is down must not fail a save that already committed: the entry stays
    `pending` and the reconcile job picks it up (robust=True logs instead of raising)."""

    def enqueue() -> None:
        index_memory.apply_async((team_id, str(memory_id)), retry=False)

    transaction.on_commit(enqueue, robust=True)


def reindex_after_commit(*, team_id: int) -> None:
    """Enqueue a whole-team re-index once the current transaction commits."""
    transaction.on_commit(lambda: reindex_team.apply_async((team_id,), retry=False), robust=True)
