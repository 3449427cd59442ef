"""Every write of search data: chunking and embedding memories, re-indexing teams.

Indexing is idempotent: it derives a memory version's chunks and vectors from its
content, so running it twice, or after the version was superseded, rewrites the same
rows. Embedding happens outside any transaction (a provider may be slow), and only
text whose (content_hash, model) is not in the team's EmbeddingCache goes to the provider.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from datetime import timedelta
from typing import Literal

from django.conf import settings
from django.db import connection, transaction
from django.db.models import DurationField, ExpressionWrapper, F, FloatField, Func, Value
from django.db.models.functions import Now, Power

from core.errors import InvalidInput
from core.low_priority_threads import run_at_background_priority
from core.yield_to_requests import yield_to_other_teams
from memories.models import IndexState, Memory
from search import duplicates_after_indexing, hooks, tasks
from search.chunking import TextChunk, chunk_text
from search.embeddings.base import EmbeddingProvider, EmbeddingUnavailable
from search.embeddings.profiles import (
    ProfileConfigError,
    UnknownProfile,
    get_profile,
    load_profiles,
    provider_for,
)
from search.hooks import IndexedEntry
from search.models import Chunk, ChunkEmbedding, ConversationChunk, EmbeddingCache, KeyTrigrams, KeywordStat
from search.vector_index import ensure_index
from teams.models import AuditEvent, Team
from teams.scope import dangerously_bypass_team_scope, team_scope
from teams.services import record_event

logger = logging.getLogger(__name__)

# Re-trying entries stuck in pending/failed: at most this many per request; the periodic
# reconcile job goes on with the rest.
MAX_RETRY_BATCH = 500


class IndexOutcome:
    INDEXED = "indexed"
    KEYWORD_ONLY = "keyword-only"
    FAILED = "failed"
    GONE = "gone"


def team_profile(team: Team) -> str:
    return team.embedding_profile or settings.MEMORYHUB_EMBEDDING_PROFILE


def team_provider(team: Team) -> EmbeddingProvider | None:
    """The team's embedding provider; None when its profile has no embeddings.
    Raises EmbeddingUnavailable when the profile is broken (missing key, dead endpoint)."""
    return provider_for(team_profile(team))


def index_memory(*, team_id: int, memory_id: uuid.UUID | str, announce: bool = True) -> str:
    """Chunk and embed one memory version; set its index_state.

    Chunks are written even when embedding fails, so the entry is found by keyword at
    once; the failure is counted (index_attempts, backoff) and the reconcile job retries
    it, until MEMORYHUB_INDEX_MAX_ATTEMPTS failures leave it `failed` for good.

    Vectors are stored only under a share lock of the team's row, after checking that
    the profile they were embedded with is still the team's: a re-index switching the
    team to another model (reindex_team, which takes that row's lock) either happens
    before, and this embeds again with the new model, or after, and then it sees these
    vectors are not the new model's and queues the entry again.

    With `announce` False, search.hooks.memories_indexed is left to the caller
    (announce_indexed): a batch is made searchable first, then announced.

    An entry a batch saved with its near-duplicate check pending gets it here, once its
    vectors are stored and before it is announced (search.duplicates_after_indexing); when there will
    be no vectors (`none` profile, entry deleted) the check is dropped: it fails open,
    as the single save's does. A failed embedding leaves it for the retry."""
    with team_scope(team_id):
        memory = Memory.objects.for_team(team_id).select_related("team").filter(id=memory_id).first()
        if memory is None:
            return IndexOutcome.GONE
        team = memory.team
        pieces = chunk_text(memory.content)
        replace_chunks(memory, pieces)

    if memory.deleted_at is not None:
        # Never returned by search; nothing to embed.
        _record_success(team_id, memory.id)
        _drop_near_check(memory)
        return IndexOutcome.GONE

    profile = team_profile(team)
    # Each pass embeds with the profile the team had when it started; a switch happens
    # rarely and is locked against, so a second pass is the most there ever is in practice.
    for _ in range(MAX_PROFILE_SWITCHES_PER_INDEXING):
        try:
            provider = provider_for(profile)
            vectors = _embed_yielding(provider, pieces, team_id=team_id) if provider is not None else {}
        except EmbeddingUnavailable as exc:
            logger.warning("embedding memory %s of team %s failed: %s", memory.key, team.slug, exc)
            record_failure(team_id, memory.id, exc)
            # The near check stays pending: the retry that indexes the entry runs it.
            return IndexOutcome.FAILED

        with team_scope(team_id):
            current = lock_team_profile(team_id, exclusive=False)
            if current != profile:
                profile = current
                continue
            if provider is None:
                _record_success(team_id, memory.id)
                _drop_near_check(memory)
                return IndexOutcome.KEYWORD_ONLY
            ensure_index_once(provider)
            store_vectors(
                team_id, Chunk.objects.filter(team_id=team_id, memory_id=memory.id), provider.model, vectors
            )
            _record_success(team_id, memory.id)
        if memory.near_check_pending:
            duplicates_after_indexing.check_indexed_entry(
                team=team, memory_id=memory.id, model=provider.model, dimensions=provider.dimensions
            )
        if memory.is_active and announce:
            _announce_indexed(
                [
                    IndexedEntry(
                        team_id=team_id,
                        memory_id=memory.id,
                        model=provider.model,
                        dimensions=provider.dimensions,
                    )
                ]
            )
        return IndexOutcome.INDEXED
    # The team kept switching models under this task: leave the entry for the reconcile job.
    logger.warning("memory %s of team %s: embedding model changed while indexing", memory.key, team.slug)
    _drop_near_check(memory)
    return IndexOutcome.FAILED


def _drop_near_check(memory: Memory) -> None:
    """No vectors to compare: the pending near check is given up (it fails open)."""
    if memory.near_check_pending:
        with team_scope(memory.team_id):
            Memory.objects.for_team(memory.team_id).filter(id=memory.id).update(near_check_pending=False)


# How many times one indexing follows a team to a new embedding profile before leaving
# the entry to the reconcile job.
MAX_PROFILE_SWITCHES_PER_INDEXING = 3


def _announce_indexed(entries: list[IndexedEntry]) -> None:
    """search.hooks.memories_indexed, after the vectors committed. What a receiver does
    with them (freshness: contradictions) never fails indexing: the entries are indexed
    either way. When it fails on a batch, each entry is announced alone, so one entry's
    bad data costs only its own announcement (the next indexing of it tries again)."""
    try:
        hooks.memories_indexed.call(entries=entries)
        return
    except Exception:
        logger.exception("after indexing %d memories of team %s", len(entries), entries[0].team_id)
    if len(entries) == 1:
        return
    for entry in entries:
        try:
            hooks.memories_indexed.call(entries=[entry])
        except Exception:
            logger.exception("after indexing memory %s of team %s", entry.memory_id, entry.team_id)


def announce_indexed(*, team_id: int, memory_ids: list[str]) -> int:
    """search.hooks.memories_indexed for entries a batch indexed without announcing them
    (search.tasks.index_memories), those still active and indexed, with the team's
    current model, in one call. Returns how many were announced."""
    with team_scope(team_id):
        team = Team.objects.filter(id=team_id).first()
        found = set(
            Memory.objects.for_team(team_id)
            .filter(id__in=memory_ids, is_active=True, index_state=IndexState.INDEXED)
            .values_list("id", flat=True)
        )
    # In the batch's own order (the query's is the plan's), so the work is repeatable.
    ids = [memory_id for memory_id in (uuid.UUID(str(m)) for m in memory_ids) if memory_id in found]
    if team is None or not ids:
        return 0
    try:
        provider = team_provider(team)
    except EmbeddingUnavailable as exc:
        logger.warning("announcing %d indexed memories of team %s: %s", len(ids), team.slug, exc)
        return 0
    if provider is None:
        return 0
    _announce_indexed(
        [
            IndexedEntry(
                team_id=team_id, memory_id=memory_id, model=provider.model, dimensions=provider.dimensions
            )
            for memory_id in dict.fromkeys(ids)
        ]
    )
    return len(ids)


def lock_team_profile(team_id: int, *, exclusive: bool) -> str:
    """The team's embedding profile, its row locked until the transaction ends: shared
    by indexings storing vectors, exclusive for the re-index's switch. FOR NO KEY UPDATE
    (not FOR UPDATE) so that inserting the team's other rows, whose foreign key takes
    FOR KEY SHARE, is never blocked by a switch."""
    lock = "FOR NO KEY UPDATE" if exclusive else "FOR SHARE"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT embedding_profile FROM teams_team WHERE id = %s {lock}", [team_id])  # noqa: S608
        row = cursor.fetchone()
    if row is None:
        raise Team.DoesNotExist(f"team {team_id}")
    return str(row[0] or settings.MEMORYHUB_EMBEDDING_PROFILE)


def _record_success(team_id: int, memory_id: uuid.UUID) -> None:
    with team_scope(team_id):
        Memory.objects.for_team(team_id).filter(id=memory_id).update(
            index_state=IndexState.INDEXED,
            index_queued_at=None,
            index_attempts=0,
            index_next_attempt_at=None,
            index_last_error="",
        )


def record_failure(team_id: int, memory_id: uuid.UUID, error: Exception) -> None:
    """Count a failed attempt: the entry is `failed`, the lease is released, and the
    reconcile job may retry it after an exponential backoff; at MAX_ATTEMPTS failures
    it is skipped until someone asks for "retry stuck"."""
    record_failure_of(team_id, [memory_id], error)


def record_failure_of(team_id: int, memory_ids: list[uuid.UUID], error: Exception) -> None:
    """record_failure for several entries in one UPDATE (each by its own attempts)."""
    base = settings.MEMORYHUB_INDEX_RETRY_BASE_SECONDS
    ceiling = settings.MEMORYHUB_INDEX_RETRY_MAX_SECONDS
    with team_scope(team_id):
        Memory.objects.for_team(team_id).filter(id__in=memory_ids).update(
            index_state=IndexState.FAILED,
            index_queued_at=None,
            index_attempts=F("index_attempts") + 1,
            # base * 2^(attempts before this one), at most the ceiling
            index_next_attempt_at=Now()
            + ExpressionWrapper(
                Func(
                    Value(base) * Power(Value(2.0), F("index_attempts")),
                    Value(ceiling),
                    function="LEAST",
                    output_field=FloatField(),
                )
                * Value(timedelta(seconds=1)),
                output_field=DurationField(),
            ),
            index_last_error=type(error).__name__[:100],
        )


def store_vectors(team_id: int, chunks: Iterable[Chunk], model: str, vectors: dict[str, list[float]]) -> None:
    """One vector per (chunk, model), written or overwritten: indexing twice is harmless."""
    ChunkEmbedding.objects.bulk_create(
        [
            ChunkEmbedding(team_id=team_id, chunk=chunk, model=model, embedding=vectors[chunk.content_hash])
            for chunk in chunks
        ],
        update_conflicts=True,
        unique_fields=["chunk", "model"],
        update_fields=["embedding"],
    )


_indexed_models: set[str] = set()


def ensure_index_once(provider: EmbeddingProvider) -> None:
    """A model's first vectors in this process make sure its HNSW index exists."""
    if provider.model not in _indexed_models:
        ensure_index(provider.model, provider.dimensions)
        _indexed_models.add(provider.model)


def _embed_yielding(
    provider: EmbeddingProvider, pieces: list[TextChunk], *, team_id: int
) -> dict[str, list[float]]:
    """cached_embeddings of chunks, one provider batch at a time, each batch after other
    teams' requests being served (core.yield_to_requests): one team's flood of saves never has
    the worker compete with another team's reads for more than a batch at a time."""
    vectors: dict[str, list[float]] = {}
    size = max(1, provider.batch_size)
    for start in range(0, len(pieces), size):
        yield_to_other_teams(team_id)
        batch = [(p.content_hash, p.text) for p in pieces[start : start + size]]
        vectors.update(cached_embeddings(provider, batch, team_id=team_id))
    return vectors


def cached_embeddings(
    provider: EmbeddingProvider,
    items: Iterable[tuple[str, str]],
    *,
    team_id: int,
    at_background_priority: bool = False,
) -> dict[str, list[float]]:
    """Vectors by content hash for (content_hash, text) pairs; only hashes the team's
    cache does not hold for this model are sent to the provider, each once.
    `at_background_priority`: a request embeds for its own sake: it first waits while
    other teams are being served (core.yield_to_requests), then embeds on a lowered thread
    (core.low_priority_threads).

    The cache is the team's own (search.models.EmbeddingCache): another team having
    embedded the same text never spares this team the provider's round trip, so the
    time a save takes says nothing about other teams. The provider is called between
    two short transactions, never inside one of ours (a caller may still hold one)."""
    texts = dict(items)
    with team_scope(team_id):
        vectors: dict[str, list[float]] = {
            row.content_hash: row.embedding
            for row in EmbeddingCache.objects.filter(
                team_id=team_id, model=provider.model, content_hash__in=list(texts)
            )
        }
    missing = [h for h in texts if h not in vectors]
    if missing:
        documents = [texts[h] for h in missing]
        if at_background_priority:
            yield_to_other_teams(team_id)
            fresh = run_at_background_priority(provider.embed_documents, documents)
        else:
            fresh = provider.embed_documents(documents)
        with team_scope(team_id):
            EmbeddingCache.objects.bulk_create(
                [
                    EmbeddingCache(
                        team_id=team_id, content_hash=h, model=provider.model, dimensions=len(v), embedding=v
                    )
                    for h, v in zip(missing, fresh, strict=True)
                ],
                ignore_conflicts=True,
            )
        vectors.update(zip(missing, fresh, strict=True))
    return vectors


def replace_chunks(memory: Memory, pieces: list[TextChunk]) -> None:
    """Make the memory's chunks `pieces`, in the caller's transaction.

    Another transaction may chunk the same version at the same moment (the re-index
    chunking what was never chunked while the entry's index task does, or two deliveries
    of one task): only the rows read here are deleted, and inserting waits for the other
    transaction and then keeps its rows (ON CONFLICT DO NOTHING). The same text gives the
    same chunks, so neither side fails on the unique (memory, chunk_index)."""
    existing = list(Chunk.objects.filter(team_id=memory.team_id, memory_id=memory.id).order_by("chunk_index"))
    if [(c.chunk_index, c.content_hash) for c in existing] == [(p.index, p.content_hash) for p in pieces]:
        return  # unchanged: keep the rows and their embeddings
    if existing:
        Chunk.objects.filter(id__in=[c.id for c in existing]).delete()
    Chunk.objects.bulk_create(
        ignore_conflicts=True,
        objs=[
            Chunk(
                team_id=memory.team_id,
                memory_id=memory.id,
                chunk_index=p.index,
                text=p.text,
                token_count=p.token_count,
                content_hash=p.content_hash,
            )
            for p in pieces
        ],
    )


def claim_stuck_memories(*, older_than_seconds: float, limit: int) -> list[tuple[int, uuid.UUID]]:
    """(team_id, memory_id) of entries whose indexing never finished or failed and that
    are due: not queued less than a lease ago, past their backoff, not given up on.
    Never-failed entries come first, then by when each is due, so entries that keep
    failing wait their backoff and never starve newer ones. The claimed entries' lease
    starts now (SKIP LOCKED: two reconcile runs never claim the same entry).

    Runs in the operators' bypass scope: the reconcile job looks at every team."""
    with (
        dangerously_bypass_team_scope(reason="reconcile pending index states", actor="celery-beat"),
        connection.cursor() as cursor,
    ):
        cursor.execute(
            """
            -- MATERIALIZED: the due rows are chosen once. As `WHERE id IN (subquery)` the
            -- planner may run the LIMIT ... SKIP LOCKED subquery again for each row it
            -- joins, and claim more (and other) rows than the limit.
            WITH due AS MATERIALIZED (
                SELECT id FROM memories_memory
                WHERE index_state IN ('pending', 'failed') AND deleted_at IS NULL
                  AND updated_at < clock_timestamp() - make_interval(secs => %(grace)s)
                  AND (index_queued_at IS NULL
                       OR index_queued_at < clock_timestamp() - make_interval(secs => %(lease)s))
                  AND (index_next_attempt_at IS NULL OR index_next_attempt_at <= clock_timestamp())
                  AND index_attempts < %(max_attempts)s
                ORDER BY index_next_attempt_at NULLS FIRST, updated_at
                LIMIT %(limit)s
                FOR UPDATE SKIP LOCKED
            )
            , claimed AS (
                UPDATE memories_memory AS memory SET index_queued_at = clock_timestamp()
                FROM due WHERE memory.id = due.id
                RETURNING memory.team_id, memory.id, memory.index_next_attempt_at, memory.updated_at
            )
            -- Ordered here, so no timestamp is read into Python: a row holding one Python
            -- cannot represent (-infinity, a year before 1) would fail the whole claim,
            -- and with it every team's re-enqueue.
            SELECT team_id, id FROM claimed
            ORDER BY index_next_attempt_at IS NOT NULL,
                     COALESCE(index_next_attempt_at, updated_at), updated_at
            """,
            {
                "grace": older_than_seconds,
                "lease": settings.MEMORYHUB_INDEX_LEASE_SECONDS,
                "max_attempts": settings.MEMORYHUB_INDEX_MAX_ATTEMPTS,
                "limit": limit,
            },
        )
        return [(team_id, memory_id) for team_id, memory_id in cursor.fetchall()]


def mark_queued(*, team_id: int, memory_ids: list[uuid.UUID]) -> None:
    """Start the lease of entries about to be handed to the broker (in the caller's
    transaction: they are enqueued when it commits)."""
    with team_scope(team_id):
        Memory.objects.for_team(team_id).filter(id__in=memory_ids).update(index_queued_at=Now())


def release_lease(*, team_id: int, memory_id: uuid.UUID | str) -> None:
    """The broker refused the task: the entry is not queued after all, so the next
    reconcile run may pick it up without waiting out a lease."""
    with team_scope(team_id):
        Memory.objects.for_team(team_id).filter(id=memory_id).update(index_queued_at=None)


def release_leases(*, team_id: int, memory_ids: list[uuid.UUID]) -> None:
    """release_lease for a batch the broker refused (one UPDATE)."""
    with team_scope(team_id):
        Memory.objects.for_team(team_id).filter(id__in=memory_ids).update(index_queued_at=None)


def request_reindex(*, team: Team, actor: str, scope: Literal["stuck", "all"]) -> int:
    """Enqueue indexing after commit; returns how many memories it concerns.

    "stuck": the entries left pending or failed, those given up on after too many
    failures included, with their attempts reset (one index task each, at most
    MAX_RETRY_BATCH); "all": search.tasks.reindex_team, which re-chunks and re-embeds
    every entry of the team with its embedding profile."""
    with transaction.atomic():
        live = Memory.objects.for_team(team.id).filter(deleted_at__isnull=True)
        if scope == "all":
            count = live.count()
            tasks.reindex_after_commit(team_id=team.id)
        elif scope == "stuck":
            ids = list(
                live.filter(index_state__in=[IndexState.PENDING, IndexState.FAILED])
                .order_by("updated_at")
                .values_list("id", flat=True)[:MAX_RETRY_BATCH]
            )
            # Asked for by a person: entries given up on get their full tries again.
            live.filter(id__in=ids).update(index_attempts=0, index_next_attempt_at=None)
            tasks.index_many_after_commit(team_id=team.id, memory_ids=ids)
            count = len(ids)
        else:
            raise InvalidInput("scope is 'stuck' or 'all'", field="scope")
        record_event(
            team=team, actor=actor, action=AuditEvent.Action.TEAM_REINDEX, target=f"{scope}: {count}"
        )
    return count


def known_profiles() -> list[str]:
    """The embedding profile names a team may switch to (empty when the profiles file is broken)."""
    try:
        return sorted(load_profiles())
    except ProfileConfigError:
        return []


def request_profile_switch(*, team: Team, profile: str, actor: str) -> int:
    """Queue the re-index that moves the team to `profile` (search.tasks.reindex_team):
    every entry is embedded with its model first, and the team switches only then, so
    search keeps working on the old vectors meanwhile. Returns how many memories."""
    current = team_profile(team)
    try:
        get_profile(profile or None)
    except UnknownProfile:
        raise InvalidInput(
            f"unknown embedding profile; known: {', '.join(known_profiles())}", field="embedding_profile"
        ) from None
    except ProfileConfigError:
        # The detail (a file path) is for operators: the log and `manage.py check` have it.
        raise InvalidInput(
            "the embedding profiles file is invalid; ask the operator", field="embedding_profile"
        ) from None
    if profile == current:
        raise InvalidInput(f"the team already uses the profile '{profile}'", field="embedding_profile")
    with transaction.atomic():
        count = Memory.objects.for_team(team.id).filter(deleted_at__isnull=True).count()
        tasks.reindex_after_commit(team_id=team.id, profile=profile)
        record_event(
            team=team,
            actor=actor,
            action=AuditEvent.Action.TEAM_REINDEX,
            target=f"embedding_profile: {current} → {profile} (re-index of {count} memories queued)",
        )
    return count


def delete_team_index(*, team: Team) -> dict[str, int]:
    """Every chunk, vector, keyword statistic and key of a team (the receiver of
    teams.hooks.team_shutdown; the caller is inside the team's scope), and the team's
    embedding cache."""
    return {
        "chunk_embeddings": ChunkEmbedding.objects.filter(team=team).delete()[0],
        "chunks": Chunk.objects.filter(team=team).delete()[0],
        "conversation_chunks": ConversationChunk.objects.filter(team=team).delete()[0],
        "keyword_stats": KeywordStat.objects.filter(team=team).delete()[0],
        "key_trigrams": KeyTrigrams.objects.filter(team=team).delete()[0],
        "cached_embeddings": EmbeddingCache.objects.filter(team=team).delete()[0],
    }
