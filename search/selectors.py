"""The hybrid search pipeline (read path).

1. Keyword path: PostgreSQL full-text over chunk tsvectors. The query's lexemes are
   OR-ed (an agent's query is a sentence, not a boolean formula), ranked with
   `ts_rank`, best chunk per memory. Keyword score = rank / best rank among this
   query's candidates, so 0..1 with 1 for the best keyword match.
2. Vector path: cosine similarity (1 - cosine distance, floored at 0) between the
   query embedding and chunk embeddings of the team's model, best chunk per memory.
   Teams with few vectors are scanned exactly; larger ones go through the model's
   HNSW index with pgvector's iterative scan, so filters applied after the index
   (team, type, project, state) cannot silently return fewer than k rows.
3. Every candidate of either path gets both scores (exactly, by memory id), then
   merged = w_vec * vector + w_kw * keyword (team weights, 0.7 / 0.3 by default).
4. Decay: merged * 0.5 ** (age_days / half_life), identity and lesson exempt.
5. Rating: score = merged * decay * (1 + 0.05 * clamp(upvotes - downvotes, -5, 5)), so
   a version's net rating moves it by at most ±25% (0.75..1.25); unrated entries are
   unchanged. Applied after decay and before min_score and MMR; deterministic (it
   depends only on the stored vote counts). `explain.rating` shows the factor.
6. MMR (λ = 0.7) over Jaccard similarity of token sets picks the top k.
7. Skills (memories.skills.triggered_skills): up to MEMORYHUB_SKILLS_PER_SEARCH (5)
   active skills with a keyword in the query, in the project asked for and passing the
   type and tag/people filters, go above the k results (not counted in k), with score
   1.0, source "skill_trigger" and `via_skill_trigger`; they are left out of the k.

Each result carries its net `rating` and the notes of its key (`annotations`, fetched
in one query for all results); superseded results say what replaced them
(`superseded_by`). Counting the results as accesses is the caller's write (the API
calls memories.services.record_access).

No provider, a broken profile or a dead endpoint → keyword only, search_mode
"keyword", a logged warning; never an error.
"""

from __future__ import annotations

import json
import logging
import math
import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from core.errors import InvalidInput
from memories.extraction import metadata_filter_document
from memories.models import Annotation, Memory
from memories.selectors import annotations_for, successors_of
from memories.skills import DEFAULT_SKILLS_PER_SEARCH, triggered_skills
from memories.types import MemoryType
from search.embeddings.base import EmbeddingProvider, EmbeddingUnavailable
from search.models import SEARCH_CONFIG, Chunk
from search.services import team_provider
from teams.models import Team

logger = logging.getLogger(__name__)

SearchMode = Literal["hybrid", "keyword", "vector"]

MAX_QUERY_CHARS = 8000
MAX_RESULTS = 50
MMR_LAMBDA = 0.7
DECAY_EXEMPT_TYPES = frozenset({MemoryType.IDENTITY, MemoryType.LESSON})
# Below this many vectors a team is scanned exactly: exact is fast at that size, and
# an approximate scan filtered down to a small team could come back short.
EXACT_SCAN_BELOW = 10_000
MAX_QUERY_LEXEMES = 256
SNIPPET_CHARS = 300
# Skills whose keywords are in the query come first, with this score and source.
SKILL_SCORE = 1.0
SKILL_SOURCE = "skill_trigger"
RATING_STEP = 0.05
RATING_CAP = 5
_TOKEN = re.compile(r"\w+", re.UNICODE)


@dataclass
class SearchResult:
    memory_id: uuid.UUID
    key: str
    snippet: str
    score: float
    type: str
    is_active: bool
    source: str
    created_at: datetime
    superseded_by: dict[str, Any] | None = None
    explain: dict[str, Any] | None = None
    rating: int = 0
    annotations: list[Annotation] = field(default_factory=list)
    via_skill_trigger: bool = False
    skill: str | None = None  # the skill's name, on results a skill trigger brought in
    matched_keyword: str | None = None


@dataclass
class SearchOutcome:
    search_mode: str
    results: list[SearchResult]
    warnings: list[str] = field(default_factory=list)


@dataclass
class _Candidate:
    memory_id: uuid.UUID
    keyword_rank: float = 0.0
    keyword_chunk: int | None = None
    similarity: float | None = None
    vector_chunk: int | None = None
    found_by: set[str] = field(default_factory=set)


def search_memories(
    *,
    team: Team,
    query: str,
    max_results: int = 5,
    min_score: float | None = None,
    types: list[str] | None = None,
    project: str | None = None,
    include_superseded: bool = True,
    tags: list[str] | None = None,
    people: list[str] | None = None,
    explain: bool = False,
    mode: SearchMode = "hybrid",
    diversify: bool = True,
    decay: bool = True,
) -> SearchOutcome:
    """Search the team's memories. The caller is inside the team's scope."""
    query = query.strip()
    if not query:
        raise InvalidInput("query must not be empty", field="query")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidInput(f"query is limited to {MAX_QUERY_CHARS} characters", field="query")
    if not 1 <= max_results <= MAX_RESULTS:
        raise InvalidInput(f"max_results must be between 1 and {MAX_RESULTS}", field="max_results")

    warnings: list[str] = []
    provider, query_vector = None, None
    if mode != "keyword":
        provider, query_vector = _embed_query(team, query, warnings)
    search_mode: str = mode if query_vector is not None else "keyword"
    filters = _Filters(
        team_id=team.id,
        types=types,
        project=project,
        include_superseded=include_superseded,
        metadata=metadata_filter_document(tags, people),
    )
    candidate_count = max(max_results * 4, 40)

    with transaction.atomic():
        fired = triggered_skills(
            team_id=team.id,
            query=query,
            project=project,
            types=types,
            tags=tags,
            people=people,
            limit=getattr(settings, "MEMORYHUB_SKILLS_PER_SEARCH", DEFAULT_SKILLS_PER_SEARCH),
        )
        candidates: dict[uuid.UUID, _Candidate] = {}
        if search_mode in ("hybrid", "keyword"):
            for memory_id, rank, chunk_id in _keyword_matches(query, filters, limit=candidate_count):
                c = candidates.setdefault(memory_id, _Candidate(memory_id))
                c.keyword_rank, c.keyword_chunk = rank, chunk_id
                c.found_by.add("keyword")
        if provider is not None and query_vector is not None:
            for memory_id, similarity, chunk_id in _vector_matches(
                provider, query_vector, filters, limit=candidate_count
            ):
                c = candidates.setdefault(memory_id, _Candidate(memory_id))
                c.similarity, c.vector_chunk = similarity, chunk_id
                c.found_by.add("vector")
        if search_mode == "hybrid":
            _complete_scores(candidates, query, provider, query_vector, filters)
        for memory, _keyword in fired:  # listed above the others, never twice
            candidates.pop(memory.id, None)
        memories = {m.id: m for m in Memory.objects.for_team(team.id).filter(id__in=list(candidates))}
        snippets = _snippets(team.id, candidates)
        successors = successors_of(
            team_id=team.id, memory_ids=[m.id for m in memories.values() if not m.is_active]
        )

    best_rank = max((c.keyword_rank for c in candidates.values()), default=0.0) or 1.0
    now = timezone.now()
    scored: list[tuple[float, _Candidate, dict[str, float]]] = []
    for c in candidates.values():
        memory = memories.get(c.memory_id)
        if memory is None:
            continue
        keyword = c.keyword_rank / best_rank
        vector = c.similarity or 0.0
        if search_mode == "hybrid":
            merged = team.hybrid_vector_weight * vector + team.hybrid_keyword_weight * keyword
        elif search_mode == "vector":
            merged = vector
        else:
            merged = keyword
        factor = _decay(memory, now, team.decay_half_life_days) if decay else 1.0
        boost = rating_factor(memory.rating)
        score = round(merged * factor * boost, 6)
        if min_score is not None and score < min_score:
            continue
        parts = {"vector": vector, "keyword": keyword, "merged": merged, "decay": factor, "rating": boost}
        scored.append((score, c, parts))
    scored.sort(key=lambda item: (-item[0], str(item[1].memory_id)))

    picked = _mmr(scored, memories, max_results) if diversify else [(s, c, p, None) for s, c, p in scored]
    picked = picked[:max_results]
    notes = annotations_for(team.id, [m.id for m, _ in fired] + [c.memory_id for _, c, _, _ in picked])
    results = [
        SearchResult(
            memory_id=memory.id,
            key=memory.key,
            snippet=_shorten(memory.content),
            score=SKILL_SCORE,
            type=memory.type,
            is_active=memory.is_active,
            source=SKILL_SOURCE,
            created_at=memory.created_at,
            rating=memory.rating,
            annotations=notes.get(memory.id, []),
            via_skill_trigger=True,
            skill=(memory.skill_trigger or {}).get("name"),
            matched_keyword=keyword,
        )
        for memory, keyword in fired
    ]
    for score, c, parts, mmr in picked:
        memory = memories[c.memory_id]
        results.append(
            SearchResult(
                memory_id=memory.id,
                key=memory.key,
                snippet=snippets.get(c.memory_id, memory.content[:SNIPPET_CHARS]),
                score=score,
                type=memory.type,
                is_active=memory.is_active,
                source="+".join(sorted(c.found_by)),
                created_at=memory.created_at,
                superseded_by=successors.get(memory.id),
                explain={**{k: round(v, 6) for k, v in parts.items()}, "mmr": mmr} if explain else None,
                rating=memory.rating,
                annotations=notes.get(memory.id, []),
            )
        )
    return SearchOutcome(search_mode=search_mode, results=results, warnings=warnings)


def _embed_query(
    team: Team, query: str, warnings: list[str]
) -> tuple[EmbeddingProvider | None, list[float] | None]:
    try:
        provider = team_provider(team)
        if provider is None:
            return None, None
        return provider, provider.embed_query(query)
    except EmbeddingUnavailable as exc:
        message = f"vector search unavailable, answering keyword-only: {exc}"
        logger.warning("team %s: %s", team.slug, message)
        warnings.append(message)
        return None, None


@dataclass
class _Filters:
    team_id: int
    types: list[str] | None
    project: str | None
    include_superseded: bool
    metadata: dict[str, list[str]] | None = None

    def sql(self) -> tuple[str, list[Any]]:
        # A deleted key takes its earlier versions out of search with it.
        clauses = [
            "m.team_id = %s",
            "m.deleted_at IS NULL",
            "NOT EXISTS (SELECT 1 FROM memories_memory d WHERE d.team_id = m.team_id AND d.key = m.key"
            " AND d.deleted_at IS NOT NULL AND d.created_at >= m.created_at)",
        ]
        params: list[Any] = [self.team_id]
        if not self.include_superseded:
            clauses.append("m.is_active")
        if self.types:
            clauses.append("m.type = ANY(%s)")
            params.append(list(self.types))
        if self.project is not None:
            clauses.append("m.project = %s")
            params.append(self.project)
        if self.metadata:
            clauses.append("m.metadata @> %s::jsonb")
            params.append(json.dumps(self.metadata))
        return " AND ".join(clauses), params


# The query's lexemes, OR-ed, each quoted as a tsquery literal.
_OR_QUERY = f"""
    SELECT to_tsquery('simple', coalesce(string_agg(
        '''' || replace(replace(lexeme, '\\', '\\\\'), '''', '''''') || '''', ' | '), ''))
    FROM (SELECT lexeme FROM unnest(to_tsvector('{SEARCH_CONFIG}', %s)) LIMIT {MAX_QUERY_LEXEMES}) AS lexemes
"""  # noqa: S608 (constants only)


def _keyword_matches(
    query: str, filters: _Filters, *, limit: int | None, memory_ids: list[uuid.UUID] | None = None
) -> list[tuple[uuid.UUID, float, int]]:
    where, params = filters.sql()
    only = ""
    if memory_ids is not None:
        only = "AND c.memory_id = ANY(%s)"
        params = [*params, memory_ids]
    sql = f"""
        WITH q AS MATERIALIZED ({_OR_QUERY}),
        best AS (
            SELECT DISTINCT ON (c.memory_id) c.memory_id, ts_rank(c.search_vector, q.to_tsquery) AS rank, c.id
            FROM q, search_chunk c JOIN memories_memory m ON m.id = c.memory_id
            WHERE c.team_id = %s AND c.search_vector @@ q.to_tsquery AND {where} {only}
            ORDER BY c.memory_id, rank DESC
        )
        SELECT memory_id, rank, id FROM best ORDER BY rank DESC, memory_id
        {"LIMIT %s" if limit is not None else ""}
    """  # noqa: S608 (fragments are constants; values are parameters)
    args = [query, filters.team_id, *params] + ([limit] if limit is not None else [])
    with connection.cursor() as cursor:
        cursor.execute(sql, args)
        return [(row[0], float(row[1]), row[2]) for row in cursor.fetchall()]


def _vector_matches(
    provider: EmbeddingProvider,
    query_vector: list[float],
    filters: _Filters,
    *,
    limit: int,
    memory_ids: list[uuid.UUID] | None = None,
) -> list[tuple[uuid.UUID, float, int]]:
    where, params = filters.sql()
    vector_literal = _vector_literal(query_vector)
    with connection.cursor() as cursor:
        exact = (
            memory_ids is not None
            or _vector_count(cursor, filters.team_id, provider.model) < EXACT_SCAN_BELOW
        )
        if exact:
            only = ""
            if memory_ids is not None:
                only = "AND c.memory_id = ANY(%s)"
                params = [*params, memory_ids]
            # No cast to vector(n): this expression does not match the HNSW index, so
            # the planner scans the team's rows exactly.
            sql = f"""
                SELECT memory_id, distance, chunk_id FROM (
                    SELECT DISTINCT ON (c.memory_id) c.memory_id, e.embedding <=> %s::vector AS distance,
                           c.id AS chunk_id
                    FROM search_chunkembedding e
                    JOIN search_chunk c ON c.id = e.chunk_id
                    JOIN memories_memory m ON m.id = c.memory_id
                    WHERE e.team_id = %s AND e.model = %s AND {where} {only}
                    ORDER BY c.memory_id, distance
                ) best ORDER BY distance, memory_id LIMIT %s
            """  # noqa: S608
            cursor.execute(sql, [vector_literal, filters.team_id, provider.model, *params, limit])
        else:
            dims = int(provider.dimensions)
            cursor.execute("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true)")
            cursor.execute(
                "SELECT set_config('hnsw.ef_search', %s, true)", [str(min(1000, max(100, limit * 4)))]
            )
            # Several chunks of one memory may come back; fetch extra and keep the best.
            sql = f"""
                WITH nearest AS MATERIALIZED (
                    SELECT c.memory_id, e.embedding::vector({dims}) <=> %s::vector({dims}) AS distance,
                           c.id AS chunk_id
                    FROM search_chunkembedding e
                    JOIN search_chunk c ON c.id = e.chunk_id
                    JOIN memories_memory m ON m.id = c.memory_id
                    WHERE e.model = %s AND e.team_id = %s AND {where}
                    ORDER BY e.embedding::vector({dims}) <=> %s::vector({dims})
                    LIMIT %s
                )
                SELECT DISTINCT ON (memory_id) memory_id, distance, chunk_id FROM nearest
                ORDER BY memory_id, distance
            """  # noqa: S608
            cursor.execute(
                sql,
                [vector_literal, provider.model, filters.team_id, *params, vector_literal, limit * 2],
            )
        rows = [(row[0], max(0.0, 1.0 - float(row[1])), row[2]) for row in cursor.fetchall()]
    rows.sort(key=lambda row: (-row[1], str(row[0])))
    return rows[:limit]


def has_active_vectors(*, team_id: int, model: str) -> bool:
    """Whether any active entry of the team has a vector of `model` (a save skips
    embedding for the duplicate check when there is nothing to compare with)."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT EXISTS (
                SELECT 1 FROM search_chunkembedding e
                JOIN search_chunk c ON c.id = e.chunk_id
                JOIN memories_memory m ON m.id = c.memory_id
                WHERE e.team_id = %s AND e.model = %s AND m.team_id = %s AND m.is_active
            )
            """,
            [team_id, model, team_id],
        )
        return bool(cursor.fetchone()[0])


def nearest_active_memory(
    *, team_id: int, provider: EmbeddingProvider, vectors: list[list[float]]
) -> tuple[uuid.UUID, float] | None:
    """The active entry of the team whose nearest chunk is closest to any of `vectors`
    (the chunks of a text about to be saved), with that cosine similarity: the
    similarity of two entries is the best over all pairs of their chunks. Only vectors
    of the provider's model count; entries not indexed yet are not seen."""
    filters = _Filters(team_id=team_id, types=None, project=None, include_superseded=False)
    best: tuple[uuid.UUID, float] | None = None
    for vector in vectors:
        for memory_id, similarity, _chunk in _vector_matches(provider, vector, filters, limit=1):
            if best is None or similarity > best[1]:
                best = (memory_id, similarity)
    return best


def _vector_count(cursor: Any, team_id: int, model: str) -> int:
    cursor.execute(
        "SELECT count(*) FROM"
        " (SELECT 1 FROM search_chunkembedding WHERE team_id = %s AND model = %s LIMIT %s) AS capped",
        [team_id, model, EXACT_SCAN_BELOW],
    )
    return cursor.fetchone()[0]


def _vector_literal(vector: list[float]) -> str:
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


def _complete_scores(
    candidates: dict[uuid.UUID, _Candidate],
    query: str,
    provider: EmbeddingProvider | None,
    query_vector: list[float] | None,
    filters: _Filters,
) -> None:
    """Give every candidate both scores: one path's top list says nothing about how a
    memory found only by the other path scores on this one."""
    no_keyword = [c.memory_id for c in candidates.values() if "keyword" not in c.found_by]
    if no_keyword:
        for memory_id, rank, chunk_id in _keyword_matches(query, filters, limit=None, memory_ids=no_keyword):
            candidates[memory_id].keyword_rank, candidates[memory_id].keyword_chunk = rank, chunk_id
    no_vector = [c.memory_id for c in candidates.values() if "vector" not in c.found_by]
    if no_vector and provider is not None and query_vector is not None:
        for memory_id, similarity, chunk_id in _vector_matches(
            provider, query_vector, filters, limit=len(no_vector), memory_ids=no_vector
        ):
            candidates[memory_id].similarity, candidates[memory_id].vector_chunk = similarity, chunk_id


def _snippets(team_id: int, candidates: dict[uuid.UUID, _Candidate]) -> dict[uuid.UUID, str]:
    best_chunk = {}
    for c in candidates.values():
        chunk_id = c.vector_chunk if (c.similarity or 0) > 0 and c.vector_chunk else c.keyword_chunk
        if chunk_id is not None:
            best_chunk[chunk_id] = c.memory_id
    texts = Chunk.objects.filter(team_id=team_id, id__in=list(best_chunk)).values_list("id", "text")
    return {best_chunk[chunk_id]: _shorten(text) for chunk_id, text in texts}


def _shorten(text: str) -> str:
    if len(text) <= SNIPPET_CHARS:
        return text
    cut = text[:SNIPPET_CHARS].rsplit(" ", 1)[0]
    return cut + "…"


def rating_factor(net: int) -> float:
    """1 + 0.05 per net vote, the net clamped to ±5: a nudge, never a takeover."""
    return 1.0 + RATING_STEP * max(-RATING_CAP, min(RATING_CAP, net))


def _decay(memory: Memory, now: datetime, half_life_days: float) -> float:
    if memory.type in DECAY_EXEMPT_TYPES or half_life_days <= 0:
        return 1.0
    age_days = max(0.0, (now - memory.created_at).total_seconds() / 86400)
    return math.pow(0.5, age_days / half_life_days)


def _mmr(
    scored: list[tuple[float, _Candidate, dict[str, float]]],
    memories: dict[uuid.UUID, Memory],
    k: int,
) -> list[tuple[float, _Candidate, dict[str, float], float]]:
    """Maximal marginal relevance: λ * relevance - (1 - λ) * max Jaccard similarity
    to what is already picked, so near-duplicates give way to other answers."""
    tokens = {c.memory_id: set(_TOKEN.findall(memories[c.memory_id].content.lower())) for _, c, _ in scored}
    remaining = list(scored)
    picked: list[tuple[float, _Candidate, dict[str, float], float]] = []
    while remaining and len(picked) < k:
        best_index, best_value = 0, -math.inf
        for index, (score, c, _) in enumerate(remaining):
            redundancy = max(
                (_jaccard(tokens[c.memory_id], tokens[p[1].memory_id]) for p in picked), default=0.0
            )
            value = MMR_LAMBDA * score - (1 - MMR_LAMBDA) * redundancy
            if value > best_value:
                best_index, best_value = index, value
        score, c, parts = remaining.pop(best_index)
        picked.append((score, c, parts, round(best_value, 6)))
    return picked


def _jaccard(a: set[str], b: set[str]) -> float:
    if not a and not b:
        return 0.0
    return len(a & b) / len(a | b)
