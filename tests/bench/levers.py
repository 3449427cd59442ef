"""Query-time retrieval levers, measured on MADial's tune half, reported on
its held-out half. Each lever is tried alone against the default hybrid ranking (hybrid
+ MMR; age decay off, as in the quality table: the bench backdates memories to
2012-2024, so a 30-day half-life would only rank by age) and needs no re-indexing. The
first levers are measured against that ranking without any lever, the later ones
(`against`) on top of the default of their time (with entity boosting).

The bench runs the product's own pipeline steps (search.retrieval: candidates, scoring,
MMR) with one step swapped per lever, and checks first that the unswapped pipeline
returns exactly what `embed_and_search` returns, so a lever's delta is the lever's alone.
A lever moves into the product only when the held-out half agrees (docs/search.md, "Where quality stands").
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

# (a) Question and recall phrases: they say that something is asked, not what about.
# PostgreSQL's english configuration already drops the pure stop words ("when", "did",
# "what", "is"); the phrases below also carry content-free words it keeps ("remember",
# "tell", "know", "happened"), which BM25 would otherwise count as evidence.
QUESTION_PHRASES: tuple[tuple[str, ...], ...] = tuple(
    tuple(phrase.split())
    for phrase in (
        "do you remember",
        "can you remember",
        "do you recall",
        "can you recall",
        "remember when",
        "remember that",
        "can you tell me",
        "could you tell me",
        "tell me about",
        "tell me",
        "do you know",
        "you know",
        "what happened",
        "what was",
        "what is",
        "when did",
        "when was",
        "where did",
        "who was",
        "how did",
        "i think",
        "i wonder",
    )
)
_LONGEST_PHRASE = max(len(p) for p in QUESTION_PHRASES)
_PHRASES = frozenset(QUESTION_PHRASES)
_WORD = re.compile(r"[A-Za-z0-9']+|[^A-Za-z0-9'\s]+")  # linear: no nested quantifier


def strip_question_phrases(query: str) -> str:
    """`query` without the QUESTION_PHRASES (case-insensitive, whole words), longest
    phrase first at each position; one left-to-right pass, O(words · longest phrase)."""
    tokens = _WORD.findall(query)
    lowered = [t.lower() for t in tokens]
    kept: list[str] = []
    i = 0
    while i < len(tokens):
        for size in range(min(_LONGEST_PHRASE, len(tokens) - i), 0, -1):
            if tuple(lowered[i : i + size]) in _PHRASES:
                i += size
                break
        else:
            kept.append(tokens[i])
            i += 1
    return " ".join(kept)


# (b) Reciprocal rank fusion (Cormack et al. 2009), k = 60: each path contributes
# 1 / (k + its rank), so the fused order depends on ranks, not on how the two paths'
# scores are scaled. Normalised by its maximum (first on both paths) to stay 0..1.
RRF_K = 60


def rrf_merged(candidates: list[Any]) -> dict[uuid.UUID, float]:
    """Each candidate's RRF score over the keyword and vector paths, 0..1."""
    fused: dict[uuid.UUID, float] = {c.memory_id: 0.0 for c in candidates}
    for value in (lambda c: c.keyword_rank or 0.0, lambda c: c.similarity or 0.0):
        ranked = sorted((c for c in candidates if value(c) > 0), key=lambda c: (-value(c), str(c.memory_id)))
        for rank, c in enumerate(ranked, start=1):
            fused[c.memory_id] += 1 / (RRF_K + rank)
    top = 2 / (RRF_K + 1)
    return {memory_id: score / top for memory_id, score in fused.items()}


# (c) Entity boosting: the product's (search.retrieval.entities), kept.

# (d) Multiple query embeddings: a long query (a whole conversation) is also embedded in
# overlapping windows of WINDOW_UNITS lines (sentences when it has too few lines), at
# most MAX_QUERY_WINDOWS of them spread over the query, in one batched embedding call. A
# memory's similarity is the best over the whole query and its windows (the max of an
# earlier vector-only experiment).
WINDOW_UNITS = 4
MAX_QUERY_WINDOWS = 8
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")  # linear: one character class, then another


def query_windows(query: str) -> list[str]:
    """The windows of `query`: none when it has at most WINDOW_UNITS lines and sentences;
    else windows of WINDOW_UNITS consecutive units, the first and the last included,
    at most MAX_QUERY_WINDOWS."""
    units = [line.strip() for line in query.splitlines() if line.strip()]
    if len(units) <= WINDOW_UNITS:
        units = [s.strip() for s in _SENTENCE.findall(query) if s.strip()]
    if len(units) <= WINDOW_UNITS:
        return []
    last = len(units) - WINDOW_UNITS
    stride = max(1, -(-last // (MAX_QUERY_WINDOWS - 1)))
    starts = list(range(0, last, stride))[: MAX_QUERY_WINDOWS - 1]
    starts.append(last)
    return ["\n".join(units[start : start + WINDOW_UNITS]) for start in starts]


def embed_windows(*, team: Any, query: str) -> list[Any]:
    """The windows' QueryVectors in the team's vector space (one batched call)."""
    from search.retrieval.candidates import QueryVector
    from search.services import team_provider

    windows = query_windows(query)
    provider = team_provider(team)
    if not windows or provider is None:
        return []
    return [
        QueryVector(values=values, model=provider.model, dimensions=provider.dimensions)
        for values in provider.embed_documents(windows)
    ]


def add_window_similarities(
    found: dict[uuid.UUID, Any], *, query: str, vector: Any, windows: list[Any], filters: Any, limit: int
) -> None:
    """Every candidate's similarity becomes the best over the query's and its windows'
    vectors; the vector path's top `limit` by that similarity joins the candidates (with
    both scores). Exact: the best-of top `limit` is within the union of each vector's."""
    from search.retrieval.candidates import Candidate, keyword_matches, vector_matches

    if not windows:
        return
    vectors = [vector, *windows]
    pool = set(found)
    for each in vectors:
        pool.update(memory_id for memory_id, _, _ in vector_matches(each, filters, limit=limit))
    best: dict[uuid.UUID, tuple[float, int]] = {}
    for each in vectors:
        for memory_id, similarity, chunk_id in vector_matches(
            each, filters, limit=len(pool), memory_ids=list(pool)
        ):
            if memory_id not in best or similarity > best[memory_id][0]:
                best[memory_id] = (similarity, chunk_id)
    top = sorted(best, key=lambda memory_id: (-best[memory_id][0], str(memory_id)))[:limit]
    new = [memory_id for memory_id in top if memory_id not in found]
    for memory_id in new:
        found[memory_id] = Candidate(memory_id, found_by={"vector"})
    for memory_id, rank, chunk_id in (
        keyword_matches(query, filters, limit=None, memory_ids=new) if new else []
    ):
        found[memory_id].keyword_rank, found[memory_id].keyword_chunk = rank, chunk_id
    for memory_id, c in found.items():
        c.similarity, c.vector_chunk = best.get(memory_id, (0.0, None))


# (e) Pseudo-relevance feedback on the keyword path, RM3-style (Abdul-Jaleel et al. 2004):
# the first round's best entries lend their distinctive words to the keyword query, and
# every candidate's keyword score is computed again with the expanded query.
# - feedback entries: the FEEDBACK_ENTRIES candidates with the best merged hybrid score
#   (the team's weights, relevance only), each by its best chunk, weighted by that score;
# - term weight: RM3's relevance model, sum over those chunks of weight · tf / |chunk|,
#   times the term's BM25 idf in the team (words every entry holds add nothing);
# - the FEEDBACK_TERMS best terms, scaled so the best has query weight FEEDBACK_WEIGHT
#   (a query lexeme has 1, and gains the expansion weight when it is also a term);
# - bounded: one read of at most FEEDBACK_ENTRIES chunks' lexemes, one keyword query
#   over the candidates already found (no new candidates, no other path again).
FEEDBACK_ENTRIES = 5
FEEDBACK_TERMS = 20
FEEDBACK_WEIGHT = 0.3


def feedback_chunks(candidates: Mapping[uuid.UUID, Any], *, weights: Any) -> list[tuple[int, float]]:
    """The best chunk and merged score of the FEEDBACK_ENTRIES best candidates (merged
    score above 0), best first, ties by memory id."""
    best_rank = max((c.keyword_rank for c in candidates.values()), default=0.0) or 1.0
    merged = sorted(
        (
            (weights.vector * (c.similarity or 0.0) + weights.keyword * c.keyword_rank / best_rank, c)
            for c in candidates.values()
        ),
        key=lambda item: (-item[0], str(item[1].memory_id)),
    )
    picked = []
    for score, c in merged[:FEEDBACK_ENTRIES]:
        chunk_id = c.keyword_chunk if c.keyword_chunk is not None else c.vector_chunk
        if score > 0 and chunk_id is not None:
            picked.append((chunk_id, score))
    return picked


def feedback_terms(
    chunks: list[tuple[int, float]], lexemes: list[tuple[int, str, int, float]]
) -> dict[str, float]:
    """RM3's expansion terms: `chunks` (chunk id, weight) and their `lexemes` (chunk id,
    lexeme, tf, idf) → the FEEDBACK_TERMS best terms, each with the BM25 query weight it
    adds (its expansion weight times its idf). Linear in the lexemes, plus a sort."""
    total = sum(weight for _, weight in chunks) or 1.0
    share = {chunk_id: weight / total for chunk_id, weight in chunks}
    length: dict[int, int] = {}
    for chunk_id, _, tf, _ in lexemes:
        length[chunk_id] = length.get(chunk_id, 0) + tf
    relevance: dict[str, float] = {}
    idf: dict[str, float] = {}
    for chunk_id, lexeme, tf, lexeme_idf in lexemes:
        relevance[lexeme] = relevance.get(lexeme, 0.0) + share.get(chunk_id, 0.0) * tf / length[chunk_id]
        idf[lexeme] = lexeme_idf
    weighted = {lexeme: relevance[lexeme] * idf[lexeme] for lexeme in relevance}
    best = sorted(weighted, key=lambda lexeme: (-weighted[lexeme], lexeme))[:FEEDBACK_TERMS]
    top = weighted[best[0]] if best else 0.0
    if top <= 0:
        return {}
    return {
        lexeme: FEEDBACK_WEIGHT * weighted[lexeme] / top * idf[lexeme]
        for lexeme in best
        if weighted[lexeme] > 0
    }


def _chunk_lexemes(team_id: int, chunk_ids: list[int]) -> list[tuple[int, str, int, float]]:
    """(chunk id, lexeme, tf, BM25 idf in the team) of the chunks' lexemes. One query."""
    from django.db import connection

    from search.retrieval.candidates import LEXEME_OCCURRENCES, bm25_idf

    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT c.id, u.lexeme, {LEXEME_OCCURRENCES}, coalesce(s.chunks, 0),
                   (SELECT t.chunks FROM search_keywordstat t WHERE t.team_id = %s AND t.lexeme = '')
            FROM search_chunk c CROSS JOIN LATERAL unnest(c.search_vector) u
            LEFT JOIN search_keywordstat s ON s.team_id = c.team_id AND s.lexeme = u.lexeme
            WHERE c.team_id = %s AND c.id = ANY(%s)
            """,  # noqa: S608 (a constant fragment; values are parameters)
            [team_id, team_id, chunk_ids],
        )
        rows = cursor.fetchall()
    # The keyword path's idf (search.retrieval.candidates.plan_keyword_query).
    return [
        (chunk_id, lexeme, int(tf), bm25_idf(chunks=count or 1, df=df))
        for chunk_id, lexeme, tf, df, count in rows
    ]


def refine_with_feedback(
    candidates: Mapping[uuid.UUID, Any], *, query: str, filters: Any, weights: Any
) -> None:
    """Every candidate's keyword score again, with the query expanded by the feedback
    terms (unchanged when there is none)."""
    from search.retrieval.candidates import keyword_plan_matches, plan_keyword_query

    plan = plan_keyword_query(query, filters.team_id)
    chunks = feedback_chunks(candidates, weights=weights)
    if plan is None or not chunks:
        return
    terms = feedback_terms(chunks, _chunk_lexemes(filters.team_id, [chunk_id for chunk_id, _ in chunks]))
    if not terms:
        return
    query_weights = dict(zip(plan.lexemes, plan.idf, strict=True))
    for lexeme, weight in terms.items():
        query_weights[lexeme] = query_weights.get(lexeme, 0.0) + weight
    expanded = replace(plan, lexemes=list(query_weights), idf=list(query_weights.values()))
    ranks = {
        memory_id: (rank, chunk_id)
        for memory_id, rank, chunk_id in keyword_plan_matches(
            expanded, filters, limit=None, memory_ids=list(candidates)
        )
    }
    for c in candidates.values():
        c.keyword_rank, c.keyword_chunk = ranks.get(c.memory_id, (0.0, c.keyword_chunk))


@dataclass(frozen=True)
class Lever:
    name: str
    keyword_query: Callable[[str], str] | None = None  # rewrites the keyword path's query
    # "absolute": the raw weighted sum (the default before relative fusion), "relative"
    # (search.retrieval.scoring), or "rrf".
    fusion: str = "absolute"
    entity_boost: bool = False
    query_windows: bool = False
    feedback: bool = False
    # The ranking it is measured against (None: BASELINE).
    against: Lever | None = None


_ENTITIES = Lever("entity/name boosting (+0.05 per exact name or quoted phrase, max 3)", entity_boost=True)
_RELATIVE = Lever(
    "relative fusion (the vector path min-max scaled over the candidates, times the evidence)",
    fusion="relative",
    entity_boost=True,
    against=_ENTITIES,
)
LEVERS = (
    Lever("question-phrase removal (keyword path)", keyword_query=strip_question_phrases),
    Lever("reciprocal rank fusion (k=60) instead of weighted sum", fusion="rrf"),
    _ENTITIES,
    # Measured against the product's default of their time (with entity boosting).
    Lever(
        "multiple query embeddings (max over 4-line windows, at most 8)",
        entity_boost=True,
        query_windows=True,
        against=_ENTITIES,
    ),
    Lever(
        "pseudo-relevance feedback, keyword path (RM3: 5 entries, 20 terms, weight 0.3)",
        entity_boost=True,
        feedback=True,
        against=_ENTITIES,
    ),
    Lever(
        "query windows + pseudo-relevance feedback together",
        entity_boost=True,
        query_windows=True,
        feedback=True,
        against=_ENTITIES,
    ),
    _RELATIVE,
)
# The first levers are measured against the default hybrid ranking without the levers.
BASELINE = Lever("default hybrid (hybrid + MMR) without the levers")
# The kept levers together: what embed_and_search does by default.
PRODUCT_DEFAULT = _RELATIVE


def ranked_keys(
    *,
    team: Any,
    query: str,
    vector: Any,
    lever: Lever,
    max_results: int,
    key_prefix: str,
    windows: list[Any] | None = None,
) -> list[int]:
    """The bench ids of the top `max_results`, through the product's pipeline steps with
    `lever`'s swap (the caller is inside the team's scope). `windows`: the query
    windows' vectors (embed_windows), used by a lever with query_windows."""
    from django.db import transaction
    from django.utils import timezone

    from memories.models import Memory
    from search.retrieval.candidates import SearchFilters, gather_candidates
    from search.retrieval.entities import query_entities
    from search.retrieval.identifiers import is_identifier_query
    from search.retrieval.mmr import diversify
    from search.retrieval.scoring import Scored, Weights, rating_factor, score_candidates
    from search.selectors import RELEVANCE_FLOOR

    keyword_query = lever.keyword_query(query) if lever.keyword_query else query
    filters = SearchFilters(team_id=team.id, types=None, project=None, include_superseded=True)
    limit = max(max_results * 4, 40)
    weights = Weights(vector=team.hybrid_vector_weight, keyword=team.hybrid_keyword_weight)
    with transaction.atomic():
        found = gather_candidates(
            query=keyword_query or query, vector=vector, filters=filters, mode="hybrid", limit=limit
        )
        if lever.query_windows:
            add_window_similarities(
                found,
                query=keyword_query or query,
                vector=vector,
                windows=windows or [],
                filters=filters,
                limit=limit,
            )
        if lever.feedback:
            refine_with_feedback(found, query=keyword_query or query, filters=filters, weights=weights)
        memories: Mapping[uuid.UUID, Memory] = {
            m.id: m for m in Memory.objects.for_team(team.id).filter(id__in=list(found))
        }
    now = timezone.now()
    if lever.fusion == "rrf":
        merged = rrf_merged(list(found.values()))
        scored = []
        for c in found.values():
            memory = memories[c.memory_id]
            score = round(merged[c.memory_id] * rating_factor(memory.rating), 6)
            scored.append(Scored(score=score, candidate=c, parts={}))
        scored.sort(key=lambda item: (-item.score, str(item.candidate.memory_id)))
    else:
        scored = score_candidates(
            found.values(),
            memories,
            mode="hybrid",
            weights=weights,
            half_life_days=team.decay_half_life_days,
            now=now,
            decay=False,
            entities=query_entities(query) if lever.entity_boost else (),
            fusion="relative" if lever.fusion == "relative" else "absolute",
            # The product's default floor: it changes no R@5 on MADial (docs/search.md).
            relevance_floor=RELEVANCE_FLOOR,
            keyword_leads=is_identifier_query(query),
        )
    picked = diversify(scored, {m.id: m.content for m in memories.values()}, max_results)
    keys = [memories[item.candidate.memory_id].key for item in picked]
    return [int(key.removeprefix(key_prefix)) for key in keys]


# (f) Salience: an entry that agents keep reading ranks a little higher. The bench has
# no real usage, so usage is simulated: an entry's access count is how often the
# default ranking put it in the top 5 for the other half's queries of the same task
# (what search_for would have counted), so a half is never boosted by its own answers.
# Ratings already move a score by at most ±25% (search.retrieval.scoring) and the bench
# has neither ratings nor confirmations, so access counts are the lever measured.
SALIENCE_STEP = 0.05
SALIENCE_CAP = 0.25


def salience_factor(accesses: int) -> float:
    """1 + 0.05 per doubling of the access count, at most +25% (the rating's cap)."""
    import math

    return 1.0 + min(SALIENCE_CAP, SALIENCE_STEP * math.log2(1 + max(0, accesses)))
