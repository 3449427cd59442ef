"""Indexing a batch of one team's entries (search.tasks.index_memories): a few set-based
statements per batch instead of several transactions per entry (docs/indexing-and-workers.md,
"Indexing"). Each step keeps what indexing one entry (search.services.index_memory) does:
the team's profile lock, the failure's backoff, the near-duplicate check's outcome."""

from __future__ import annotations

import logging
import uuid

from core.yield_to_requests import yield_to_other_teams
from memories.models import IndexState, Memory
from search import duplicates_after_indexing
from search.chunking import TextChunk, chunk_text
from search.embeddings.base import EmbeddingProvider, EmbeddingUnavailable
from search.embeddings.profiles import provider_for
from search.models import Chunk, ChunkEmbedding, EmbeddingCache
from search.services import (
    MAX_PROFILE_SWITCHES_PER_INDEXING,
    IndexOutcome,
    ensure_index_once,
    index_memory,
    lock_team_profile,
    record_failure,
    record_failure_of,
    replace_chunks,
    store_vectors,
    team_profile,
)
from teams.models import Team
from teams.scope import team_scope

logger = logging.getLogger(__name__)


def index_batch(*, team_id: int, memory_ids: list[str]) -> dict[str, str]:
    """index_memory for a batch of one team's entries (search.tasks.index_memories),
    in a few set-based statements per batch instead of several transactions per entry:
    one transaction chunks every entry, the team's cache is read once, the chunks it
    lacks are embedded in provider batches (each after yield_to_other_teams), and one
    transaction under the team's profile lock stores every vector and marks every
    entry indexed; the pending near-duplicate checks then run in one pass
    (search.duplicates_after_indexing.check_indexed_entries). Nothing is announced: the
    caller hands the indexed entries to announce_indexed.

    Returns the outcome per entry id. When a set-based step raises (bad data in one
    entry, a deadlock with a re-index chunking the same entry), the batch's entries
    not yet settled are indexed one by one by index_memory, each on its own: one
    entry's failure never stops the others, and it is recorded as a failed attempt."""
    outcomes: dict[str, str] = {}
    try:
        _index_batch_together(team_id, memory_ids, outcomes)
    except Exception:
        logger.exception(
            "indexing %d memories of team %s together failed; indexing them one by one",
            len(memory_ids),
            team_id,
        )
        for memory_id in memory_ids:
            if str(memory_id) not in outcomes:
                outcomes[str(memory_id)] = _index_alone(team_id, memory_id)
    return outcomes


def _index_alone(team_id: int, memory_id: str) -> str:
    """index_memory of one entry, whose failure is logged and recorded, never raised."""
    try:
        return index_memory(team_id=team_id, memory_id=memory_id, announce=False)
    except Exception as exc:
        logger.exception("indexing memory %s of team %s failed", memory_id, team_id)
        try:
            record_failure(team_id, uuid.UUID(str(memory_id)), exc)
        except Exception:
            logger.exception("recording the failure of memory %s of team %s", memory_id, team_id)
        return IndexOutcome.FAILED


def _index_batch_together(team_id: int, memory_ids: list[str], outcomes: dict[str, str]) -> None:
    wanted = [uuid.UUID(str(memory_id)) for memory_id in memory_ids]
    with team_scope(team_id):
        team = Team.objects.filter(id=team_id).first()
        if team is None:
            outcomes.update((str(memory_id), IndexOutcome.GONE) for memory_id in wanted)
            return
        found = {memory.id: memory for memory in Memory.objects.for_team(team_id).filter(id__in=wanted)}
        # In the batch's order (a duplicate id once): the near checks run in that order.
        memories = [found[memory_id] for memory_id in dict.fromkeys(wanted) if memory_id in found]
        pieces = {memory.id: chunk_text(memory.content) for memory in memories}
        _replace_chunks_of_batch(team_id, memories, pieces)
    for memory_id in wanted:
        if memory_id not in found:
            outcomes[str(memory_id)] = IndexOutcome.GONE
    deleted = [memory for memory in memories if memory.deleted_at is not None]
    live = [memory for memory in memories if memory.deleted_at is None]
    if deleted:
        # Never returned by search; nothing to embed, nothing to compare (the near check fails open).
        _record_success_of(team_id, [memory.id for memory in deleted], drop_near_check=True)
        outcomes.update((str(memory.id), IndexOutcome.GONE) for memory in deleted)
    if not live:
        return
    live_ids = [memory.id for memory in live]
    profile = team_profile(team)
    for _ in range(MAX_PROFILE_SWITCHES_PER_INDEXING):
        try:
            provider = provider_for(profile)
            vectors = (
                _batch_vectors(provider, [p for m in live for p in pieces[m.id]], team_id=team_id)
                if provider is not None
                else {}
            )
        except EmbeddingUnavailable as exc:
            logger.warning("embedding %d memories of team %s failed: %s", len(live), team.slug, exc)
            # The near checks stay pending: the retry that indexes the entries runs them.
            record_failure_of(team_id, live_ids, exc)
            outcomes.update((str(memory_id), IndexOutcome.FAILED) for memory_id in live_ids)
            return
        with team_scope(team_id):
            current = lock_team_profile(team_id, exclusive=False)
            if current != profile:
                profile = current
                continue
            if provider is None:
                _record_success_of(team_id, live_ids, drop_near_check=True)
                outcomes.update((str(memory_id), IndexOutcome.KEYWORD_ONLY) for memory_id in live_ids)
                return
            ensure_index_once(provider)
            chunks = Chunk.objects.filter(team_id=team_id, memory_id__in=live_ids).order_by("id")
            seen_before = _memories_with_vectors(team_id, live_ids, provider.model)
            store_vectors(team_id, chunks, provider.model, vectors)
            _record_success_of(team_id, live_ids, drop_near_check=False)
        outcomes.update((str(memory_id), IndexOutcome.INDEXED) for memory_id in live_ids)
        checked = [memory for memory in live if memory.near_check_pending]
        if checked:
            duplicates_after_indexing.check_indexed_entries(
                team=team,
                memory_ids=[memory.id for memory in checked],
                batch_order=live_ids,
                unseen=[memory_id for memory_id in live_ids if memory_id not in seen_before],
                model=provider.model,
                dimensions=provider.dimensions,
            )
        return
    logger.warning("%d memories of team %s: embedding model changed while indexing", len(live), team.slug)
    with team_scope(team_id):
        Memory.objects.for_team(team_id).filter(id__in=live_ids, near_check_pending=True).update(
            near_check_pending=False
        )
    outcomes.update((str(memory_id), IndexOutcome.FAILED) for memory_id in live_ids)


def _replace_chunks_of_batch(
    team_id: int, memories: list[Memory], pieces: dict[uuid.UUID, list[TextChunk]]
) -> None:
    """replace_chunks for a batch, in the caller's transaction: one read of the chunks
    there are, one insert of those of every entry that had none. The rows are inserted
    in (memory, chunk_index) order, so two transactions inserting the same entries'
    chunks wait for each other in one order and never deadlock; the keyword statistics'
    trigger runs once, at the end of the statement, and the caller commits right after.
    An entry whose chunks changed (the chunker changed since) is replaced on its own."""
    existing: dict[uuid.UUID, list[tuple[int, str]]] = {}
    for memory_id, chunk_index, content_hash in (
        Chunk.objects.filter(team_id=team_id, memory_id__in=[m.id for m in memories])
        .order_by("memory_id", "chunk_index")
        .values_list("memory_id", "chunk_index", "content_hash")
    ):
        existing.setdefault(memory_id, []).append((chunk_index, content_hash))
    fresh: list[Chunk] = []
    for memory in sorted(memories, key=lambda m: m.id):
        wanted = [(p.index, p.content_hash) for p in pieces[memory.id]]
        had = existing.get(memory.id)
        if had == wanted:
            continue
        if had:
            replace_chunks(memory, pieces[memory.id])
            continue
        fresh.extend(
            Chunk(
                team_id=team_id,
                memory_id=memory.id,
                chunk_index=p.index,
                text=p.text,
                token_count=p.token_count,
                content_hash=p.content_hash,
            )
            for p in pieces[memory.id]
        )
    if fresh:
        Chunk.objects.bulk_create(fresh, ignore_conflicts=True)


def _batch_vectors(
    provider: EmbeddingProvider, pieces: list[TextChunk], *, team_id: int
) -> dict[str, list[float]]:
    """Vectors by content hash for a batch's chunks: the team's cache read once, and
    only what it lacks embedded, shortest first, one provider batch at a time, each after
    the look at other teams' requests (as _embed_yielding) and written to the cache at
    once."""
    texts = {p.content_hash: p for p in pieces}
    vectors: dict[str, list[float]] = {}
    hashes = list(texts)
    with team_scope(team_id):
        for start in range(0, len(hashes), CACHE_READ_SIZE):
            vectors.update(
                EmbeddingCache.objects.filter(
                    team_id=team_id,
                    model=provider.model,
                    content_hash__in=hashes[start : start + CACHE_READ_SIZE],
                ).values_list("content_hash", "embedding")
            )
    # By length, so each provider batch holds chunks of about one length: a batch is padded
    # to its longest chunk, and in the entries' order one long chunk made a batch of short
    # ones cost as much as eight long ones.
    missing = sorted(
        (piece for content_hash, piece in texts.items() if content_hash not in vectors),
        key=lambda piece: len(piece.text),
    )
    size = max(1, provider.batch_size)
    for start in range(0, len(missing), size):
        yield_to_other_teams(team_id)
        batch = missing[start : start + size]
        fresh = provider.embed_documents([piece.text for piece in batch])
        # Written per provider batch: a batch that fails later keeps what it embedded.
        with team_scope(team_id):
            EmbeddingCache.objects.bulk_create(
                [
                    EmbeddingCache(
                        team_id=team_id,
                        content_hash=p.content_hash,
                        model=provider.model,
                        dimensions=len(v),
                        embedding=v,
                    )
                    for p, v in zip(batch, fresh, strict=True)
                ],
                ignore_conflicts=True,
            )
        vectors.update((p.content_hash, v) for p, v in zip(batch, fresh, strict=True))
    return vectors


# Content hashes per read of the embedding cache in a batch: a 100-entry batch of long
# entries stays one or two statements.
CACHE_READ_SIZE = 1000


def _memories_with_vectors(team_id: int, memory_ids: list[uuid.UUID], model: str) -> set[uuid.UUID]:
    """Which of the entries already have a vector of `model` (an earlier indexing)."""
    return set(
        ChunkEmbedding.objects.filter(team_id=team_id, model=model, chunk__memory_id__in=memory_ids)
        .values_list("chunk__memory_id", flat=True)
        .distinct()
    )


def _record_success_of(team_id: int, memory_ids: list[uuid.UUID], *, drop_near_check: bool) -> None:
    """_record_success for several entries in one UPDATE (with `drop_near_check`, their
    pending near checks are given up: there are no vectors to compare)."""
    fields: dict[str, object] = {
        "index_state": IndexState.INDEXED,
        "index_queued_at": None,
        "index_attempts": 0,
        "index_next_attempt_at": None,
        "index_last_error": "",
    }
    if drop_near_check:
        fields["near_check_pending"] = False
    with team_scope(team_id):
        Memory.objects.for_team(team_id).filter(id__in=memory_ids).update(**fields)
