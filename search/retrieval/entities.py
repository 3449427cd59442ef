"""Entity boosting, part of step 2: the names in a query and its short quoted
phrases, matched exactly in an entry's text, add a small bonus to the merged score.

Neither path of the hybrid search sees a name as special: the embedding blurs "Anna"
into "a friend", and BM25 counts it as one more lexeme, stemmed and lowercased. An
exact, case-sensitive, whole-word match of a name the user wrote is strong evidence.

- a name: a capitalised word (an upper-case letter, then a lower-case one) that does
  not open a line, a sentence or a quotation, so "The" and "What" at a sentence start
  are not names; "I" and its contractions never are; a possessive 's is dropped;
- a quoted phrase: up to MAX_QUOTED_WORDS words between double quotes;
- bonus = ENTITY_BOOST per distinct entity found in the entry, at most ENTITY_CAP of them.

Measured on MADial-Bench (docs/search.md, "Levers kept").
All patterns run in linear time: no nested quantifiers, no backtracking between them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

ENTITY_BOOST = 0.05
ENTITY_CAP = 3
MAX_QUOTED_WORDS = 4
# A long query (a whole conversation) is bounded: its first names are kept.
MAX_QUERY_ENTITIES = 16

_OPENERS = '.!?"“('
_CANDIDATE = re.compile(r"(?:^|[.!?]\s+|[\"“(]\s*)?[A-Za-z][A-Za-z'-]*")
_NAME = re.compile(r"[A-Z][a-z][A-Za-z'-]*")
_QUOTED = re.compile(r"[\"“]([^\"”\n]{1,80})[\"”]")
_NOT_NAMES = frozenset({"I", "I'm", "I've", "I'll", "I'd"})


def query_entities(query: str) -> tuple[str, ...]:
    """The names and short quoted phrases of `query`, in order of first appearance, at
    most MAX_QUERY_ENTITIES."""
    found: dict[str, None] = {}
    for line in query.splitlines():
        for match in _CANDIDATE.finditer(line):
            word = match.group(0)
            opens_sentence = match.start() == 0 or word[0] in _OPENERS or word[0].isspace()
            # A possessive names the same entity: "Ada's" is matched as "Ada".
            bare = word.lstrip(_OPENERS + " \t").removesuffix("'s")
            if not opens_sentence and _NAME.fullmatch(bare) and bare not in _NOT_NAMES:
                found.setdefault(bare)
    for match in _QUOTED.finditer(query):
        words = match.group(1).split()
        if 0 < len(words) <= MAX_QUOTED_WORDS:
            found.setdefault(" ".join(words))
    return tuple(found)[:MAX_QUERY_ENTITIES]


def entity_patterns(entities: Sequence[str]) -> list[re.Pattern[str]]:
    """One case-sensitive pattern per entity (words separated by any space) that ends on
    a word boundary; it opens with the literal, so the regex engine's fast literal scan
    finds candidates (the start boundary is checked by `_starts_a_word`)."""
    return [
        re.compile(r"\s+".join(re.escape(word) for word in entity.split()) + r"(?!\w)") for entity in entities
    ]


def _starts_a_word(text: str, start: int) -> bool:
    return start == 0 or not (text[start - 1].isalnum() or text[start - 1] in "_'")


def entity_bonus(patterns: Sequence[re.Pattern[str]], text: str) -> float:
    """ENTITY_BOOST for each entity found in `text` as whole words, at most ENTITY_CAP."""
    found = 0
    for pattern in patterns:
        if any(_starts_a_word(text, match.start()) for match in pattern.finditer(text)):
            found += 1
            if found == ENTITY_CAP:
                break
    return ENTITY_BOOST * found
