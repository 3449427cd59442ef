"""The bench's query-time levers are pure functions of the query and the
candidates: checked here by hand, no database."""

from __future__ import annotations

import uuid

import pytest

from search.retrieval.candidates import Candidate
from search.retrieval.scoring import Weights
from tests.bench import levers
from tests.linear_time import assert_linear_time


def test_question_phrases_go_and_the_content_words_stay() -> None:
    query = "Do you remember when did we go to Paris? I think the tell-tale sign was the rain."

    assert levers.strip_question_phrases(query) == "we go to Paris ? the tell - tale sign was the rain ."


def test_question_phrase_removal_takes_the_longest_phrase_and_whole_words_only() -> None:
    # "can you tell me" wins over "tell me"; "remembered" is not "remember".
    assert levers.strip_question_phrases("Can you tell me what we remembered") == "what we remembered"


def test_question_phrase_removal_is_linear_on_a_long_adversarial_query() -> None:
    def query_of_size(size: int) -> str:
        return "do you " * (size // 7) + "Paris"

    assert levers.strip_question_phrases(query_of_size(28_000)).endswith("Paris")
    assert_linear_time(levers.strip_question_phrases, query_of_size, 28_000)


def test_reciprocal_rank_fusion_ranks_by_position_not_by_score_scale() -> None:
    a, b, c = (uuid.UUID(int=n) for n in (1, 2, 3))
    candidates = [
        Candidate(a, keyword_rank=9.0, similarity=0.30),
        Candidate(b, keyword_rank=1.0, similarity=0.31),
        Candidate(c, keyword_rank=0.0, similarity=0.90),
    ]

    fused = levers.rrf_merged(candidates)

    top = 2 / 61
    assert fused[a] == pytest.approx((1 / 61 + 1 / 63) / top)
    assert fused[b] == pytest.approx((1 / 62 + 1 / 62) / top)
    assert fused[c] == pytest.approx((1 / 61) / top)  # no keyword match: no keyword share


def test_a_short_query_has_no_windows() -> None:
    assert levers.query_windows("one line\ntwo lines\nthree\nfour") == []
    assert levers.query_windows("One. Two! Three? Four.") == []


def test_windows_overlap_and_cover_the_first_and_last_lines() -> None:
    query = "\n".join(f"line {n}" for n in range(6))

    windows = levers.query_windows(query)

    assert windows == [
        "line 0\nline 1\nline 2\nline 3",
        "line 1\nline 2\nline 3\nline 4",
        "line 2\nline 3\nline 4\nline 5",
    ]


def test_a_paragraph_is_windowed_by_sentences() -> None:
    windows = levers.query_windows("We met Ada. She brews. It was cold! Paris? Then home.")

    assert windows == [
        "We met Ada.\nShe brews.\nIt was cold!\nParis?",
        "She brews.\nIt was cold!\nParis?\nThen home.",
    ]


def test_a_long_query_gets_at_most_eight_windows_in_linear_time() -> None:
    def query_of_size(size: int) -> str:
        return "\n".join(f"line {n}" for n in range(size // 20)) + "." * (size // 2)

    windows = levers.query_windows(query_of_size(100_000))

    assert len(windows) == levers.MAX_QUERY_WINDOWS
    assert windows[0].startswith("line 0\n") and windows[-1].startswith("line 4996\n")
    assert_linear_time(levers.query_windows, query_of_size, 100_000)


def test_feedback_picks_the_best_merged_candidates_by_their_best_chunk() -> None:
    a, b, c = (uuid.UUID(int=n) for n in (1, 2, 3))
    candidates = {
        a: Candidate(a, keyword_rank=2.0, keyword_chunk=10, similarity=0.2, vector_chunk=11),
        b: Candidate(b, keyword_rank=0.0, similarity=0.9, vector_chunk=20),
        c: Candidate(c, keyword_rank=0.0, similarity=0.0),
    }

    picked = levers.feedback_chunks(candidates, weights=Weights(vector=0.7, keyword=0.3))

    # a: 0.7 * 0.2 + 0.3 * 1.0 = 0.44 by its keyword chunk; b: 0.63; c scores 0.
    assert picked == [(20, pytest.approx(0.63)), (10, pytest.approx(0.44))]


def test_feedback_terms_weigh_the_relevance_model_by_idf_and_keep_the_best() -> None:
    chunks = [(1, 3.0), (2, 1.0)]
    lexemes = [(1, "zeppelin", 1, 2.0), (1, "bart", 1, 0.0), (2, "zeppelin", 1, 2.0), (2, "hangar", 2, 1.0)]

    terms = levers.feedback_terms(chunks, lexemes)

    # zeppelin: (0.75 * 1/2 + 0.25 * 1/3) * 2.0 = 0.9167, hangar: 0.25 * 2/3 * 1.0 = 0.1667; bart: idf 0.
    assert set(terms) == {"zeppelin", "hangar"}
    assert terms["zeppelin"] == pytest.approx(levers.FEEDBACK_WEIGHT * 2.0)
    assert terms["hangar"] == pytest.approx(levers.FEEDBACK_WEIGHT * (0.1667 / 0.9167) * 1.0, rel=1e-3)


def test_feedback_terms_are_bounded() -> None:
    lexemes = [(1, f"word{n}", 1, 1.0 + n / 100) for n in range(500)]

    terms = levers.feedback_terms([(1, 1.0)], lexemes)

    assert len(terms) == levers.FEEDBACK_TERMS
    assert "word499" in terms and "word0" not in terms
