"""Steps 2 and 3, scoring: merge the two paths, then age decay and rating. Pure
functions of the candidates and their memories; no database, no clock of their own.

- keyword score = rank / best rank among this query's candidates, so 0..1 with 1 for
  the best keyword match; vector score = cosine similarity (0 when not found);
- merged, in a single mode: that path's score alone. In hybrid mode the two paths are
  put on one scale first (docs/search.md, "Scoring"): cosines of one query sit in a
  narrow band (0.2-0.5 for the local model) while keyword scores span 0..1, so a raw
  weighted sum lets the keyword path decide far more than its weight says. So
  vector_relative = (cosine - lowest) / (highest - lowest) over the query's candidates
  (the band at least RELATIVE_MIN_BAND wide),
  relative = w_vec * vector_relative + w_kw * keyword (the team's weights, 0.7 / 0.3 by
  default), and merged = relative * evidence, where evidence is the query's best
  absolute weighted sum (w_vec * cosine + w_kw * keyword). Evidence is one number per
  query, so it leaves the order alone and keeps `min_score` absolute: a query that
  matches nothing well still scores low everywhere. `fusion="absolute"` is the raw
  weighted sum, kept for comparison; `fusion="adaptive"` is relative fusion with the
  team's weights scaled per query by how well each path separates its best candidate
  from the next ones (`adaptive_weights`), measured and not the default
  (docs/search.md, "Levers measured and dropped");
- identifier-like queries (`keyword_leads`, search.retrieval.identifiers): when the
  keyword path found something, hybrid mode swaps the weights so that the keyword path
  has the larger of the team's two (0.7 / 0.3 by default becomes 0.3 / 0.7) for this
  query's fusion and evidence: the one entry holding the identifier comes first, over
  the vector path's noise for a token the model never saw. The relevance floor keeps
  the team's weights;
- entity = ENTITY_BOOST (0.05) per name or short quoted phrase of the query found
  exactly in the entry, at most 3 (search.retrieval.entities), hybrid mode only;
- decay = 0.5 ** (age_days / half_life), identity and lesson exempt;
- rating = 1 + 0.05 * clamp(upvotes - downvotes, -5, 5): a version's net rating moves
  it by at most ±25% (0.75..1.25); unrated entries are unchanged;
- relevance = the absolute weighted sum (w_vec * cosine + w_kw * keyword, the team's
  weights) + entity: the candidate's own evidence, not stretched by relative fusion;
  below `relevance_floor` (the search's default floor, search.selectors.RELEVANCE_FLOOR)
  a candidate is out, whatever its age and rating;
- score = (merged + entity) * decay * rating, rounded to 6 places; below `min_score` it is out.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from memories.models import Memory
from memories.scopes import ScopeWindows, memory_scope_kind
from memories.types import MemoryType
from search.retrieval.candidates import Candidate, SearchMode
from search.retrieval.entities import entity_bonus, entity_patterns

DECAY_EXEMPT_TYPES = frozenset({MemoryType.IDENTITY, MemoryType.LESSON})
RATING_STEP = 0.05
RATING_CAP = 5

Fusion = Literal["relative", "absolute", "adaptive"]
# Adaptive fusion: a path's separation is how far its best candidate stands above the
# mean of the next ADAPTIVE_TOP, in standard deviations of the path's scores over the
# candidates.
ADAPTIVE_TOP = 5
# Relative fusion stretches the candidates' cosines to 0..1, but a few candidates a
# hair apart (near-duplicates, a tiny team) must not become 0 and 1: a band narrower
# than this is stretched only as if it were this wide. A whole-conversation query over
# 40 or more candidates spans a wider band (MADial: median 0.35, 10th percentile 0.26),
# so there it changes nothing.
RELATIVE_MIN_BAND = 0.25


@dataclass(frozen=True)
class Weights:
    """How much each path counts in a hybrid score (a team's hybrid weights)."""

    vector: float
    keyword: float


@dataclass(frozen=True)
class Scored:
    """A candidate with its score and the parts it was computed from (the `explain`
    of a result); `mmr` is the value MMR picked it with, None when MMR did not run."""

    score: float
    candidate: Candidate
    parts: dict[str, float]
    mmr: float | None = None


def score_candidates(
    candidates: Iterable[Candidate],
    memories: Mapping[uuid.UUID, Memory],
    *,
    mode: SearchMode,
    weights: Weights,
    half_life_days: float,
    now: datetime,
    decay: bool = True,
    min_score: float | None = None,
    entities: Sequence[str] = (),
    fusion: Fusion = "relative",
    relevance_floor: float | None = None,
    scopes: ScopeWindows | None = None,
    keyword_leads: bool = False,
) -> list[Scored]:
    """The candidates that have a memory in `memories` and reach `min_score`, best
    first (ties by memory id, so the order never depends on how they were found).
    `entities` (the query's, search.retrieval.entities) boost in hybrid mode only;
    `fusion` is how hybrid mode merges the paths; `relevance_floor` drops a candidate
    whose relevance (its absolute weighted sum plus entity, before decay and rating)
    is below it (module docstring). With `scopes`, each entry's half-life is capped by
    its scope's window (memories.scopes). `keyword_leads`: the query is identifier-like
    (search.retrieval.identifiers), so in hybrid mode the keyword path takes the larger
    weight when it found a candidate (module docstring)."""
    candidates = list(candidates)
    patterns = entity_patterns(entities) if mode == "hybrid" else []
    best_rank = max((c.keyword_rank for c in candidates), default=0.0) or 1.0
    team_weights = weights
    leading = mode == "hybrid" and keyword_leads and any(c.keyword_rank > 0 for c in candidates)
    if leading:
        weights = keyword_leading(weights)
    if mode == "hybrid" and fusion == "adaptive":
        weights = adaptive_weights(candidates, best_rank=best_rank, weights=weights)
    scale = (
        RelativeScale.of(candidates, best_rank=best_rank, weights=weights)
        if mode == "hybrid" and fusion != "absolute"
        else None
    )
    scored: list[Scored] = []
    for c in candidates:
        memory = memories.get(c.memory_id)
        if memory is None:
            continue
        keyword = c.keyword_rank / best_rank
        vector = c.similarity or 0.0
        relative: dict[str, float] = {}
        if scale is None:
            merged = merge_scores(vector=vector, keyword=keyword, mode=mode, weights=weights)
        else:
            relative = {"vector_relative": scale.vector(vector), "evidence": scale.evidence}
            if leading:
                relative["keyword_weight"] = weights.keyword
            merged = (
                merge_scores(vector=relative["vector_relative"], keyword=keyword, mode=mode, weights=weights)
                * scale.evidence
            )
        entity = entity_bonus(patterns, memory.content) if patterns else 0.0
        if (
            relevance_floor is not None
            and merge_scores(vector=vector, keyword=keyword, mode=mode, weights=team_weights) + entity
            < relevance_floor
        ):
            continue
        factor = (
            decay_factor(
                memory_type=memory.type,
                created_at=memory.created_at,
                now=now,
                half_life_days=(
                    scopes.half_life(half_life_days, memory_scope_kind(memory))
                    if scopes is not None
                    else half_life_days
                ),
            )
            if decay
            else 1.0
        )
        boost = rating_factor(memory.rating)
        score = round((merged + entity) * factor * boost, 6)
        if min_score is not None and score < min_score:
            continue
        parts = {
            "vector": vector,
            **relative,
            "keyword": keyword,
            "merged": merged,
            "entity": entity,
            "decay": factor,
            "rating": boost,
        }
        scored.append(Scored(score=score, candidate=c, parts=parts))
    scored.sort(key=lambda item: (-item.score, str(item.candidate.memory_id)))
    return scored


def keyword_leading(weights: Weights) -> Weights:
    """`weights` with the keyword path given the larger of the two (unchanged when it
    already has it)."""
    return Weights(vector=min(weights.vector, weights.keyword), keyword=max(weights.vector, weights.keyword))


@dataclass(frozen=True)
class RelativeScale:
    """One hybrid query's relative fusion (module docstring): the band of its
    candidates' cosines and its evidence."""

    lowest: float
    highest: float
    evidence: float

    @classmethod
    def of(cls, candidates: Sequence[Candidate], *, best_rank: float, weights: Weights) -> RelativeScale:
        """Over all `candidates`, like the keyword path's best rank. Linear."""
        similarities = [c.similarity or 0.0 for c in candidates]
        evidence = max(
            (
                merge_scores(
                    vector=c.similarity or 0.0,
                    keyword=c.keyword_rank / best_rank,
                    mode="hybrid",
                    weights=weights,
                )
                for c in candidates
            ),
            default=0.0,
        )
        return cls(
            lowest=min(similarities, default=0.0), highest=max(similarities, default=0.0), evidence=evidence
        )

    def vector(self, similarity: float) -> float:
        """1 for the query's highest cosine, 0 for its lowest; a band narrower than
        RELATIVE_MIN_BAND is not stretched to the whole 0..1."""
        return 1.0 - (self.highest - similarity) / max(self.highest - self.lowest, RELATIVE_MIN_BAND)


def adaptive_weights(candidates: Sequence[Candidate], *, best_rank: float, weights: Weights) -> Weights:
    """The team's `weights`, each times its path's separation over `candidates`, scaled
    to sum to what the team's do: a path whose best candidate stands out counts more
    for this query, one whose scores are flat counts less. The team's weights when
    neither path separates. Linear, plus two sorts."""
    vector = weights.vector * separation([c.similarity or 0.0 for c in candidates])
    keyword = weights.keyword * separation([c.keyword_rank / best_rank for c in candidates])
    if vector + keyword <= 0:
        return weights
    total = weights.vector + weights.keyword
    return Weights(vector=total * vector / (vector + keyword), keyword=total * keyword / (vector + keyword))


def separation(scores: Sequence[float]) -> float:
    """How far the best of `scores` stands above the mean of the next ADAPTIVE_TOP, in
    standard deviations of all of them; 0 for fewer than two or all equal."""
    if len(scores) < 2:
        return 0.0
    mean = sum(scores) / len(scores)
    spread = math.sqrt(sum((s - mean) ** 2 for s in scores) / len(scores))
    if spread <= 0:
        return 0.0
    ordered = sorted(scores, reverse=True)
    following = ordered[1 : ADAPTIVE_TOP + 1]
    return max(0.0, (ordered[0] - sum(following) / len(following)) / spread)


def merge_scores(*, vector: float, keyword: float, mode: SearchMode, weights: Weights) -> float:
    if mode == "hybrid":
        return weights.vector * vector + weights.keyword * keyword
    if mode == "vector":
        return vector
    return keyword


def decay_factor(*, memory_type: str, created_at: datetime, now: datetime, half_life_days: float) -> float:
    """0.5 per half-life of age; 1 for identity and lesson, and when decay is off
    (a half-life of 0 or less)."""
    if memory_type in DECAY_EXEMPT_TYPES or half_life_days <= 0:
        return 1.0
    age_days = max(0.0, (now - created_at).total_seconds() / 86400)
    return math.pow(0.5, age_days / half_life_days)


def rating_factor(net: int) -> float:
    """1 + 0.05 per net vote, the net clamped to ±5: a nudge, never a takeover."""
    return 1.0 + RATING_STEP * max(-RATING_CAP, min(RATING_CAP, net))
