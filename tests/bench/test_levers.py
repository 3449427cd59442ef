"""The bench's query-time levers (issue 15) are pure functions of the query and the
candidates: checked here by hand, no database."""

from __future__ import annotations

import uuid

import pytest

from search.retrieval.candidates import Candidate
from tests.bench import levers


def test_question_phrases_go_and_the_content_words_stay() -> None:
    query = "Do you remember when did we go to Paris? I think the tell-tale sign was the rain."

    assert levers.strip_question_phrases(query) == "we go to Paris ? the tell - tale sign was the rain ."


def test_question_phrase_removal_takes_the_longest_phrase_and_whole_words_only() -> None:
    # "can you tell me" wins over "tell me"; "remembered" is not "remember".
    assert levers.strip_question_phrases("Can you tell me what we remembered") == "what we remembered"


def test_question_phrase_removal_is_linear_on_a_long_adversarial_query() -> None:
    query = "do you " * 4000 + "Paris"

    assert levers.strip_question_phrases(query).endswith("Paris")


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
