"""The other sources of a search beside memories: facts and conversations (docs/search.md,
"Unified search"). Each answers hits scored on 0..1 so that they merge with memory
results into one ranked list:

- facts: the share of the query's words (its English lexemes) found in the fact's
  entity, key and value, or, when higher, the share of the trigrams of the fact's
  entity and key found in the query's (a fact named in other spellings: `on-call` for
  `oncall`); at least FACT_MIN_SCORE. Active facts only; `high` ones never for a reader
  that may not see them.
- conversations: a window of lines (search.conversation_index) scores
  (w_vec * cosine + w_kw * share of the query's words in the window) / (w_vec + w_kw)
  with the team's hybrid weights (one path: that path's value); the best window of
  each conversation is its hit, at least CONVERSATION_MIN_SCORE (0.35).

Both read the team of the caller's scope, with the team filter in every statement
besides; the statements are bounded (LIMIT) and run on the read connection."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from core.db_router import read_connection
from core.prepared_statements import prepared_cursor
from memories.facts.models import Sensitivity
from search.models import SEARCH_CONFIG
from search.retrieval.candidates import QueryVector
from teams.models import Team

FACT_MIN_SCORE = 0.5
# Above the cosine of unrelated texts under the local model (about 0.1 to 0.3).
CONVERSATION_MIN_SCORE = 0.35
# Candidate windows each path reads at most before the best per conversation is kept.
CONVERSATION_CANDIDATES = 100


@dataclass(frozen=True)
class FactHit:
    id: uuid.UUID
    entity: str
    key: str
    value: str
    scope: str
    sensitivity: str
    created_at: datetime
    score: float
    found_by: str


@dataclass(frozen=True)
class ConversationHit:
    conversation_id: uuid.UUID
    title: str
    session: str
    created_at: datetime
    first_line: int
    last_line: int
    text: str
    score: float
    found_by: str


# Any of the query's words (`lexemes`, an array in the statement) as one text query; NULL
# for a query without a word (punctuation only), which then matches no text: quoting an
# empty string instead made a malformed query that failed the whole search.
_ANY_WORD = (
    "CASE WHEN cardinality(lexemes) > 0 THEN to_tsquery('simple', "
    "array_to_string(ARRAY(SELECT quote_literal(l) FROM unnest(lexemes) AS l), ' | ')) END"
)


def fact_search_sql(*, may_see_high: bool) -> str:
    """The statement of search_facts, with parameters query, config, team, high, floor
    and limit."""
    high = "" if may_see_high else "AND f.sensitivity <> %(high)s"
    # The fact's words and its name's trigrams are stored columns (migration search.0008).
    return f"""
        WITH q AS (
            SELECT coalesce(array_agg(DISTINCT lexeme), '{{}}') AS lexemes,
                   search_team_trigrams(0, %(query)s::text) AS trigrams
            FROM unnest(to_tsvector(%(config)s::regconfig, %(query)s::text))
        ),
        qq AS MATERIALIZED (
            SELECT lexemes, {_ANY_WORD} AS any_word,
                -- Each word's query parsed once, not once per fact.
                ARRAY(SELECT plainto_tsquery('simple', l) FROM unnest(lexemes) AS l) AS word_queries
            FROM q
        ),
        query_trigrams AS MATERIALIZED (SELECT unnest(trigrams) AS trigram FROM q),
        scored AS MATERIALIZED (
            SELECT f.id, f.entity, f.key, f.value, f.scope, f.sensitivity, f.created_at,
                (SELECT count(*) FROM unnest(qq.word_queries) AS w WHERE f.search_document @@ w)::float
                  / greatest(cardinality(qq.lexemes), 1) AS words,
                named.shared::float / greatest(cardinality(f.name_trigrams), 1) AS names
            FROM memories_fact f CROSS JOIN qq
                -- The name's trigrams that the query holds, each looked up in one hash of
                -- the query's (a hashed subplan, built once per statement).
                CROSS JOIN LATERAL (
                    SELECT count(*) FILTER (WHERE held) AS shared,
                        -- Without a word's two opening trigrams ("  s", " se"), which most names share.
                        count(*) FILTER (WHERE held AND substr(t, 3, 1) <> ' ') AS inner_shared
                    FROM unnest(f.name_trigrams) AS t,
                        LATERAL (SELECT t IN (SELECT trigram FROM query_trigrams) AS held) AS lookup
                ) AS named
            WHERE f.team_id = %(team)s AND f.is_active {high}
              AND (f.search_document @@ qq.any_word OR named.inner_shared > 0)
        )
        SELECT id, entity, key, value, scope, sensitivity, created_at, words, names
        FROM scored
        WHERE greatest(words, names) >= %(floor)s
        ORDER BY greatest(words, names) DESC, created_at DESC, id
        LIMIT %(limit)s
    """  # noqa: S608 (the fragment is constant; values are parameters)


def search_facts(*, team: Team, query: str, may_see_high: bool, limit: int) -> list[FactHit]:
    """The team's active facts that match the query, best first (module docstring). The
    CTEs are MATERIALIZED: inlined, the query's parsed words and each fact's scores were
    computed again for every row and every use (14 ms at 500 facts). Each of a fact's
    name trigrams is looked up in a hash of the query's: compared element by element
    (`= ANY`, `&&`), a long query against 500 facts took 15 ms."""
    params: dict[str, Any] = {
        "query": query,
        "config": SEARCH_CONFIG,
        "team": team.id,
        "high": Sensitivity.HIGH,
        "floor": FACT_MIN_SCORE,
        "limit": limit,
    }
    # Prepared once hot: planning the CTEs took 0.7 ms, executing them 0.1 for a team
    # of few facts (core.prepared_statements).
    with prepared_cursor(read_connection()) as cursor:
        cursor.execute(fact_search_sql(may_see_high=may_see_high), params)
        rows = cursor.fetchall()
    hits = []
    for row in rows:
        words, names = float(row[7]), float(row[8])
        hits.append(
            FactHit(
                id=row[0],
                entity=row[1],
                key=row[2],
                value=row[3],
                scope=row[4],
                sensitivity=row[5],
                created_at=row[6],
                score=round(max(words, names), 6),
                found_by="keyword",
            )
        )
    return hits


def search_conversations(
    *, team: Team, query: str, embedding: QueryVector | None, mode: str, limit: int
) -> list[ConversationHit]:
    """The team's conversations whose lines match the query: the best window of each,
    best first (module docstring). Its statements are prepared once hot
    (core.prepared_statements): planning the keyword one took about 2 ms a search."""
    keyword = _keyword_windows(team.id, query) if mode != "vector" else {}
    vector = _vector_windows(team.id, embedding) if mode != "keyword" and embedding is not None else {}
    w_vec, w_kw = float(team.hybrid_vector_weight), float(team.hybrid_keyword_weight)
    if not vector:
        w_vec = 0.0
    if not keyword and mode == "vector":
        w_kw = 0.0
    total = w_vec + w_kw
    if total <= 0:
        return []
    scored: dict[int, tuple[float, str]] = {}
    for chunk_id in keyword.keys() | vector.keys():
        words, cosine = keyword.get(chunk_id, 0.0), vector.get(chunk_id, 0.0)
        score = (w_vec * max(cosine, 0.0) + w_kw * words) / total
        found = "+".join(name for name, value in (("keyword", words), ("vector", cosine)) if value > 0)
        if score >= CONVERSATION_MIN_SCORE:
            scored[chunk_id] = (score, found)
    if not scored:
        return []
    with prepared_cursor(read_connection()) as cursor:
        cursor.execute(
            """
            SELECT k.id, k.conversation_id, k.first_line, k.last_line, k.text,
                   c.title, c.session, c.created_at
            FROM search_conversationchunk k JOIN memories_conversation c ON c.id = k.conversation_id
            WHERE k.team_id = %s AND c.team_id = %s AND k.id = ANY(%s)
            """,
            [team.id, team.id, list(scored)],
        )
        rows = cursor.fetchall()
    best: dict[uuid.UUID, ConversationHit] = {}
    for chunk_id, conversation_id, first, last, text, title, session, created_at in rows:
        score, found = scored[chunk_id]
        held = best.get(conversation_id)
        if held is None or (score, -first) > (held.score, -held.first_line):
            best[conversation_id] = ConversationHit(
                conversation_id=conversation_id,
                title=title,
                session=session,
                created_at=created_at,
                first_line=first,
                last_line=last,
                text=text,
                score=round(score, 6),
                found_by=found,
            )
    ranked = sorted(best.values(), key=lambda hit: (-hit.score, -hit.created_at.timestamp(), hit.first_line))
    return ranked[:limit]


def _keyword_windows(team_id: int, query: str) -> dict[int, float]:
    """Window id -> the share of the query's words it holds, for windows holding any."""
    with prepared_cursor(read_connection()) as cursor:
        cursor.execute(
            f"""
            WITH q AS (
                SELECT coalesce(array_agg(DISTINCT lexeme), '{{}}') AS lexemes
                FROM unnest(to_tsvector(%(config)s::regconfig, %(query)s::text))
            ),
            qq AS MATERIALIZED (
                SELECT cardinality(lexemes) AS size,
                    ARRAY(SELECT plainto_tsquery('simple', l) FROM unnest(lexemes) AS l) AS word_queries,
                    {_ANY_WORD} AS any_word
                FROM q
            )
            SELECT k.id,
                (SELECT count(*) FROM unnest(qq.word_queries) AS w WHERE window_words.vector @@ w)::float
                  / greatest(qq.size, 1) AS words
            FROM search_conversationchunk k CROSS JOIN qq
                -- The window's words fetched from their TOAST table once, not once per word.
                CROSS JOIN LATERAL (SELECT k.search_vector || ''::tsvector AS vector OFFSET 0) AS window_words
            WHERE k.team_id = %(team)s AND window_words.vector @@ qq.any_word
            ORDER BY words DESC, k.id
            LIMIT %(limit)s
            """,  # noqa: S608 (the fragment is a constant; values are parameters)
            {"config": SEARCH_CONFIG, "query": query, "team": team_id, "limit": CONVERSATION_CANDIDATES},
        )
        return {row[0]: float(row[1]) for row in cursor.fetchall() if row[1] > 0}


def _vector_windows(team_id: int, embedding: QueryVector) -> dict[int, float]:
    """Window id -> cosine similarity with the query, the nearest windows embedded with
    the query's model (an exact scan of the team's windows)."""
    with prepared_cursor(read_connection()) as cursor:
        cursor.execute(
            """
            SELECT k.id, 1 - (k.embedding <=> %(vector)s::vector) AS cosine
            FROM search_conversationchunk k
            WHERE k.team_id = %(team)s AND k.model = %(model)s AND k.embedding IS NOT NULL
            ORDER BY k.embedding <=> %(vector)s::vector, k.id
            LIMIT %(limit)s
            """,
            {
                "vector": "[" + ",".join(repr(float(v)) for v in embedding.values) + "]",
                "team": team_id,
                "model": embedding.model,
                "limit": CONVERSATION_CANDIDATES,
            },
        )
        return {row[0]: float(row[1]) for row in cursor.fetchall()}
