"""Identifier-like queries (search.retrieval.identifiers): a query of one or two tokens,
one shaped like an identifier, lets the keyword path lead in hybrid mode, so the one
entry that holds the identifier comes first over the vector path's noise; every other
query is scored as before. The shape test is pure and linear; the ranking is checked
through REST and MCP (the CLI is a REST client) with the embedded local model."""

from __future__ import annotations

from typing import Any

import pytest

from search.retrieval.candidates import Candidate
from search.retrieval.identifiers import MAX_TOKENS, is_identifier_query, is_identifier_token
from search.retrieval.scoring import RELATIVE_MIN_BAND, Weights, score_candidates
from search.run_search import embed_and_search
from teams.scope import team_scope
from tests.conftest import Agent, search
from tests.linear_time import assert_linear_time
from tests.search.test_scoring import DEFAULT_WEIGHTS, NOW, candidate, hybrid, memory

IDENTIFIERS = ["deploy_fri", "ERR_4711", "zq-marker-93", "billingSvcV2", "INC-20417", "ingestmark00042"]


# --------------------------------------------------------------------------- the shape


@pytest.mark.parametrize(
    "query",
    [
        *IDENTIFIERS,
        "v2",
        "4711",
        "api.v2",
        "ops@example",
        "src/main",
        "host:5432",
        "deploy_fri rule",  # two tokens, one of them an identifier
        "what ERR_4711",
        "  ERR_4711  ",
        "`billingSvcV2`",
        "ERR_٤٧١١",  # Arabic-Indic digits are digits
        "σύνδεσηΧρήστη",  # a camelCase capital in Greek
    ],
)
def test_identifier_shaped_queries_are_identifier_like(query: str) -> None:
    assert is_identifier_query(query)


@pytest.mark.parametrize(
    "query",
    [
        "grafana",  # one plain word: the paths' usual balance
        "deploy friday",
        "Deploy Friday",
        "when do we deploy?",
        "Do you remember dancing at last year's Christmas party?",
        "deploy_fri on a friday",  # more than MAX_TOKENS tokens
        "ERR_4711 ERR_4712 ERR_4713",
        "-x",  # a joiner needs a letter or digit on both sides
        "x- -y",
        "a..b",
        "ÉCOLE",
        "école",
        "日本語の質問",
        "emoji 🚀",
        "",
        "   ",
        "ok\x00",  # NUL is not a joiner; the API refuses it before search (below)
    ],
)
def test_other_queries_are_not(query: str) -> None:
    assert not is_identifier_query(query)


def test_a_joiner_counts_only_between_word_characters() -> None:
    assert is_identifier_token("a-b") and is_identifier_token("a.b") and is_identifier_token("é/ü")
    assert not any(is_identifier_token(t) for t in ["a-", "-b", "a-.b", "a\x00b", "a b"])


def test_long_queries_are_decided_by_their_token_count() -> None:
    sixty_four_kib = 64 * 1024
    assert not is_identifier_query("a" * sixty_four_kib)
    assert is_identifier_query("a" * (sixty_four_kib - 1) + "1")
    assert not is_identifier_query("a1 " * (sixty_four_kib // 3))
    assert not is_identifier_query(" ".join(["x"] * (MAX_TOKENS + 1)))


@pytest.mark.parametrize(
    "text_of_size",
    [
        lambda n: "a" * n,  # one token scanned to its end
        lambda n: "a" * (n - 1) + "1",
        lambda n: "-." * (n // 2),
        lambda n: "é" * n,
        lambda n: "a " * (n // 2),  # many tokens
        lambda n: "\x00" * n,
    ],
    ids=["letters", "digit-last", "joiners", "unicode", "many-tokens", "nul"],
)
def test_the_shape_test_is_linear(text_of_size: Any) -> None:
    assert_linear_time(is_identifier_query, text_of_size, 1 << 18)


# --------------------------------------------------------------------------- the scoring


def test_the_keyword_path_leads_when_the_query_is_identifier_like() -> None:
    holder, noise = memory(), memory()
    found = [candidate(holder, rank=4.0, similarity=0.12), candidate(noise, rank=0.0, similarity=0.31)]

    usual = hybrid(found, [holder, noise])
    leading = hybrid(found, [holder, noise], keyword_leads=True)

    assert [s.candidate.memory_id for s in usual] == [noise.id, holder.id]
    assert [s.candidate.memory_id for s in leading] == [holder.id, noise.id]
    # Swapped: vector 0.3, keyword 0.7; evidence is the best absolute sum under them.
    # The band 0.31 - 0.12 is stretched as if it were RELATIVE_MIN_BAND wide.
    evidence = 0.3 * 0.12 + 0.7 * 1.0
    vector_relative = 1 - (0.31 - 0.12) / RELATIVE_MIN_BAND
    assert leading[0].parts["keyword_weight"] == pytest.approx(0.7)
    assert leading[0].parts["evidence"] == pytest.approx(evidence)
    assert leading[0].parts["merged"] == pytest.approx((0.3 * vector_relative + 0.7 * 1.0) * evidence)
    assert "keyword_weight" not in usual[0].parts


def test_without_a_keyword_match_nothing_changes() -> None:
    a, b = memory(), memory()
    found = [candidate(a, similarity=0.4), candidate(b, similarity=0.2)]

    assert hybrid(found, [a, b], keyword_leads=True) == hybrid(found, [a, b])


def test_a_team_that_already_leads_with_keywords_keeps_its_weights() -> None:
    holder, noise = memory(), memory()
    found = [candidate(holder, rank=2.0, similarity=0.2), candidate(noise, rank=1.0, similarity=0.5)]

    def scored(leads: bool) -> list[tuple[Any, float]]:
        return [
            (s.candidate.memory_id, s.score)
            for s in score_candidates(
                found,
                {holder.id: holder, noise.id: noise},
                mode="hybrid",
                weights=Weights(vector=0.2, keyword=0.8),
                half_life_days=0,
                now=NOW,
                keyword_leads=leads,
            )
        ]

    assert scored(True) == scored(False)


def test_the_relevance_floor_keeps_the_team_weights() -> None:
    # Keyword 0.5 of the best and cosine 0.1: 0.7 * 0.1 + 0.3 * 0.5 = 0.22 under the
    # team's weights (kept by the 0.2 floor) whatever the query's weights.
    holder, half = memory(), memory()
    found = [candidate(holder, rank=2.0, similarity=0.1), candidate(half, rank=1.0, similarity=0.1)]

    for leads in (False, True):
        kept = hybrid(found, [holder, half], relevance_floor=0.2, keyword_leads=leads)
        assert {s.candidate.memory_id for s in kept} == {holder.id, half.id}
        assert {s.candidate.memory_id for s in hybrid(found, [holder, half], relevance_floor=0.23)} == {
            holder.id
        }


def test_a_single_mode_ignores_the_rule() -> None:
    holder, noise = memory(), memory()
    found: list[Candidate] = [candidate(holder, rank=4.0, similarity=0.1), candidate(noise, similarity=0.3)]
    for mode in ("keyword", "vector"):
        runs = [
            score_candidates(
                found,
                {holder.id: holder, noise.id: noise},
                mode=mode,  # type: ignore[arg-type]
                weights=DEFAULT_WEIGHTS,
                half_life_days=0,
                now=NOW,
                keyword_leads=leads,
            )
            for leads in (False, True)
        ]
        assert runs[0] == runs[1]


# --------------------------------------------------------------------------- through the doors

# Entries about what the identifiers' pieces mean (deploy, Friday, errors, markers,
# billing, incidents, ingest), and the holders, each about something else with its
# identifier in passing: the vector path leans to the former, the keyword path finds
# the latter.
FILLER = {
    "deploy-policy": "Never deploy to production on Fridays: nobody is around over the weekend.",
    "error-codes": "Error codes are listed in the runbook with what each error means and who owns it.",
    "probe-markers": "Synthetic monitoring probes carry a marker so that dashboards can filter them out.",
    "billing-retries": "The billing service retries a failed card charge three times over a week.",
    "incidents": "Every incident gets a ticket number and a short write-up within two days.",
    "ingest-check": "The ingest pipeline marks each entry it saves so that the check can find it again.",
    "db-host": "The staging database runs on a host in the eu region, port 5433.",
    "oncall": "The on-call engineer answers pages within fifteen minutes, day or night.",
    "release-notes": "Release notes are written by the engineer who merged the change.",
    "ci-cache": "CI caches pip wheels keyed by the hash of the project file.",
}
HOLDERS = {
    "deploy_fri": (
        "pizza-sheet",
        "The pizza order spreadsheet still runs a macro named deploy_fri, from an old project.",
    ),
    "ERR_4711": ("porter-recipe", "Ada's porter recipe card is filed under ERR_4711 in the brewing binder."),
    "zq-marker-93": (
        "offsite",
        "The winter offsite is booked at the lake hotel, booking reference zq-marker-93.",
    ),
    "billingSvcV2": ("plants", "The office plants' moisture sensor reports to billingSvcV2 by mistake."),
    "INC-20417": (
        "farewell",
        "Maria's farewell party is on the 14th; the list of guests is kept in INC-20417.",
    ),
    "ingestmark00042": ("coffee", "Coffee beans are reordered when the last bag is opened. ingestmark00042"),
}


# Entries holding identifiers of the same shape (the next ticket, the previous
# version): to the model they look like the query, to the keyword path they do not.
SIBLINGS = {
    "sibling-deploy": "The release train runs a job named deploy_mon every Monday morning.",
    "sibling-err": "ERR_4712 means the card processor refused the charge; ERR_4710 means it timed out.",
    "sibling-marker": "The load test tags its requests with zq-marker-94.",
    "sibling-billing": "billingSvcV1 was switched off in the spring; billingSvcV3 is being built.",
    "sibling-incident": "The database failover of May is written up in INC-20418 and INC-20416.",
    "sibling-ingest": "The ingest check saves entries tagged ingestmark00041 and ingestmark00043.",
}


@pytest.fixture
def corpus(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    for key, content in FILLER.items():
        save(member, key, content)
    for key, content in [*HOLDERS.values(), *SIBLINGS.items()]:
        save(member, key, content)


def test_each_identifier_finds_its_entry_first_in_hybrid_mode(corpus: None, member: Agent) -> None:
    answers = {
        identifier: search(member, identifier, explain=True, max_results=5) for identifier in IDENTIFIERS
    }

    assert {body["search_mode"] for body in answers.values()} == {"hybrid"}
    assert {identifier: body["results"][0]["key"] for identifier, body in answers.items()} == {
        identifier: HOLDERS[identifier][0] for identifier in IDENTIFIERS
    }
    for body in answers.values():
        assert body["results"][0]["explain"]["keyword_weight"] == pytest.approx(0.7)


def test_the_rule_decides_the_order(corpus: None, member: Agent) -> None:
    """Without the rule the vector path's noise puts another entry first for some of
    these identifiers: what the rule is for (and why the test above can fail)."""
    firsts = {}
    with team_scope(member.team.id):
        for identifier in IDENTIFIERS:
            for lead in (False, True):
                outcome = embed_and_search(team=member.team, query=identifier, identifier_lead=lead)
                firsts[identifier, lead] = outcome.results[0].key if outcome.results else None

    assert all(firsts[i, True] == HOLDERS[i][0] for i in IDENTIFIERS)
    # Measured on this corpus: 4 of the 6 are not first without the rule.
    assert sum(firsts[i, False] != HOLDERS[i][0] for i in IDENTIFIERS) >= 2


def test_natural_language_queries_keep_their_ranking(corpus: None, member: Agent) -> None:
    with team_scope(member.team.id):
        for query in [
            "Can we push new code live at the end of the working week?",
            "what does the checkout error mean",
            "who writes the release notes",
            "grafana",
            "billing",
        ]:
            runs = [
                embed_and_search(
                    team=member.team, query=query, explain=True, decay=False, identifier_lead=lead
                )
                for lead in (False, True)
            ]
            assert [(r.key, r.score, r.explain) for r in runs[0].results] == [
                (r.key, r.score, r.explain) for r in runs[1].results
            ]


def test_min_score_keeps_its_meaning(corpus: None, member: Agent) -> None:
    everything = search(member, "ERR_4711", min_score=0, max_results=50)["results"]
    best, second = sorted((r["score"] for r in everything), reverse=True)[:2]
    threshold = (best + second) / 2

    above = search(member, "ERR_4711", min_score=threshold, max_results=50)["results"]

    # Exactly the results scoring at least min_score, and no floor: min_score 0 gives all.
    assert [r["key"] for r in above] == [HOLDERS["ERR_4711"][0]]
    assert len(everything) == len(FILLER) + len(HOLDERS) + len(SIBLINGS)


def test_an_identifier_nobody_holds_is_scored_as_before(corpus: None, member: Agent) -> None:
    with team_scope(member.team.id):
        runs = [
            embed_and_search(
                team=member.team, query="ZX-0000", min_score=0, explain=True, identifier_lead=lead
            )
            for lead in (False, True)
        ]
    assert [(r.key, r.score) for r in runs[0].results] == [(r.key, r.score) for r in runs[1].results]
    assert all("keyword_weight" not in (r.explain or {}) for r in runs[1].results)


def test_a_nul_in_an_identifier_query_answers_400_as_before(corpus: None, member: Agent) -> None:
    response = member.client.post(member.url("search/"), {"query": "ERR_4711\x00"}, format="json")

    assert response.status_code == 400
    assert response.json()["error"] == "invalid_characters"


def test_a_long_unicode_query_is_answered(corpus: None, member: Agent) -> None:
    body = search(member, "ERR_4711 " + "é" * 7000)

    assert body["search_mode"] == "hybrid"


@pytest.mark.django_db(transaction=True)
def test_mcp_answers_as_rest_does(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    from tests.mcp.conftest import call_in_process

    for key, content in [*FILLER.items(), *HOLDERS.values(), *SIBLINGS.items()]:
        save(member, key, content)
    for identifier in ("ERR_4711", "billingSvcV2"):
        status, body = call_in_process(member.token, "memory_search", {"query": identifier})
        assert status == 200 and "error" not in body, body
        rest = search(member, identifier)
        assert [r["key"] for r in body["results"]] == [r["key"] for r in rest["results"]]
        assert body["results"][0]["key"] == HOLDERS[identifier][0]
