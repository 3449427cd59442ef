"""The diversification step alone (search.retrieval.mmr): Jaccard over word sets and
maximal marginal relevance. Pure functions: no database."""

from __future__ import annotations

import uuid

import pytest

from search.retrieval.candidates import Candidate
from search.retrieval.mmr import MMR_LAMBDA, diversify, jaccard, token_set
from search.retrieval.scoring import Scored


def scored(score: float) -> Scored:
    return Scored(score=score, candidate=Candidate(uuid.uuid4()), parts={})


def test_token_set_is_the_lowercase_words() -> None:
    assert token_set("Deploy, deploy; DEPLOY-friday: naïve café 42") == {
        "deploy",
        "friday",
        "naïve",
        "café",
        "42",
    }
    assert token_set(" ,.;!") == set()


@pytest.mark.parametrize(
    ("a", "b", "similarity"),
    [
        ({"a", "b"}, {"a", "b"}, 1.0),
        ({"a", "b"}, {"c"}, 0.0),
        ({"a", "b", "c"}, {"b", "c", "d"}, 0.5),
        ({"a"}, set(), 0.0),
        (set(), set(), 0.0),
    ],
)
def test_jaccard_is_shared_words_over_all_words(a: set[str], b: set[str], similarity: float) -> None:
    assert jaccard(a, b) == similarity


def test_distinct_texts_keep_the_order_of_their_scores() -> None:
    items = [scored(0.9), scored(0.6), scored(0.3)]
    texts = dict(
        zip([i.candidate.memory_id for i in items], ["red apple", "blue sky", "green tea"], strict=True)
    )

    picked = diversify(items, texts, k=3)

    assert [p.candidate for p in picked] == [i.candidate for i in items]
    # Nothing in common with what is above: the value is λ * score.
    assert [p.mmr for p in picked] == [round(MMR_LAMBDA * i.score, 6) for i in items]


def test_a_different_text_passes_a_near_duplicate_of_the_first() -> None:
    first, duplicate, different = scored(0.9), scored(0.85), scored(0.6)
    texts = {
        first.candidate.memory_id: "alpha beta gamma",
        duplicate.candidate.memory_id: "alpha beta gamma delta",
        different.candidate.memory_id: "omega psi",
    }

    picked = diversify([first, duplicate, different], texts, k=3)

    assert [p.candidate for p in picked] == [first.candidate, different.candidate, duplicate.candidate]
    # The duplicate: 0.7 * 0.85 - 0.3 * (3 shared of 4 words) = 0.37, below 0.7 * 0.6.
    assert [p.mmr for p in picked] == pytest.approx([0.63, 0.42, 0.37])
    assert [p.score for p in picked] == [0.9, 0.6, 0.85]  # scores are not changed


def test_redundancy_is_the_highest_similarity_to_anything_above() -> None:
    a, b, c = scored(0.9), scored(0.8), scored(0.7)
    texts = {
        a.candidate.memory_id: "one two",
        b.candidate.memory_id: "three four",
        c.candidate.memory_id: "three",
    }

    picked = diversify([a, b, c], texts, k=3)

    assert picked[2].candidate == c.candidate
    assert picked[2].mmr == pytest.approx(0.7 * 0.7 - 0.3 * 0.5)  # "three" vs "three four"


def test_at_most_k_come_back_and_the_input_is_left_as_it_was() -> None:
    items = [scored(0.5), scored(0.4), scored(0.3)]
    texts = {i.candidate.memory_id: "same words" for i in items}

    picked = diversify(items, texts, k=2)

    assert len(picked) == 2
    assert all(i.mmr is None for i in items)


def test_equal_values_go_to_the_earlier_candidate() -> None:
    items = [scored(0.5), scored(0.5)]
    texts = {i.candidate.memory_id: f"word{n}" for n, i in enumerate(items)}

    assert [p.candidate for p in diversify(items, texts, k=2)] == [i.candidate for i in items]


def test_nothing_to_pick_from_picks_nothing() -> None:
    assert diversify([], {}, k=5) == []


def naive_diversify(items: list[Scored], texts: dict[uuid.UUID, str], k: int) -> list[uuid.UUID]:
    """MMR as defined: every step recomputes the similarity to every picked result."""
    tokens = {i.candidate.memory_id: token_set(texts[i.candidate.memory_id]) for i in items}
    remaining, picked = list(items), list[uuid.UUID]()
    while remaining and len(picked) < k:
        values = [
            MMR_LAMBDA * item.score
            - (1 - MMR_LAMBDA)
            * max((jaccard(tokens[item.candidate.memory_id], tokens[p]) for p in picked), default=0.0)
            for item in remaining
        ]
        best = values.index(max(values))  # the first of equal values: ties go to the earlier one
        picked.append(remaining.pop(best).candidate.memory_id)
    return picked


@pytest.mark.parametrize("seed", range(20))
def test_the_running_maximum_picks_what_the_definition_picks(seed: int) -> None:
    import random

    rng = random.Random(seed)
    words = ["deploy", "redis", "stripe", "paddle", "friday", "tests", "queue", "index", "cache", "ops"]
    items = [scored(round(rng.random(), 3)) for _ in range(rng.randint(1, 40))]
    texts = {i.candidate.memory_id: " ".join(rng.choices(words, k=rng.randint(0, 6))) for i in items}
    k = rng.randint(1, 50)

    picked = diversify(sorted(items, key=lambda i: -i.score), texts, k)

    expected = naive_diversify(sorted(items, key=lambda i: -i.score), texts, k)
    assert [p.candidate.memory_id for p in picked] == expected


@pytest.mark.parametrize("seed", range(10))
def test_bitset_similarity_is_the_set_similarity(seed: int) -> None:
    import random

    from search.retrieval.mmr import bit_jaccard, token_bits

    rng = random.Random(seed)
    words = [f"w{n}" for n in range(300)] + ["Café", "café", "naïve", "42"]
    texts = [" ".join(rng.choices(words, k=rng.randint(0, 120))) for _ in range(12)]
    bits = token_bits(texts)
    for i, a in enumerate(texts):
        for j, b in enumerate(texts):
            expected = jaccard(token_set(a), token_set(b))
            assert bit_jaccard(bits[i], bits[i].bit_count(), bits[j], bits[j].bit_count()) == expected


def test_similarities_computed_are_linear_in_k_times_n(monkeypatch: pytest.MonkeyPatch) -> None:
    from search.retrieval import mmr

    calls = 0
    real = mmr.bit_jaccard

    def counted(a: int, a_size: int, b: int, b_size: int) -> float:
        nonlocal calls
        calls += 1
        return real(a, a_size, b, b_size)

    monkeypatch.setattr(mmr, "bit_jaccard", counted)
    items = [scored(1 - n / 1000) for n in range(200)]
    texts = {i.candidate.memory_id: f"word{n} shared" for n, i in enumerate(items)}

    diversify(items, texts, k=50)

    # k picks, each compared once with what remains: at most k * n, not k² * n / 2.
    assert calls <= 50 * 200


@pytest.mark.parametrize("unit", ["a.", "a@", "://", "a ", "ab" * 3 + "=", "é,"])
def test_adversarial_64_kib_texts_are_diversified_as_defined(unit: str) -> None:
    """64 KiB of a repeated separator shape per candidate: the tokenizer and the
    bitsets stay linear, and the picks are the definition's."""
    items = [scored(1 - n / 100) for n in range(40)]
    texts = {
        i.candidate.memory_id: (unit * (65536 // len(unit)))[: 65536 - n] + f" w{n}"
        for n, i in enumerate(items)
    }

    picked = diversify(items, texts, k=10)

    assert [p.candidate.memory_id for p in picked] == naive_diversify(items, texts, k=10)
