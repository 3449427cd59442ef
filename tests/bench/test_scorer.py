"""The benchmark's loaders and scorer, on a tiny sample kept in the repository
(tests/bench/sample: written for these tests in MADial-Bench's format, see its README).

No database: the scorer is pure. The expected figures below are worked out by hand from
the README's definitions, not by the scorer under test."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tests.bench import quality

SAMPLE = Path(__file__).parent / "sample"


def test_the_memory_archive_loads_with_the_user_derived_from_the_name_in_the_event() -> None:
    memories = quality.load_memories(SAMPLE)

    assert [m.id for m in memories] == list(range(1, 11))
    assert [m.user_id for m in memories] == [1, 1, 1, 2, 2, 2, 2, 2, 2, 2]
    first = memories[0]
    assert (first.time, first.scene, first.emotion, first.event) == (
        "2019-03-02",
        "Activity",
        "Happy",
        "Bart finished his first half marathon in the rain.",
    )


def test_dialogues_load_with_the_context_before_the_first_test_turn_as_the_query() -> None:
    dialogues = quality.load_dialogues(SAMPLE)

    assert [(d.index, d.user_id, d.relevant) for d in dialogues] == [
        (0, 1, (2,)),
        (1, 2, (4, 6)),
        (2, 2, (10,)),
    ]
    assert dialogues[0].query == '"The cat knocked my coffee over again."\n"Oh no, is everything all right?"'
    # A line without a well-formed `<Name>:` prefix is kept as it is.
    assert (
        dialogues[1].query
        == '"I want to grow something this summer."\nLisa "maybe music too, I am not sure."'
    )
    # The test turns paraphrase the gold memory: never part of the query.
    assert "Pixel" not in dialogues[0].query and "tomatoes" not in dialogues[1].query
    assert dialogues[2].query == '"The whole street smells of yeast today."'


# Per dialogue of the sample's reference run, from the README's definitions:
#   1: gold {2},    ranked 2 1 3           -> every recall 1, nDCG 1, MRR 1, Hit@5 1
#   2: gold {4, 6}, ranked 5 4 6 7 8 9 10  -> R@1 0, R@3/5/10 1, hits at 0-based 1 and 2,
#      nDCG@5 = nDCG@10 = (1/log2 3 + 1/log2 4) / (1 + 1/log2 3), MRR 1/2, Hit@5 1
#   3: gold {10},   ranked 4 5 6 7 8 9 10  -> R@1/3/5 0, R@10 1, hit at 0-based 6,
#      nDCG@5 0, nDCG@10 = 1/log2 8 = 1/3, MRR 1/7, Hit@5 0
SECOND_NDCG = (1 / math.log2(3) + 1 / math.log2(4)) / (1 + 1 / math.log2(3))
SAMPLE_MEANS = {
    "R@1": 1 / 3,
    "R@3": 2 / 3,
    "R@5": 2 / 3,
    "R@10": 1.0,
    "nDCG@5": (1 + SECOND_NDCG + 0) / 3,
    "nDCG@10": (1 + SECOND_NDCG + 1 / 3) / 3,
    "MRR@10": (1 + 1 / 2 + 1 / 7) / 3,
    "Hit@5": 2 / 3,
}


def test_scorer_gives_the_hand_computed_means_of_the_sample_reference_run() -> None:
    rows = quality.load_reference_run(SAMPLE)

    got = quality.mean_scores([quality.score_one(row["top-20-ids"], row["relevant-id"]) for row in rows])

    assert got == pytest.approx(SAMPLE_MEANS, abs=1e-12)


def test_self_check_reports_what_it_scored_and_refuses_a_run_that_is_not_the_readmes() -> None:
    ok, got = quality.self_check(SAMPLE)

    assert got == pytest.approx(SAMPLE_MEANS, abs=1e-12)
    assert ok is False


def test_scorer_follows_the_readme_definitions_on_a_small_case() -> None:
    scores = quality.score_one([9, 1, 8, 2], gold=[1, 2, 3])

    assert scores["R@1"] == 0
    assert scores["R@3"] == 1 / 3
    assert scores["R@5"] == 2 / 3
    assert scores["MRR@10"] == 1 / 2
    assert scores["Hit@5"] == 1
    # hits at positions 1 and 3 (0-based) over the ideal of 3 hits at 0, 1, 2
    ideal = 1 + 1 / 1.584962500721156 + 1 / 2
    assert abs(scores["nDCG@5"] - (1 / 1.584962500721156 + 1 / 2.321928094887362) / ideal) < 1e-12


def test_a_dialogue_without_gold_ids_cannot_be_scored() -> None:
    with pytest.raises(ValueError, match="without gold ids"):
        quality.score_one([1, 2], gold=[])


def test_query_keeps_only_the_lines_before_the_first_test_turn() -> None:
    lines = [
        "<BOD>\n",
        '<Bart>: "hello"\n',
        '<Assistant>: "hi"\n',
        '<Assistant>: "gold paraphrase"\n',
        "<EOD>\n",
    ]

    assert quality.dialogue_query(lines, 3) == '"hello"\n"hi"'


def test_the_split_is_pinned_to_the_dialogue_id_so_it_never_moves() -> None:
    # Pinned values: a changed hash, salt or rule would silently move dialogues between
    # the halves and let tuning leak into the held-out figures.
    assert [quality.split_of(i) for i in range(10)] == [
        "tune",
        "tune",
        "held-out",
        "held-out",
        "held-out",
        "tune",
        "tune",
        "held-out",
        "held-out",
        "held-out",
    ]
    assert [quality.split_of(i) for i in range(160)] == [quality.split_of(i) for i in range(160)]


def test_the_split_puts_every_dialogue_in_exactly_one_half_and_both_halves_are_usable() -> None:
    tune = {i for i in range(160) if quality.split_of(i) == quality.TUNE}
    held_out = {i for i in range(160) if quality.split_of(i) == quality.HELD_OUT}

    assert tune.isdisjoint(held_out)
    assert tune | held_out == set(range(160))
    assert (len(tune), len(held_out)) == (86, 74)


def test_the_sample_dialogues_are_split_by_their_line_number() -> None:
    dialogues = quality.load_dialogues(SAMPLE)

    assert [quality.split_of(d.index) for d in dialogues] == ["tune", "tune", "held-out"]


def test_the_bootstrap_interval_is_deterministic_for_a_seed_and_brackets_the_mean() -> None:
    values = [((i * 7919) % 101) / 100 for i in range(30)]
    mean = sum(values) / len(values)

    first = quality.bootstrap_interval(values, resamples=500, seed=7)

    assert quality.bootstrap_interval(values, resamples=500, seed=7) == first
    assert quality.bootstrap_interval(values, resamples=500, seed=8) != first
    assert first[0] < mean < first[1]
    # Every resample of a constant is that constant.
    assert quality.bootstrap_interval([0.5] * 20) == (0.5, 0.5)
    with pytest.raises(ValueError, match="no values"):
        quality.bootstrap_interval([])


def test_the_default_bootstrap_uses_the_documented_seed_and_resample_count() -> None:
    values = [float(i % 3 == 0) for i in range(40)]

    assert quality.bootstrap_interval(values) == quality.bootstrap_interval(values, resamples=2000, seed=15)
