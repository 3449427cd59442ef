"""Entity boosting (search.retrieval.entities): which words of a query count as names,
and how much an entry that holds them gains. Pure functions: no database."""

from __future__ import annotations

import pytest

from search.retrieval.entities import ENTITY_BOOST, entity_bonus, entity_patterns, query_entities
from tests.linear_time import assert_linear_time


def test_names_inside_a_sentence_count_and_sentence_openers_do_not() -> None:
    query = "What did Ada say about the Louvre? The trip with Bob was long.\nI think Ada liked it"

    assert query_entities(query) == ("Ada", "Louvre", "Bob")


def test_short_quoted_phrases_are_entities_and_long_quotes_are_not() -> None:
    query = 'the sign said "blue moon cafe" and he said "this is far too long to be a name"'

    assert query_entities(query) == ("blue moon cafe",)


def test_a_possessive_names_the_same_entity() -> None:
    assert query_entities("tell me about Ada's hobby") == ("Ada",)


def test_an_entity_matches_case_sensitively_and_as_whole_words_only() -> None:
    patterns = entity_patterns(["Ada", "blue moon cafe"])

    assert entity_bonus(patterns, "Ada's hobby is brewing") == ENTITY_BOOST
    assert entity_bonus(patterns, "ada brews; Adam too; Canada") == 0.0
    assert entity_bonus(patterns, "we met at the blue\n moon   cafe with Ada") == pytest.approx(
        2 * ENTITY_BOOST
    )


def test_the_bonus_stops_at_three_entities() -> None:
    patterns = entity_patterns(["Ada", "Bob", "Cy", "Dee"])

    assert entity_bonus(patterns, "Ada Bob Cy Dee") == pytest.approx(3 * ENTITY_BOOST)


def test_a_long_query_is_handled_in_linear_time_and_bounded() -> None:
    query = ("and then Name" + "x " * 3) * 2000 + "!" + " " * 50_000

    entities = query_entities(query)

    assert entities == ("Namex",)
    assert len(query_entities(" ".join(f"met Zed{chr(97 + i % 26)}{i}" for i in range(100)))) == 16


SIZE = 64 * 1024
# Each shape: a prefix, then a separator repeated up to the size.
SEPARATOR_SHAPES = {
    "dot-space": ("", ". "),
    "quotes": ("", '"'),
    "curly-quotes": ("", "\u201c"),
    "name-repeated": ("", "Ada "),
    "name-then-spaces": ("Ada", " "),
    "apostrophes": ("", "A'"),
    "parens": ("", "("),
}
PATTERNS = entity_patterns(["Ada Lovelace", "Ada", "Bart"])


def _separators(shape: str, size: int) -> str:
    prefix, fragment = SEPARATOR_SHAPES[shape]
    return prefix + fragment * ((size - len(prefix)) // len(fragment))


@pytest.mark.parametrize("shape", sorted(SEPARATOR_SHAPES))
def test_64_kib_of_repeated_separators_is_read_in_linear_time_as_query_and_as_content(shape: str) -> None:
    text = _separators(shape, SIZE)

    assert len(query_entities(text)) <= 16
    assert 0 <= entity_bonus(PATTERNS, text) <= 0.15
    assert_linear_time(query_entities, lambda size: _separators(shape, size), SIZE)
    assert_linear_time(
        lambda content: entity_bonus(PATTERNS, content), lambda size: _separators(shape, size), SIZE
    )
