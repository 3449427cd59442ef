"""Adaptive fusion (search.retrieval.scoring.adaptive_weights: each path's weight
scaled by how well it separates its best candidate) and the relevance floor of
score_candidates. Pure functions over unsaved memories: no database."""

from __future__ import annotations

import pytest

from search.retrieval.scoring import Weights, adaptive_weights, score_candidates, separation
from tests.search.test_scoring import DEFAULT_WEIGHTS, NOW, candidate, hybrid, memory


def test_separation_is_zero_for_flat_or_single_scores_and_grows_with_a_standout() -> None:
    assert separation([]) == 0.0
    assert separation([0.7]) == 0.0
    assert separation([0.4] * 10) == 0.0
    graded = [0.5 - 0.01 * i for i in range(20)]
    standout = [1.0] + [0.0] * 19

    assert 0 < separation(graded) < 1 < separation(standout)


def test_neither_path_separating_keeps_the_team_weights() -> None:
    entries = [memory() for _ in range(5)]
    found = [candidate(e, rank=1.0, similarity=0.4) for e in entries]

    assert adaptive_weights(found, best_rank=1.0, weights=DEFAULT_WEIGHTS) == DEFAULT_WEIGHTS


def test_a_flat_keyword_path_gives_its_weight_to_the_vector_path() -> None:
    entries = [memory() for _ in range(10)]
    found = [candidate(e, rank=2.0, similarity=0.3 + (0.3 if i == 0 else 0.0)) for i, e in enumerate(entries)]

    weights = adaptive_weights(found, best_rank=2.0, weights=DEFAULT_WEIGHTS)

    assert weights == Weights(vector=pytest.approx(1.0), keyword=pytest.approx(0.0))


def test_a_keyword_standout_outranks_the_vector_favourite_only_under_adaptive_fusion() -> None:
    # The vector path ranks by a smooth slope (nothing stands out), the keyword path has
    # one clear match (a name, an identifier) far down the vector order.
    entries = [memory() for _ in range(20)]
    named = entries[15]
    found = [
        candidate(e, rank=5.0 if e is named else 0.0, similarity=0.5 - 0.01 * i)
        for i, e in enumerate(entries)
    ]

    relative = hybrid(found, entries)
    adaptive = hybrid(found, entries, fusion="adaptive")

    assert relative[0].candidate.memory_id == entries[0].id
    assert adaptive[0].candidate.memory_id == named.id
    # The weights still sum to the team's, so evidence (and min_score) stay absolute.
    weights = adaptive_weights(found, best_rank=5.0, weights=DEFAULT_WEIGHTS)
    assert weights.vector + weights.keyword == pytest.approx(1.0)
    assert weights.keyword > DEFAULT_WEIGHTS.keyword


def test_the_relevance_floor_drops_weak_matches_before_decay_and_rating() -> None:
    strong, weak = memory(age_days=365), memory()
    found = [candidate(strong, rank=4.0, similarity=0.6), candidate(weak, similarity=0.1)]
    entries = {e.id: e for e in (strong, weak)}
    kept = score_candidates(
        found,
        entries,
        mode="hybrid",
        weights=DEFAULT_WEIGHTS,
        half_life_days=30,
        now=NOW,
        relevance_floor=0.2,
    )

    # A year of decay takes the strong entry's score far below the floor; its
    # relevance is what the floor reads, so it stays, and the weak one goes.
    assert [s.candidate.memory_id for s in kept] == [strong.id]
    parts = kept[0].parts
    assert kept[0].score < 0.2 <= 0.7 * parts["vector"] + 0.3 * parts["keyword"] + parts["entity"]


def test_a_vector_only_paraphrase_survives_the_floor() -> None:
    # Relative fusion gives a match with no word of the query at most 0.49 x its
    # cosine; the floor reads the cosine itself, so a real paraphrase stays.
    paraphrase, filler = memory(), memory()
    found = [candidate(paraphrase, similarity=0.35), candidate(filler, similarity=0.2)]

    kept = hybrid(found, [paraphrase, filler], relevance_floor=0.2)

    assert [s.candidate.memory_id for s in kept] == [paraphrase.id]
    assert kept[0].parts["merged"] < 0.2
