"""Duplicate detection for the save of a new key: the receiver of
memories.hooks.find_duplicate (see memories.writes.save_memory), and of
memories.hooks.find_duplicates for the batch save (memories.writes.save_batch), which gets only the
exact check of all its texts, in one query: its near check runs once the worker has
indexed the entry (search.duplicates_after_indexing).

Two checks, cheapest first:

1. Exact: an active entry of the team with the same content hash (SHA-256 of the
   scrubbed text). Needs no embeddings, so it works with the `none` profile and while
   the provider is down. Similarity 1.0.
2. Near: the new text is chunked as indexing would chunk it, its chunks are embedded
   with the team's provider through the team's embedding cache (so indexing the entry after
   the save embeds nothing again), and each chunk's nearest active chunk of the same
   model is looked up with pgvector. Only the opening of the new text is chunked, and
   its first `MEMORYHUB_DEDUP_MAX_CHUNKS` chunks embedded, inside the save request (a
   bounded cost however long the text); the similarity of two entries is the best
   cosine over all pairs of those chunks and the existing entry's chunks; at least
   `Team.dedup_threshold` (0.92) is a duplicate. Only entries already indexed with that model are seen.
   A near match the texts disagree with (search.hooks.texts_disagree, which freshness
   answers: "port is 5432" / "port is 6432") is no duplicate: the save goes through
   and the contradiction flow raises a nudge once the new entry is indexed.

The near check fails open: no provider, a broken profile or a dead endpoint leave only
the exact check. It runs before the save takes any lock (embedding can be slow), and
outside the API request's transaction while the provider answers
(core.request_transaction); the caller re-checks the entry it acts on under that
entry's lock.
"""

from __future__ import annotations

import logging

from django.conf import settings

from core.request_transaction import outside_request_transaction
from memories.hooks import DuplicateMatch
from memories.models import Memory
from memories.personal import personal_owner_name
from search.chunking import chunk_text
from search.duplicates_after_indexing import duplicate_of_nearest
from search.embeddings.base import EmbeddingProvider, EmbeddingUnavailable
from search.selectors import has_active_vectors, nearest_active_memory
from search.services import cached_embeddings, team_provider
from teams.models import Team

logger = logging.getLogger(__name__)

# Enough text for one chunk of chunk_text's 400 tokens at 6 characters a token (prose
# averages about 4.5): the duplicate check chunks no more than its chunks need.
CHARACTERS_PER_CHUNK = 400 * 6


def find_duplicate(*, team: Team, text: str, key: str) -> DuplicateMatch | None:
    """The active entry of the team, of the same owner as `key` (memories.personal), that
    holds `text` (already scrubbed) already, or None. The caller is inside the team's scope."""
    match = find_exact_duplicates(team=team, texts=[text], keys=[key])[0]
    return match if match is not None else _near_duplicates(team, [text], [key])[0]


def find_exact_duplicates(*, team: Team, texts: list[str], keys: list[str]) -> list[DuplicateMatch | None]:
    """The exact check of each of `texts` (to be saved under `keys`), in order, in one
    query (the receiver of memories.hooks.find_duplicates, for the batch save): no
    embedding, no provider. Only an entry of the same owner as the key counts."""
    active = Memory.objects.for_team(team.id).active()
    hashes = [Memory.hash_content(text) for text in texts]
    holders: dict[tuple[str, str | None], Memory] = {}
    for memory in active.filter(content_hash__in=set(hashes)).order_by("created_at", "id"):
        holders.setdefault((memory.content_hash, personal_owner_name(memory.key)), memory)
    found = [holders.get((h, personal_owner_name(key))) for h, key in zip(hashes, keys, strict=True)]
    return [
        None
        if holder is None
        else DuplicateMatch(
            memory=holder, similarity=1.0, matched_by="content_hash", threshold=team.dedup_threshold
        )
        for holder in found
    ]


def _near_duplicates(team: Team, texts: list[str], keys: list[str]) -> list[DuplicateMatch | None]:
    """The embedding check of each text; all None when it cannot run (fails open)."""
    try:
        provider = team_provider(team)
        if provider is None or not has_active_vectors(team_id=team.id, model=provider.model):
            return [None] * len(texts)
        # The request waits for this: only the opening is chunked and at most a few
        # chunks are embedded (the worker chunks and embeds the whole text when it
        # indexes the entry), so a 64 KiB save costs a bounded amount of CPU.
        openings = [
            chunk_text(text[: settings.MEMORYHUB_DEDUP_MAX_CHUNKS * CHARACTERS_PER_CHUNK])[
                : settings.MEMORYHUB_DEDUP_MAX_CHUNKS
            ]
            for text in texts
        ]
        with outside_request_transaction():
            vectors = cached_embeddings(
                provider,
                [(p.content_hash, p.text) for pieces in openings for p in pieces],
                team_id=team.id,
                # The new text's opening, embedded for the save's own check: other
                # teams' requests come first on shared cores.
                at_background_priority=True,
            )
    except EmbeddingUnavailable as exc:
        logger.warning("team %s: duplicate check by similarity skipped: %s", team.slug, exc)
        return [None] * len(texts)
    return [
        _near_duplicate(team, provider, text, key, [vectors[p.content_hash] for p in pieces])
        for text, key, pieces in zip(texts, keys, openings, strict=True)
    ]


def _near_duplicate(
    team: Team, provider: EmbeddingProvider, text: str, key: str, vectors: list[list[float]]
) -> DuplicateMatch | None:
    nearest = nearest_active_memory(
        team_id=team.id, model=provider.model, dimensions=provider.dimensions, vectors=vectors, key=key
    )
    return duplicate_of_nearest(team, text, nearest)
