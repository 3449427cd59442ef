"""Partial words and identifiers in the keyword path, by trigrams.

Full text matches whole (stemmed) words only: "grafan" finds nothing about Grafana,
and `deploy_fri` (the lexemes deploy and fri) does not find the key `deploy-friday`.
The query's words that the team's vocabulary does not hold (no chunk has the lexeme:
search.models.KeywordStat) go through trigrams, the way pg_trgm counts them (each word
lowercased, padded with two spaces before and one after, every three characters). The
embedded PostgreSQL ships no pg_trgm (docs/search.md), so the trigrams are plain SQL:
`search_team_trigrams(team, text)` and two GIN indexes (migration search.0006).

- Content: each such word is replaced by up to LEXEMES_PER_WORD lexemes of the team
  that hold at least MIN_COVERAGE of its trigrams, with a trigram similarity (shared /
  union) of at least MIN_SIMILARITY. They join the query's lexemes in BM25 with their
  idf times that similarity, so a near word weighs less than the word itself; the
  bounded candidate chunks are chosen as before.
- Keys: the team's keys holding a trigram of such a word (other than a word's two
  opening ones) are candidates; each scores the overlap of its trigrams with the whole query's,
  over the smaller of the two sets, and counts from MIN_KEY_OVERLAP. A key match ranks
  like the query's best BM25 match times that overlap.

The words known to the team cost nothing more: only unknown words are looked up, each
lookup reading at most MAX_CANDIDATES entries through its index. At most MAX_WORDS
words are, each only if it has a letter and at least MIN_WORD_CHARS
characters (a ticket number that is not in the team must not find its neighbours).
Both lookups run in SECURITY DEFINER functions that read the team of the caller's
scope only, as search_keyword_candidates does (the GIN operators are not LEAKPROOF).
"""

from __future__ import annotations

import uuid
from typing import Any

from core.db_router import read_connection
from core.prepared_statements import prepared_cursor

MAX_WORDS = 8
MIN_WORD_CHARS = 3
MIN_COVERAGE = 0.6
# pg_trgm's default (0.3) lets a 4-letter word stand in for a long one (week for weekend).
MIN_SIMILARITY = 0.5
LEXEMES_PER_WORD = 3
MIN_KEY_OVERLAP = 0.6
# Entries (lexemes of a word, or versions' keys) a lookup reads through its index at most.
MAX_CANDIDATES = 1000


def lookup_words(unknown: list[str]) -> list[str]:
    """The unknown lexemes worth a trigram lookup, at most MAX_WORDS."""
    words = [w for w in unknown if len(w) >= MIN_WORD_CHARS and any(ch.isalpha() for ch in w)]
    return words[:MAX_WORDS]


def similar_lexemes(words: list[str]) -> list[tuple[str, str, int, float]]:
    """(word, a lexeme of the team like it, the chunks holding that lexeme, similarity),
    best first for each word."""
    if not words:
        return []
    with prepared_cursor(read_connection()) as cursor:
        cursor.execute(
            "SELECT word, lexeme, chunks, similarity FROM search_similar_lexemes(%s, %s, %s, %s, %s)",
            [words, MIN_COVERAGE, MIN_SIMILARITY, LEXEMES_PER_WORD, MAX_CANDIDATES],
        )
        return [(row[0], row[1], int(row[2]), float(row[3])) for row in cursor.fetchall()]


def key_matches(
    query: str, words: list[str], where: str, params: list[Any], *, limit: int
) -> list[tuple[uuid.UUID, float]]:
    """(memory id, overlap of its key with the query) for the versions passing the
    filters (`where` over `m`, with its `params`) whose key is like the query, found
    through `words`; best first, at most `limit` rows."""
    if not words:
        return []
    with prepared_cursor(read_connection()) as cursor:
        cursor.execute(
            f"""
            SELECT m.id, k.overlap FROM search_similar_keys(%s, %s, %s, %s, %s) AS k
            JOIN memories_memory m ON m.key = k.key
            WHERE {where}
            ORDER BY k.overlap DESC, m.is_active DESC, m.id LIMIT %s
            """,  # noqa: S608 (the filters' fragment is constant; values are parameters)
            [words, query, MIN_KEY_OVERLAP, limit, MAX_CANDIDATES, *params, limit],
        )
        return [(row[0], float(row[1])) for row in cursor.fetchall()]
