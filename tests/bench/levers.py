"""Query-time retrieval levers (issue 15), measured on MADial's tune half, reported on
its held-out half. Each lever is tried alone against the default hybrid ranking (hybrid
+ MMR; age decay off, as in the quality table: the bench backdates memories to
2012-2024, so a 30-day half-life would only rank by age) and needs no re-indexing.

The bench runs the product's own pipeline steps (search.retrieval: candidates, scoring,
MMR) with one step swapped per lever, and checks first that the unswapped pipeline
returns exactly what `embed_and_search` returns, so a lever's delta is the lever's alone.
A lever moves into the product only when the held-out half agrees (docs/decisions.md).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
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


# (c) Entity boosting: the product's (search.retrieval.entities), kept (issue 15).


@dataclass(frozen=True)
class Lever:
    name: str
    keyword_query: Callable[[str], str] | None = None  # rewrites the keyword path's query
    fusion: str = "weighted"  # or "rrf"
    entity_boost: bool = False


LEVERS = (
    Lever("question-phrase removal (keyword path)", keyword_query=strip_question_phrases),
    Lever("reciprocal rank fusion (k=60) instead of weighted sum", fusion="rrf"),
    Lever("entity/name boosting (+0.05 per exact name or quoted phrase, max 3)", entity_boost=True),
)
# Every lever is measured against the default hybrid ranking without the levers.
BASELINE = Lever("default hybrid (hybrid + MMR) without the levers")
# The kept levers together: what embed_and_search does by default.
PRODUCT_DEFAULT = LEVERS[2]


def ranked_keys(
    *, team: Any, query: str, vector: Any, lever: Lever, max_results: int, key_prefix: str
) -> list[int]:
    """The bench ids of the top `max_results`, through the product's pipeline steps with
    `lever`'s swap (the caller is inside the team's scope)."""
    from django.db import transaction
    from django.utils import timezone

    from memories.models import Memory
    from search.retrieval.candidates import SearchFilters, gather_candidates
    from search.retrieval.entities import query_entities
    from search.retrieval.mmr import diversify
    from search.retrieval.scoring import Scored, Weights, rating_factor, score_candidates

    keyword_query = lever.keyword_query(query) if lever.keyword_query else query
    filters = SearchFilters(team_id=team.id, types=None, project=None, include_superseded=True)
    with transaction.atomic():
        found = gather_candidates(
            query=keyword_query or query,
            vector=vector,
            filters=filters,
            mode="hybrid",
            limit=max(max_results * 4, 40),
        )
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
            weights=Weights(vector=team.hybrid_vector_weight, keyword=team.hybrid_keyword_weight),
            half_life_days=team.decay_half_life_days,
            now=now,
            decay=False,
            entities=query_entities(query) if lever.entity_boost else (),
        )
    picked = diversify(scored, {m.id: m.content for m in memories.values()}, max_results)
    keys = [memories[item.candidate.memory_id].key for item in picked]
    return [int(key.removeprefix(key_prefix)) for key in keys]
