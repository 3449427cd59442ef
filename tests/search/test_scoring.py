"""The scoring step alone (search.retrieval.scoring): merge, decay, rating and the
ranking of candidates. Pure functions over unsaved memories: no database."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from memories.models import Memory
from search.retrieval.candidates import Candidate
from search.retrieval.scoring import (
    RELATIVE_MIN_BAND,
    Scored,
    Weights,
    decay_factor,
    merge_scores,
    rating_factor,
    score_candidates,
)

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
DEFAULT_WEIGHTS = Weights(vector=0.7, keyword=0.3)


def memory(
    memory_type: str = "context", *, age_days: float = 0, upvotes: int = 0, downvotes: int = 0
) -> Memory:
    return Memory(
        id=uuid.uuid4(),
        key=f"k-{uuid.uuid4().hex[:8]}",
        content="text",
        type=memory_type,
        created_at=NOW - timedelta(days=age_days),
        upvotes=upvotes,
        downvotes=downvotes,
    )


def candidate(entry: Memory, *, rank: float = 0.0, similarity: float | None = None) -> Candidate:
    found_by = {"keyword"} if rank else set()
    if similarity is not None:
        found_by.add("vector")
    return Candidate(entry.id, keyword_rank=rank, similarity=similarity, found_by=found_by)


def hybrid(found: list[Candidate], entries: list[Memory], **options: Any) -> list[Scored]:
    """score_candidates in hybrid mode with the default weights and no decay."""
    return score_candidates(
        found,
        {e.id: e for e in entries},
        mode="hybrid",
        weights=DEFAULT_WEIGHTS,
        half_life_days=0,
        now=NOW,
        **options,
    )


@pytest.mark.parametrize(
    ("net", "factor"),
    [(0, 1.0), (1, 1.05), (-2, 0.9), (5, 1.25), (6, 1.25), (40, 1.25), (-5, 0.75), (-40, 0.75)],
)
def test_rating_moves_a_score_five_percent_per_net_vote_and_at_most_a_quarter(
    net: int, factor: float
) -> None:
    assert rating_factor(net) == pytest.approx(factor)


@pytest.mark.parametrize(
    ("age_days", "factor"), [(0, 1.0), (15, 0.5**0.5), (30, 0.5), (60, 0.25), (90, 0.125)]
)
def test_decay_halves_a_score_every_half_life(age_days: float, factor: float) -> None:
    created = NOW - timedelta(days=age_days)

    assert decay_factor(
        memory_type="context", created_at=created, now=NOW, half_life_days=30
    ) == pytest.approx(factor)


@pytest.mark.parametrize("memory_type", ["identity", "lesson"])
def test_identity_and_lesson_never_decay(memory_type: str) -> None:
    created = NOW - timedelta(days=3650)

    assert decay_factor(memory_type=memory_type, created_at=created, now=NOW, half_life_days=30) == 1.0
    assert decay_factor(memory_type="decision", created_at=created, now=NOW, half_life_days=30) < 1e-30


def test_a_half_life_of_zero_turns_decay_off() -> None:
    created = NOW - timedelta(days=365)

    assert decay_factor(memory_type="context", created_at=created, now=NOW, half_life_days=0) == 1.0


def test_an_entry_dated_after_now_does_not_gain_from_decay() -> None:
    created = NOW + timedelta(days=30)

    assert decay_factor(memory_type="context", created_at=created, now=NOW, half_life_days=30) == 1.0


def test_merge_weighs_both_paths_in_hybrid_mode_and_takes_one_in_single_modes() -> None:
    weights = Weights(vector=0.6, keyword=0.4)

    assert merge_scores(vector=0.5, keyword=1.0, mode="hybrid", weights=weights) == pytest.approx(0.7)
    assert merge_scores(vector=0.5, keyword=1.0, mode="vector", weights=weights) == 0.5
    assert merge_scores(vector=0.5, keyword=1.0, mode="keyword", weights=weights) == 1.0


def test_keyword_rank_is_divided_by_the_best_rank_of_the_query() -> None:
    best, half = memory(), memory()
    found = [candidate(best, rank=0.08), candidate(half, rank=0.04)]

    scored = score_candidates(
        found,
        {best.id: best, half.id: half},
        mode="keyword",
        weights=DEFAULT_WEIGHTS,
        half_life_days=30,
        now=NOW,
    )

    assert [(s.candidate.memory_id, s.parts["keyword"], s.score) for s in scored] == [
        (best.id, 1.0, 1.0),
        (half.id, 0.5, 0.5),
    ]


def test_score_is_merged_times_decay_times_rating_with_its_parts() -> None:
    entry = memory(age_days=30, upvotes=3, downvotes=1)

    [scored] = score_candidates(
        [candidate(entry, rank=0.2, similarity=0.5)],
        {entry.id: entry},
        mode="hybrid",
        weights=DEFAULT_WEIGHTS,
        half_life_days=30,
        now=NOW,
    )

    # Alone, it is the top of its query's band and its own evidence: (0.7 + 0.3) * 0.65.
    assert scored.parts == pytest.approx(
        {
            "vector": 0.5,
            "vector_relative": 1.0,
            "evidence": 0.65,
            "keyword": 1.0,
            "merged": 0.65,
            "entity": 0.0,
            "decay": 0.5,
            "rating": 1.1,
        }
    )
    assert list(scored.parts) == [
        "vector",
        "vector_relative",
        "evidence",
        "keyword",
        "merged",
        "entity",
        "decay",
        "rating",
    ]
    assert scored.score == round(0.65 * 0.5 * 1.1, 6)
    assert scored.mmr is None


def test_relative_fusion_stretches_the_querys_band_of_cosines_and_scales_by_its_evidence() -> None:
    low, middle, high = memory(), memory(), memory()
    found = [
        candidate(low, similarity=0.2, rank=0.3),
        candidate(middle, similarity=0.35),
        candidate(high, similarity=0.5, rank=0.1),
    ]

    scored = hybrid(found, [low, middle, high])

    # evidence = the best absolute sum: max(0.14 + 0.3, 0.245, 0.35 + 0.1) = 0.45.
    parts = {s.candidate.memory_id: s.parts for s in scored}
    assert [parts[e.id]["vector_relative"] for e in (low, middle, high)] == pytest.approx([0.0, 0.5, 1.0])
    assert [p["evidence"] for p in parts.values()] == pytest.approx([0.45] * 3)
    assert [parts[e.id]["merged"] for e in (low, middle, high)] == pytest.approx(
        [0.3 * 0.45, 0.35 * 0.45, (0.7 + 0.1) * 0.45]
    )
    # The raw sum would put `low` (0.44) second; on one scale its keyword lead is worth less.
    assert [s.candidate.memory_id for s in scored] == [high.id, middle.id, low.id]
    absolute = hybrid(found, [low, middle, high], fusion="absolute")
    assert [s.candidate.memory_id for s in absolute] == [high.id, low.id, middle.id]
    assert "vector_relative" not in absolute[0].parts


def test_cosines_a_hair_apart_are_not_stretched_to_zero_and_one() -> None:
    first, second = memory(), memory()

    scored = hybrid([candidate(first, similarity=0.6), candidate(second, similarity=0.59)], [first, second])

    assert [s.parts["vector_relative"] for s in scored] == pytest.approx([1.0, 1 - 0.01 / RELATIVE_MIN_BAND])


def test_min_score_stays_absolute_under_relative_fusion() -> None:
    # Nothing matches well: the best of the query is 1 on the relative scale, but its
    # evidence is small, so a min_score meant for good matches keeps none of them.
    weak = [memory() for _ in range(3)]
    found = [candidate(e, similarity=s) for e, s in zip(weak, (0.05, 0.1, 0.12), strict=True)]

    everything = hybrid(found, weak)
    kept = hybrid(found, weak, min_score=0.2)

    assert everything[0].parts["vector_relative"] == 1.0
    assert everything[0].score == pytest.approx(0.7 * 0.7 * 0.12)
    assert kept == []


def test_without_decay_old_entries_keep_their_score() -> None:
    entry = memory(age_days=300)

    [scored] = score_candidates(
        [candidate(entry, similarity=0.8)],
        {entry.id: entry},
        mode="vector",
        weights=DEFAULT_WEIGHTS,
        half_life_days=30,
        now=NOW,
        decay=False,
    )

    assert (scored.parts["decay"], scored.score) == (1.0, 0.8)


def test_candidates_rank_by_score_then_id_and_min_score_drops_the_rest() -> None:
    entries = [memory() for _ in range(4)]
    similarities = [0.2, 0.9, 0.5, 0.5]
    found = [candidate(e, similarity=s) for e, s in zip(entries, similarities, strict=True)]

    scored = score_candidates(
        found,
        {e.id: e for e in entries},
        mode="vector",
        weights=DEFAULT_WEIGHTS,
        half_life_days=30,
        now=NOW,
        min_score=0.3,
    )

    tied = sorted([entries[2].id, entries[3].id], key=str)
    assert [s.candidate.memory_id for s in scored] == [entries[1].id, *tied]


def test_a_candidate_without_its_memory_is_skipped_but_still_sets_the_best_rank() -> None:
    gone, kept = memory(), memory()

    [scored] = score_candidates(
        [candidate(gone, rank=0.4), candidate(kept, rank=0.1)],
        {kept.id: kept},
        mode="keyword",
        weights=DEFAULT_WEIGHTS,
        half_life_days=30,
        now=NOW,
    )

    assert (scored.candidate.memory_id, scored.parts["keyword"]) == (kept.id, 0.25)


def test_no_candidates_score_nothing() -> None:
    assert score_candidates([], {}, mode="hybrid", weights=DEFAULT_WEIGHTS, half_life_days=30, now=NOW) == []


def test_an_entry_holding_the_querys_names_gains_the_entity_bonus_in_hybrid_mode_only() -> None:
    named = memory()
    named.content = "Ada brewed a porter with Bob"
    plain = memory()
    plain.content = "someone brewed a porter"
    candidates = [candidate(named, rank=0.2, similarity=0.58), candidate(plain, rank=0.2, similarity=0.6)]
    entries = {named.id: named, plain.id: plain}

    hybrid = score_candidates(
        candidates,
        entries,
        mode="hybrid",
        weights=DEFAULT_WEIGHTS,
        half_life_days=0,
        now=NOW,
        entities=("Ada", "Bob"),
    )
    vector = score_candidates(
        candidates,
        entries,
        mode="vector",
        weights=DEFAULT_WEIGHTS,
        half_life_days=0,
        now=NOW,
        entities=("Ada", "Bob"),
    )

    # (0.7 * 0.92 + 0.3) * 0.72 + 2 * 0.05 beats 0.72 + 0: the names lift the first above the second.
    assert [(s.candidate.memory_id, s.parts["entity"], s.score) for s in hybrid] == [
        (named.id, pytest.approx(0.1), pytest.approx((0.7 * 0.92 + 0.3) * 0.72 + 0.1, abs=1e-6)),
        (plain.id, 0.0, pytest.approx(0.72)),
    ]
    assert [s.candidate.memory_id for s in vector] == [plain.id, named.id]
    assert all(s.parts["entity"] == 0.0 for s in vector)
