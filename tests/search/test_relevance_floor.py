"""The default relevance floor: a hybrid search that is not given a min_score leaves
out what matched nothing well (search.selectors.RELEVANCE_FLOOR), keeps real matches,
and a caller's min_score still means what it says. Through the REST API with the
embedded local model."""

from __future__ import annotations

from typing import Any

import pytest

from search.selectors import RELEVANCE_FLOOR
from tests.conftest import Agent, search

UNRELATED = {
    "lunch": "The team orders pizza on Wednesdays from the place on Elm Street.",
    "vpn": "The VPN gateway is vpn-old.example.org; ask IT for an account.",
    "backups": "Database backups run nightly at 02:00 and are kept for 30 days.",
    "onboarding": "New joiners get a laptop and a buddy in their first week.",
    "parking": "Visitors park in the north lot; the badge office opens at 8.",
    "printer": "The third floor printer jams on A3 paper; use the second floor one.",
    "coffee": "The espresso machine is descaled every Monday by facilities.",
}
# Nothing above is about certificates: the local model puts every entry below 0.2
# cosine, and no word of the query is in the team.
QUERY = "how do I rotate the TLS certificate of the ingress?"
REAL_MATCH = "The ingress TLS certificate is renewed by cert-manager; to rotate it by hand, delete the ingress-tls secret."


@pytest.fixture
def unrelated_team(member: Agent, save) -> Agent:  # type: ignore[no-untyped-def]
    for key, content in UNRELATED.items():
        save(member, key, content)
    return member


def test_a_query_with_nothing_relevant_returns_at_most_one_result(unrelated_team: Agent) -> None:
    results = search(unrelated_team, QUERY, max_results=10)["results"]

    assert len(results) <= 1, [(r["key"], r["score"]) for r in results]


def test_a_real_match_survives_the_floor_and_comes_first(unrelated_team: Agent, save) -> None:  # type: ignore[no-untyped-def]
    save(unrelated_team, "tls-rotation", REAL_MATCH)

    results = search(unrelated_team, QUERY, max_results=10, explain=True)["results"]

    assert results[0]["key"] == "tls-rotation"
    assert len(results) <= 2
    parts = results[0]["explain"]
    assert 0.7 * parts["vector"] + 0.3 * parts["keyword"] + parts["entity"] >= RELEVANCE_FLOOR


def test_min_score_replaces_the_floor_and_keeps_its_meaning(unrelated_team: Agent, save) -> None:  # type: ignore[no-untyped-def]
    save(unrelated_team, "tls-rotation", REAL_MATCH)

    everything = search(unrelated_team, QUERY, max_results=10, min_score=0.0)["results"]
    strict = search(unrelated_team, QUERY, max_results=10, min_score=0.3)["results"]

    # 0 asks for every candidate: the filler the floor leaves out comes back.
    assert len(everything) == len(UNRELATED) + 1
    assert strict and all(r["score"] >= 0.3 for r in strict)
    assert {r["key"] for r in strict} < {r["key"] for r in everything}


@pytest.mark.parametrize("mode", ["keyword", "vector"])
def test_the_single_modes_have_no_default_floor(unrelated_team: Agent, save, mode: str) -> None:  # type: ignore[no-untyped-def]
    save(unrelated_team, "tls-rotation", REAL_MATCH)

    results: list[dict[str, Any]] = search(unrelated_team, QUERY, max_results=10, mode=mode)["results"]

    assert results[0]["key"] == "tls-rotation"
    if mode == "vector":
        assert len(results) == len(UNRELATED) + 1
