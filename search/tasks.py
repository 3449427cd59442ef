"""Celery tasks: thin wrappers over search.services.

Every task takes the team id explicitly and enters that team's scope inside the
service; every task is idempotent, so a retry, a duplicate delivery or a run after
the entry was superseded or deleted is harmless."""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings
from django.db import transaction

from search import services
from teams.models import Team
from teams.scope import dangerously_bypass_team_scope

logger = logging.getLogger(__name__)


@shared_task(name="search.index_memory", ignore_result=True)
def index_memory(team_id: int, memory_id: str) -> str:
    return services.index_memory(team_id=team_id, memory_id=memory_id)


@shared_task(name="search.reindex_team", ignore_result=True)
def reindex_team(team_id: int, profile: str | None = None) -> dict[str, object]:
    report = services.reindex_team(team_id=team_id, profile=profile)
    return {"memories": report.memories, "chunks_embedded": report.chunks_embedded, "model": report.model}


@shared_task(name="search.reembed", ignore_result=True)
def reembed(profile: str | None = None) -> int:
    """Re-index every team (e.g. after the deployment's default model changed)."""
    with dangerously_bypass_team_scope(reason="re-embed every team", actor="celery"):
        team_ids = list(Team.objects.order_by("id").values_list("id", flat=True))
    for team_id in team_ids:
        reindex_team.delay(team_id, profile)
    return len(team_ids)


@shared_task(name="search.reconcile_index_states", ignore_result=True)
def reconcile_index_states() -> int:
    """Re-enqueue entries left pending or failed (broker or provider was down)."""
    stuck = services.pending_memories(
        older_than_seconds=settings.MEMORYHUB_RECONCILE_AFTER_SECONDS,
        limit=settings.MEMORYHUB_RECONCILE_BATCH,
    )
    for team_id, memory_id in stuck:
        index_memory.delay(team_id, str(memory_id))
    if stuck:
        logger.info("reconcile re-enqueued %d memories", len(stuck))
    return len(stuck)


def index_after_commit(team_id: int, memory_id: object) -> None:
    """Enqueue indexing once the current transaction commits.

    A broker that is down must not fail a save that already committed: the entry stays
    `pending` and the reconcile job picks it up (robust=True logs instead of raising)."""

    def enqueue() -> None:
        index_memory.apply_async((team_id, str(memory_id)), retry=False)

    transaction.on_commit(enqueue, robust=True)
