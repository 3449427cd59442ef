"""Re-indexing a team: every chunk embedded with a model, then the team switched to it
(docs/indexing-and-workers.md, "Re-indexing a team").

Indexing (search.services.index_memory) goes on meanwhile; the switch takes the team's
row exclusively, indexing stores vectors under a share lock of it, and whatever the new
vectors do not cover when the team switches is queued again."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from django.db import connection, transaction
from django.db.models import Exists, OuterRef, Q

from memories.models import IndexState, Memory
from search import tasks
from search.chunking import chunk_text
from search.embeddings.profiles import provider_for
from search.models import Chunk, ChunkEmbedding
from search.services import cached_embeddings, lock_team_profile, replace_chunks, store_vectors, team_profile
from search.vector_index import ensure_index
from teams.models import Team
from teams.scope import team_scope

logger = logging.getLogger(__name__)


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
        unchunked = list(
            Memory.objects.for_team(team_id)
            .filter(deleted_at__isnull=True, chunks__isnull=True)
            .order_by("id")
            .values_list("id", flat=True)
        )
    for memory_id in unchunked:
        _chunk_if_unchunked(team_id, memory_id)
    with team_scope(team_id):
        rebuild_keyword_stats(team_id=team_id)
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
            vectors = cached_embeddings(provider, [(c.content_hash, c.text) for c in batch], team_id=team_id)
            with team_scope(team_id):
                store_vectors(team_id, batch, provider.model, vectors)
            embedded += len(batch)
            if progress:
                progress(len(batch))
    with team_scope(team_id):
        # The switch holds the team's row exclusively: an indexing storing vectors holds
        # it shared (index_memory), so it either stored before (its entry is then checked
        # below) or stores after, with the new model.
        lock_team_profile(team_id, exclusive=True)
        Team.objects.filter(id=team_id).update(embedding_profile=target)
        stale = ChunkEmbedding.objects.filter(team_id=team_id)
        if provider is not None:
            stale = stale.exclude(model=provider.model)
        stale.delete()
        live = Memory.objects.for_team(team_id).filter(deleted_at__isnull=True)
        # Entries saved or indexed meanwhile (with the old model, or not yet chunked) are
        # not covered by the new vectors: they go back to `pending` and are queued again.
        incomplete = list(
            live.filter(_lacks_vectors_of(provider.model if provider else None)).values_list("id", flat=True)
        )
        live.exclude(id__in=incomplete).exclude(index_state=IndexState.INDEXED).update(
            index_state=IndexState.INDEXED, index_attempts=0, index_next_attempt_at=None, index_last_error=""
        )
        live.filter(id__in=incomplete).update(index_state=IndexState.PENDING)
        tasks.index_many_after_commit(team_id=team_id, memory_ids=incomplete)
        if incomplete:
            logger.info(
                "re-index of team %s: %d entries changed meanwhile, queued again", team_id, len(incomplete)
            )
    return ReindexReport(
        memories=memory_count, chunks_embedded=embedded, model=provider.model if provider else ""
    )


def _chunk_if_unchunked(team_id: int, memory_id: uuid.UUID) -> None:
    """Chunk one entry the re-index found never chunked, in a transaction of its own.

    The entry's index task may be chunking it at the same moment: replace_chunks then
    waits for the task's chunks and keeps them. One transaction for every such entry
    would also hold the team's keyword statistics row (the chunks' trigger locks it) from
    the first entry on, while a task that had inserted a later entry's chunks waited for
    that row and the re-index for those chunks: a deadlock."""
    with team_scope(team_id):
        memory = (
            Memory.objects.for_team(team_id).filter(id=memory_id).only("id", "team_id", "content").first()
        )
        if memory is not None:
            replace_chunks(memory, chunk_text(memory.content))


def rebuild_keyword_stats(*, team_id: int) -> int:
    """Recompute the team's BM25 statistics (search.models.KeywordStat) from its chunks
    (reindex_team does, and the `reindex` command through it); returns how many rows.
    The team's row is locked first, as the triggers on search_chunk do: an indexing
    adding chunks meanwhile either commits before (and is counted here) or waits and
    adds its own counts to the rebuilt rows after. The caller is in the team's scope."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM search_keywordstat WHERE team_id = %s AND lexeme = '' FOR UPDATE", [team_id]
        )
        cursor.execute("DELETE FROM search_keywordstat WHERE team_id = %s", [team_id])
        cursor.execute(
            """
            INSERT INTO search_keywordstat (team_id, lexeme, chunks, length)
            SELECT %(team)s, lexeme, sum(chunks), sum(length) FROM (
                SELECT '' AS lexeme, 1 AS chunks, length(c.search_vector) AS length
                FROM search_chunk c WHERE c.team_id = %(team)s
                UNION ALL
                SELECT u.lexeme, 1, 0 FROM search_chunk c, unnest(c.search_vector) AS u
                WHERE c.team_id = %(team)s
            ) AS counted GROUP BY lexeme ORDER BY lexeme
            """,
            {"team": team_id},
        )
        return cursor.rowcount


def _lacks_vectors_of(model: str | None) -> Q:
    """Memories (as a filter) that search cannot find fully with `model`: never
    chunked, or a chunk without a vector of `model` (None: the keyword-only profile,
    which needs chunks only)."""
    chunks = Chunk.objects.filter(memory_id=OuterRef("pk"))
    unchunked = Q(~Exists(chunks))
    if model is None:
        return unchunked
    vector = ChunkEmbedding.objects.filter(chunk_id=OuterRef("pk"), model=model)
    return unchunked | Q(Exists(chunks.filter(~Exists(vector))))
