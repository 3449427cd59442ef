"""Celery tasks: thin wrappers over search.services.

Every task takes the team id explicitly and enters that team's scope inside the
service; every task is idempotent, so a retry, a duplicate delivery or a run after
the entry was superseded or deleted is harmless.

search.services enqueues these tasks, so the tasks import the services inside their
bodies (HackSoft's pattern for the services <-> tasks pair)."""

from __future__ import annotations

import functools
import logging
import uuid
from collections import Counter
from typing import Any

from celery import Task, shared_task
from django.conf import settings
from django.db import transaction
from kombu import pools

from core.redis_outage import note_redis_failure, redis_skipped

logger = logging.getLogger(__name__)


class BrokerSkipped(Exception):
    """Not handed to the broker: Redis failed in this process a moment ago (core.redis_outage)."""


def publish(task: Task[Any, Any], args: tuple[Any, ...]) -> None:
    """Hand `task` to the broker within MEMORYHUB_REDIS_REQUEST_TIMEOUT_SECONDS, or raise.

    Through a producer pool of its own, on connections whose transport options bound
    connecting and each answer by that figure (the worker's and beat's connections keep
    MEMORYHUB_BROKER_SOCKET_TIMEOUT: a slow answer there costs a reconnect, not a web
    thread), waiting no longer for a free producer, with no retry. While Redis is marked
    down nothing is tried (BrokerSkipped). Without a broker the task runs in-process."""
    app = task.app
    if app.conf.task_always_eager:
        task.apply_async(args, retry=False)
        return
    if redis_skipped():
        raise BrokerSkipped
    bound = settings.MEMORYHUB_REDIS_REQUEST_TIMEOUT_SECONDS
    connection = app.connection_for_write(
        transport_options={"socket_connect_timeout": bound, "socket_timeout": bound, "max_retries": 0}
    )
    try:
        # kombu keys its pools by the connection's parameters, options included: this finds
        # the pool the first call made, not a new one per call.
        with pools.producers[connection].acquire(block=True, timeout=bound) as producer:
            task.apply_async(args, retry=False, producer=producer)
    except Exception as exc:  # kombu raises OperationalError or LimitExceeded, redis-py its own
        note_redis_failure("a task's publish", exc)
        raise


@shared_task(name="search.index_memory", ignore_result=True)
def index_memory(team_id: int, memory_id: str) -> str:
    from search import services

    return services.index_memory(team_id=team_id, memory_id=memory_id)


@shared_task(name="search.index_conversation", ignore_result=True)
def index_conversation(team_id: int, conversation_id: str) -> str:
    from search import conversation_index

    return conversation_index.index_conversation(team_id=team_id, conversation_id=conversation_id)


@shared_task(name="search.reindex_team", ignore_result=True)
def reindex_team(team_id: int, profile: str | None = None) -> dict[str, object]:
    from search import reindexing

    report = reindexing.reindex_team(team_id=team_id, profile=profile)
    return {"memories": report.memories, "chunks_embedded": report.chunks_embedded, "model": report.model}


RECONCILE_JOB = "search.reconcile_index_states"


@shared_task(name=RECONCILE_JOB, ignore_result=True)
def reconcile_index_states() -> int:
    """Re-enqueue entries left pending or failed (broker or provider was down) that are
    due: queued longer ago than a lease, past their backoff, not given up on; and
    conversations left pending (their indexing message was refused). One
    entry that cannot be enqueued is logged with its team and counted in `errors`; the
    others are enqueued. The run is on record (teams.jobs), as every beat job's."""
    from search import services
    from teams.jobs import recorded_run

    with recorded_run(RECONCILE_JOB) as outcome:
        stuck = services.claim_stuck_memories(
            older_than_seconds=settings.MEMORYHUB_RECONCILE_AFTER_SECONDS,
            limit=settings.MEMORYHUB_RECONCILE_BATCH,
        )
        outcome.update(claimed=len(stuck), teams=len({team_id for team_id, _ in stuck}), enqueued=0, errors=0)
        for team_id, memory_id in stuck:
            try:
                outcome["enqueued"] += enqueue_index(team_id, memory_id)
            except Exception:
                logger.exception("reconcile: memory %s of team %s could not be enqueued", memory_id, team_id)
                outcome["errors"] += 1
        if stuck:
            logger.info("reconcile re-enqueued %d of %d memories", outcome["enqueued"], len(stuck))
        outcome["conversations"] = _reconcile_conversations()
    return int(outcome["enqueued"])


def _reconcile_conversations() -> int:
    """Enqueue the indexing of conversations left pending (conversation_index.stuck_conversations)."""
    from search import conversation_index

    stuck = conversation_index.stuck_conversations(
        older_than_seconds=settings.MEMORYHUB_RECONCILE_AFTER_SECONDS,
        limit=settings.MEMORYHUB_RECONCILE_BATCH,
    )
    enqueued = 0
    for team_id, conversation_id in stuck:
        try:
            publish(index_conversation, (team_id, str(conversation_id)))
            enqueued += 1
        except Exception:
            logger.exception(
                "reconcile: conversation %s of team %s could not be enqueued", conversation_id, team_id
            )
    return enqueued


# Entries per broker message of a bulk write's indexing (index_batch_after_commit): an
# import of 100k entries sends a thousand messages, not 100k, and one batch ends well
# within the index lease (MEMORYHUB_INDEX_LEASE_SECONDS) even with a slow provider.
INDEX_BATCH_SIZE = 100


@shared_task(name="search.index_memories", ignore_result=True)
def index_memories(team_id: int, memory_ids: list[str]) -> dict[str, int]:
    """index_memory for a batch of one team's entries, in a few set-based statements
    per batch (batch_indexing.index_batch: chunks, one read of the embedding cache, the
    vectors and the success marks, then the pending near-duplicate checks in one pass).
    An entry a crash leaves unindexed keeps its lease and is re-enqueued by the
    reconcile job.

    The entries are made searchable first; search.hooks.memories_indexed (freshness's
    contradiction pass over the batch) runs for them in a message of its own
    (announce_indexed), queued behind the indexing already waiting: a burst of batches
    becomes searchable before its contradictions are looked for."""
    from search import batch_indexing, services

    by_entry = batch_indexing.index_batch(team_id=team_id, memory_ids=memory_ids)
    outcomes = Counter(by_entry.get(str(memory_id), services.IndexOutcome.GONE) for memory_id in memory_ids)
    indexed = [
        str(memory_id)
        for memory_id in dict.fromkeys(str(m) for m in memory_ids)
        if by_entry.get(memory_id) == services.IndexOutcome.INDEXED
    ]
    if indexed:
        enqueue_announce(team_id, indexed)
    return dict(outcomes)


@shared_task(name="search.announce_indexed", ignore_result=True)
def announce_indexed(team_id: int, memory_ids: list[str]) -> int:
    from search import services

    return services.announce_indexed(team_id=team_id, memory_ids=memory_ids)


def _refusal_level(error: Exception) -> int:
    """A publish not even tried (Redis failed a moment ago, and that was logged) is INFO."""
    return logging.INFO if isinstance(error, BrokerSkipped) else logging.WARNING


def enqueue_announce(team_id: int, memory_ids: list[str]) -> None:
    """Hand announce_indexed to the broker; when it refuses, announce here and now (the
    entries are indexed either way: only the order of the work changes)."""
    from search import services

    try:
        publish(announce_indexed, (team_id, memory_ids))
    except Exception as exc:  # as enqueue_index
        logger.log(
            _refusal_level(exc),
            "could not enqueue the announce of %d indexed memories (team %s): %s; announcing them now",
            len(memory_ids),
            team_id,
            type(exc).__name__,
        )
        services.announce_indexed(team_id=team_id, memory_ids=memory_ids)


def enqueue_index(team_id: int, memory_id: uuid.UUID | str) -> bool:
    """Hand one index task to the broker; False when the broker refused it.

    The publish is bounded (`publish`), and a refusal is logged, never raised: the entry
    stays `pending`, its lease is released, and the reconcile job enqueues it once the
    broker is back."""
    from search import services

    try:
        publish(index_memory, (team_id, str(memory_id)))
    except Exception as exc:  # kombu raises OperationalError, a transport may raise others
        logger.log(
            _refusal_level(exc),
            "could not enqueue indexing of memory %s (team %s): %s; it stays pending",
            memory_id,
            team_id,
            type(exc).__name__,
        )
        services.release_lease(team_id=team_id, memory_id=memory_id)
        return False
    return True


def index_after_commit(*, team_id: int, memory_id: uuid.UUID | str) -> None:
    """Enqueue indexing once the current transaction commits (the receiver of
    memories.hooks.memory_written, and of re-index and retry requests).

    The entry's lease starts in the same transaction, so the reconcile job does not
    queue it a second time; a broker that is down does not fail a save that already
    committed (enqueue_index logs it and releases the lease)."""
    index_many_after_commit(team_id=team_id, memory_ids=[uuid.UUID(str(memory_id))])


def index_many_after_commit(*, team_id: int, memory_ids: list[uuid.UUID]) -> None:
    """index_after_commit for several entries of one team: one UPDATE starts their leases."""
    from search import services

    if not memory_ids:
        return
    services.mark_queued(team_id=team_id, memory_ids=memory_ids)
    for memory_id in memory_ids:
        transaction.on_commit(functools.partial(enqueue_index, team_id, memory_id))


def enqueue_index_batch(team_id: int, memory_ids: list[uuid.UUID]) -> bool:
    """Hand one batch task to the broker; on a refusal as enqueue_index: logged, the
    entries stay `pending` with their leases released, for the reconcile job."""
    from search import services

    try:
        publish(index_memories, (team_id, [str(memory_id) for memory_id in memory_ids]))
    except Exception as exc:  # as enqueue_index
        logger.log(
            _refusal_level(exc),
            "could not enqueue indexing of %d memories (team %s): %s; they stay pending",
            len(memory_ids),
            team_id,
            type(exc).__name__,
        )
        services.release_leases(team_id=team_id, memory_ids=memory_ids)
        return False
    return True


def index_batch_after_commit(*, team_id: int, memory_ids: list[uuid.UUID]) -> None:
    """The receiver of memories.hooks.memories_written (a bulk write): one UPDATE starts
    the entries' leases, and they are enqueued after commit in batches of
    INDEX_BATCH_SIZE (search.index_memories), not one message each."""
    from search import services

    if not memory_ids:
        return
    services.mark_queued(team_id=team_id, memory_ids=memory_ids)
    for start in range(0, len(memory_ids), INDEX_BATCH_SIZE):
        batch = memory_ids[start : start + INDEX_BATCH_SIZE]
        transaction.on_commit(functools.partial(enqueue_index_batch, team_id, batch))


def reindex_after_commit(*, team_id: int, profile: str | None = None) -> None:
    """Enqueue a whole-team re-index once the current transaction commits (with
    `profile`: embed with its model, then switch the team to it)."""
    args = (team_id,) if profile is None else (team_id, profile)
    transaction.on_commit(lambda: publish(reindex_team, args), robust=True)
