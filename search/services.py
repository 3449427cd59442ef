"""Every write of search data: chunking and embedding memories, re-indexing teams.

Indexing is idempotent: it derives a memory version's chunks and vectors from its
content, so running it twice, or after the version was superseded, rewrites the same
rows. Embedding happens outside any transaction (a provider may be slow), and only
text whose (content_hash, model) is not in the EmbeddingCache goes to the provider.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from django.conf import settings
from django.db import connection, transaction

from core.errors import InvalidInput
from memories.models import IndexState, Memory
from search import tasks
from search.chunking import TextChunk, chunk_text
from search.embeddings.base import EmbeddingProvider, EmbeddingUnavailable
from search.embeddings.profiles import provider_for
from search.models import Chunk, ChunkEmbedding, EmbeddingCache
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


def index_memory(*, team_id: int, memory_id: uuid.UUID | str) -> str:
    """Chunk and embed one memory version; set its index_state.

    Chunks are written even when embedding fails, so the entry is found by keyword at
    once; it is then `failed` and the reconcile job retries it."""
    with team_scope(team_id):
        memory = Memory.objects.for_team(team_id).select_related("team").filter(id=memory_id).first()
        if memory is None:
            return IndexOutcome.GONE
        team = memory.team
        pieces = chunk_text(memory.content)
        _replace_chunks(memory, pieces)

    if memory.deleted_at is not None:
        # Never returned by search; nothing to embed.
        _set_state(team_id, memory.id, IndexState.INDEXED)
        return IndexOutcome.GONE

    try:
        provider = team_provider(team)
        if provider is None:
            _set_state(team_id, memory.id, IndexState.INDEXED)
            return IndexOutcome.KEYWORD_ONLY
        vectors = cached_embeddings(provider, [(p.content_hash, p.text) for p in pieces])
    except EmbeddingUnavailable as exc:
        logger.warning("embedding memory %s of team %s failed: %s", memory.key, team.slug, exc)
        _set_state(team_id, memory.id, IndexState.FAILED)
        return IndexOutcome.FAILED

    with team_scope(team_id):
        _ensure_index_once(provider)
        _store_vectors(
            team_id, Chunk.objects.filter(team_id=team_id, memory_id=memory.id), provider.model, vectors
        )
        Memory.objects.for_team(team_id).filter(id=memory.id).update(index_state=IndexState.INDEXED)
    return IndexOutcome.INDEXED


def _store_vectors(
    team_id: int, chunks: Iterable[Chunk], model: str, vectors: dict[str, list[float]]
) -> None:
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


def _ensure_index_once(provider: EmbeddingProvider) -> None:
    """A model's first vectors in this process make sure its HNSW index exists."""
    if provider.model not in _indexed_models:
        ensure_index(provider.model, provider.dimensions)
        _indexed_models.add(provider.model)


def cached_embeddings(
    provider: EmbeddingProvider, items: Iterable[tuple[str, str]]
) -> dict[str, list[float]]:
    """Vectors by content hash for (content_hash, text) pairs; only hashes the cache
    does not hold for this model are sent to the provider, each once."""
    texts = dict(items)
    vectors: dict[str, list[float]] = {
        row.content_hash: row.embedding
        for row in EmbeddingCache.objects.filter(model=provider.model, content_hash__in=list(texts))
    }
    missing = [h for h in texts if h not in vectors]
    if missing:
        fresh = provider.embed_documents([texts[h] for h in missing])
        EmbeddingCache.objects.bulk_create(
            [
                EmbeddingCache(content_hash=h, model=provider.model, dimensions=len(v), embedding=v)
                for h, v in zip(missing, fresh, strict=True)
            ],
            ignore_conflicts=True,
        )
        vectors.update(zip(missing, fresh, strict=True))
    return vectors


def _replace_chunks(memory: Memory, pieces: list[TextChunk]) -> None:
    existing = list(Chunk.objects.filter(team_id=memory.team_id, memory_id=memory.id).order_by("chunk_index"))
    if [(c.chunk_index, c.content_hash) for c in existing] == [(p.index, p.content_hash) for p in pieces]:
        return  # unchanged: keep the rows and their embeddings
    Chunk.objects.filter(team_id=memory.team_id, memory_id=memory.id).delete()
    Chunk.objects.bulk_create(
        [
            Chunk(
                team_id=memory.team_id,
                memory_id=memory.id,
                chunk_index=p.index,
                text=p.text,
                token_count=p.token_count,
                content_hash=p.content_hash,
            )
            for p in pieces
        ]
    )


def _set_state(team_id: int, memory_id: uuid.UUID, state: str) -> None:
    with team_scope(team_id):
        Memory.objects.for_team(team_id).filter(id=memory_id).update(index_state=state)


@dataclass
class ReindexReport:
    memories: int
    chunks_embedded: int
    model: str


def reindex_team(
    *,
    team_id: int,
    profile: str | None = None,
    batch_size: int = 64,
    progress: Callable[[int], None] | None = None,
) -> ReindexReport:
    """Embed every chunk of a team with `profile`'s model (the team's own when None),
    then switch the team to it and drop the other models' vectors.

    Until the switch, search keeps using the old model, so nothing is lost midway; a
    failure leaves the team on its old model with the new vectors partly written,
    and running it again continues from the cache."""
    with team_scope(team_id):
        team = Team.objects.get(id=team_id)
        target = profile or team_profile(team)
        unchunked = (
            Memory.objects.for_team(team_id)
            .filter(deleted_at__isnull=True, chunks__isnull=True)
            .only("id", "team_id", "content")
        )
        for memory in unchunked:
            _replace_chunks(memory, chunk_text(memory.content))
        memory_count = Memory.objects.for_team(team_id).filter(deleted_at__isnull=True).count()
        chunk_ids = list(
            Chunk.objects.filter(team_id=team_id, memory__deleted_at__isnull=True)
            .order_by("id")
            .values_list("id", flat=True)
        )
    provider = provider_for(target)
    embedded = 0
    if provider is not None:
        with team_scope(team_id):
            ensure_index(provider.model, provider.dimensions)
        for start in range(0, len(chunk_ids), batch_size):
            batch_ids = chunk_ids[start : start + batch_size]
            with team_scope(team_id):
                batch = list(Chunk.objects.filter(team_id=team_id, id__in=batch_ids))
            vectors = cached_embeddings(provider, [(c.content_hash, c.text) for c in batch])
            with team_scope(team_id):
                _store_vectors(team_id, batch, provider.model, vectors)
            embedded += len(batch)
            if progress:
                progress(len(batch))
    with team_scope(team_id):
        Team.objects.filter(id=team_id).update(embedding_profile=target)
        stale = ChunkEmbedding.objects.filter(team_id=team_id)
        if provider is not None:
            stale = stale.exclude(model=provider.model)
        stale.delete()
        Memory.objects.for_team(team_id).filter(deleted_at__isnull=True).exclude(
            index_state=IndexState.INDEXED
        ).update(index_state=IndexState.INDEXED)
    return ReindexReport(
        memories=memory_count, chunks_embedded=embedded, model=provider.model if provider else ""
    )


def pending_memories(*, older_than_seconds: int, limit: int) -> list[tuple[int, uuid.UUID]]:
    """(team_id, memory_id) of entries whose indexing never finished or failed.

    Runs in the operators' bypass scope: the reconcile job looks at every team."""
    with (
        dangerously_bypass_team_scope(reason="reconcile pending index states", actor="celery-beat"),
        connection.cursor() as cursor,
    ):
        cursor.execute(
            """
                SELECT team_id, id FROM memories_memory
                WHERE index_state IN ('pending', 'failed') AND deleted_at IS NULL
                  AND updated_at < clock_timestamp() - make_interval(secs => %s)
                ORDER BY updated_at LIMIT %s
                """,
            [older_than_seconds, limit],
        )
        return [(team_id, memory_id) for team_id, memory_id in cursor.fetchall()]


def request_reindex(*, team: Team, actor: str, scope: Literal["stuck", "all"]) -> int:
    """Enqueue indexing after commit; returns how many memories it concerns.

    "stuck": the entries left pending or failed (one index task each, at most
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
            for memory_id in ids:
                tasks.index_after_commit(team_id=team.id, memory_id=memory_id)
            count = len(ids)
        else:
            raise InvalidInput("scope is 'stuck' or 'all'", field="scope")
        record_event(
            team=team, actor=actor, action=AuditEvent.Action.TEAM_REINDEX, target=f"{scope}: {count}"
        )
    return count


def delete_team_index(*, team: Team) -> dict[str, int]:
    """Every chunk and vector of a team (the receiver of teams.hooks.team_shutdown; the
    caller is inside the team's scope). The shared EmbeddingCache holds no team data."""
    return {
        "chunk_embeddings": ChunkEmbedding.objects.filter(team=team).delete()[0],
        "chunks": Chunk.objects.filter(team=team).delete()[0],
    }
