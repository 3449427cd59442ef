"""Partial words and identifiers (search.retrieval.trigrams): a word the team does not
hold is matched by trigrams to its lexemes and its keys, through the REST API, in the
team's scope only, with the indexes the lookups are for."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from search.retrieval import trigrams
from search.retrieval.candidates import plan_keyword_query, read_keyword_stats
from teams.scope import team_scope
from tests.conftest import Agent, search

GRAFANA = "Dashboards for the ingest pipeline live in Grafana, in the ops folder."
LUNCH = "The team orders pizza on Wednesdays from the place on Elm Street."


@pytest.fixture
def corpus(member: Agent, save) -> dict[str, dict[str, Any]]:  # type: ignore[no-untyped-def]
    return {
        "dashboards": save(member, "dashboards", GRAFANA),
        # The key says Friday; the text does not.
        "deploy-friday": save(member, "deploy-friday", "No releases at the end of the week.", type="lesson"),
        "lunch": save(member, "lunch", LUNCH),
    }


def keys(body: dict[str, Any]) -> list[str]:
    return [r["key"] for r in body["results"]]


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_a_partial_word_finds_the_entry_with_the_whole_word(
    corpus: dict[str, dict[str, Any]], member: Agent, mode: str
) -> None:
    body = search(member, "grafan", mode=mode, explain=True)

    assert keys(body)[0] == "dashboards"
    assert body["results"][0]["explain"]["keyword"] == 1.0
    assert "keyword" in body["results"][0]["source"]


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_an_identifier_finds_the_key_it_is_part_of(
    corpus: dict[str, dict[str, Any]], member: Agent, mode: str
) -> None:
    body = search(member, "deploy_fri", mode=mode, explain=True)

    assert keys(body)[0] == "deploy-friday"
    assert body["results"][0]["explain"]["keyword"] == 1.0


def test_keyword_mode_finds_nothing_for_a_word_like_nothing_the_team_holds(
    corpus: dict[str, dict[str, Any]], member: Agent
) -> None:
    assert search(member, "zyxwvut", mode="keyword")["results"] == []
    # Known words are not looked up: whole-word matching as before.
    assert keys(search(member, "pizza", mode="keyword")) == ["lunch"]


def test_a_near_word_weighs_less_than_the_word_itself(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    save(member, "exact", "The grafana folder.")
    save(member, "other", "Unrelated words about lunch.")
    with team_scope(member.team.id):
        exact = read_keyword_stats("grafana", member.team.id).plan()
        stats = read_keyword_stats("grafan", member.team.id)
        near = stats.plan(similar=trigrams.similar_lexemes(stats.unknown))

    assert stats.unknown == ["grafan"] and stats.plan() is None
    assert exact is not None and near is not None
    assert near.lexemes == exact.lexemes == ["grafana"]
    assert 0 < near.idf[0] < exact.idf[0]


def test_near_words_stand_in_only_when_nothing_matches_word_for_word(
    corpus: dict[str, dict[str, Any]], member: Agent
) -> None:
    # "pizza" matches: "grafan" is not replaced by grafana then (no filler), and no key is like it.
    assert keys(search(member, "pizza grafan", mode="keyword")) == ["lunch"]
    # A key like an unknown word is found whatever else matches.
    assert keys(search(member, "pizza deploy_fri", mode="keyword"))[:2] in (
        ["lunch", "deploy-friday"],
        ["deploy-friday", "lunch"],
    )


def test_another_teams_vocabulary_and_keys_are_never_read(
    member: Agent,
    outsider: Agent,
    save,  # type: ignore[no-untyped-def]
) -> None:
    save(outsider, "grafana-setup", GRAFANA)
    save(member, "lunch", LUNCH)

    assert search(member, "grafan", mode="keyword")["results"] == []
    assert search(member, "grafana_set", mode="keyword")["results"] == []
    with team_scope(member.team.id):
        assert plan_keyword_query("grafan", member.team.id) is None
        assert trigrams.similar_lexemes(["grafan"]) == []
    with team_scope(outsider.team.id):
        assert [lexeme for _, lexeme, _, _ in trigrams.similar_lexemes(["grafan"])] == ["grafana"]


def test_numbers_and_short_words_are_not_looked_up() -> None:
    assert trigrams.lookup_words(["12345", "fr", "inc-12345", "grafan"]) == ["inc-12345", "grafan"]
    assert len(trigrams.lookup_words([f"word{n}" for n in range(20)])) == trigrams.MAX_WORDS


def test_the_trigrams_are_pg_trgms(db: None) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT search_team_trigrams(7, 'Deploy_fri')")
        found = cursor.fetchone()[0]
    assert sorted(t.removeprefix("7:") for t in found) == sorted(
        ["  d", " de", "dep", "epl", "plo", "loy", "oy ", "  f", " fr", "fri", "ri "]
    )


def test_the_lookups_match_their_gin_indexes(db: None) -> None:
    """The functions' conditions are the indexed expressions, word for word, so the
    planner can read the GIN indexes (the latency bench shows it does, at 10,000)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes"
            " WHERE indexname IN ('keyword_stat_trigrams', 'key_trigrams')"
        )
        indexes = dict(cursor.fetchall())
        cursor.execute(
            "SELECT proname, prosrc FROM pg_proc"
            " WHERE proname IN ('search_similar_lexemes', 'search_similar_keys')"
        )
        sources = dict(cursor.fetchall())
    # Without a pending list: a search never reads entries not merged yet.
    assert indexes["keyword_stat_trigrams"].endswith("USING gin (trigrams) WITH (fastupdate=off)")
    assert indexes["key_trigrams"].endswith("USING gin (trigrams) WITH (fastupdate=off)")
    assert "WHERE s.trigrams && $3 AND" in sources["search_similar_lexemes"]
    assert "WHERE k.trigrams && $2 LIMIT" in sources["search_similar_keys"]


def test_a_long_word_reads_candidates_by_its_inner_trigrams(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    """With one candidate to read, the team's lexeme that shares only the word's closing
    trigram ("an " of plan) is not the one read: grafana, which shares its inner ones,
    is. A short word keeps its closing trigram: "reed" reaches red through it alone."""
    save(member, "plans", "The plan.")  # stored first, so an index scan meets it first
    save(member, "exact", "The grafana folder.")
    save(member, "colour", "Paint it red.")
    with team_scope(member.team.id), connection.cursor() as cursor:
        cursor.execute(
            "SELECT word, lexeme FROM search_similar_lexemes(%s, %s, %s, %s, 1)",
            [["grafan", "reed"], trigrams.MIN_COVERAGE, trigrams.MIN_SIMILARITY, trigrams.LEXEMES_PER_WORD],
        )
        found = cursor.fetchall()

    assert found == [("grafan", "grafana"), ("reed", "red")]


@pytest.mark.parametrize(
    "query",
    [
        "-" * 7_999 + "x",  # separators, then one letter
        "grafan-" * 1_142,  # one unknown word, again and again, between separators
        "g" * 8_000,  # one word as long as a query may be
    ],
)
def test_adversarial_queries_are_looked_up_and_answered(
    corpus: dict[str, dict[str, Any]], member: Agent, query: str
) -> None:
    for mode in ("keyword", "hybrid"):
        body = search(member, query, mode=mode)
        assert all(r["key"] in corpus for r in body["results"])
