"""Step 1, candidate generation: the memories a query could be about, with the raw
score of each path.

- Keyword path: PostgreSQL full-text over chunk tsvectors, BM25 with the team's own
  statistics (search.models.KeywordStat); the query's words the team does not hold are
  matched by trigrams to its keys, and to its lexemes when nothing matches word for
  word (search.retrieval.trigrams). The query's lexemes are OR-ed (an agent's
  query is a sentence, not a boolean formula), but only the rarest of them, up to
  KEYWORD_CANDIDATE_CHUNKS summed document frequency, choose the candidate chunks
  (through the GIN index, at most that many): those are scored exactly over all the
  query's lexemes, best chunk per memory, top `limit`. A query of common words alone
  thus reads a bounded sample of their chunks, which weigh little in BM25 anyway.
- Vector path: cosine similarity (1 - cosine distance, floored at 0) between the query
  vector and the chunk vectors of its model, best chunk per memory, top `limit`. Teams
  with few vectors are scanned exactly; larger ones go through the model's HNSW index
  with pgvector's iterative scan, so filters applied after the index (team, type,
  project, state) cannot silently return fewer than `limit` rows.
- In hybrid mode every candidate of either path then gets the other path's score too
  (exactly, by memory id): one path's top list says nothing about how a memory found
  only by the other path scores on this one.

Reads only, inside the caller's transaction and team scope.
"""

from __future__ import annotations

import json
import math
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from cachetools import TTLCache

from core.db_router import read_connection
from core.metric_definitions import timed
from core.prepared_statements import prepared_cursor
from memories.personal import personal_owner_name
from search.models import SEARCH_CONFIG
from search.retrieval import trigrams

SearchMode = Literal["hybrid", "keyword", "vector"]

# Below this many vectors a team is scanned exactly: exact is fast at that size, and
# an approximate scan filtered down to a small team could come back short.
EXACT_SCAN_BELOW = 10_000
MAX_QUERY_LEXEMES = 256
# The keyword path scores at most this many chunks per query (search.retrieval docstring).
KEYWORD_CANDIDATE_CHUNKS = 1000
# BM25's term-frequency saturation and length normalisation.
BM25_K1 = 1.2
BM25_B = 0.75

# (memory id, score of the path, id of the memory's best chunk on that path)
Match = tuple[uuid.UUID, float, int]


@dataclass(frozen=True)
class QueryVector:
    """A query's embedding and its vector space: only vectors of `model` are compared."""

    values: list[float]
    model: str
    dimensions: int

    @cached_property
    def literal(self) -> str:
        """The text form PostgreSQL casts to a vector (a search's scans share it)."""
        return "[" + ",".join(repr(float(x)) for x in self.values) + "]"


# A query's vector, or a call that waits for it and answers it (None: there is none).
# search.run_search embeds the query on a thread of its own, so the keyword path reads
# while the model runs and the vector path waits only for what is left of it.
VectorOrWait = QueryVector | Callable[[], QueryVector | None] | None


@dataclass
class SearchFilters:
    team_id: int
    types: list[str] | None
    project: str | None
    include_superseded: bool
    metadata: dict[str, list[str]] | None = None
    # Entries about any one of these topics (metadata.topics, normalised).
    topics: list[str] | None = None
    # Archived entries (memories.writes.archive_memory) are found only when asked.
    include_archived: bool = False
    # Only entries of the same owner as this key (team keys: the team's; a personal key:
    # its owner's): what compares entries with each other (duplicates, contradictions)
    # never links a personal entry with another owner's, which the team would then see.
    same_owner_as: str | None = None

    def sql(self) -> tuple[str, list[Any]]:
        # A deleted key takes its earlier versions out of search with it.
        clauses = [
            "m.team_id = %s",
            "m.deleted_at IS NULL",
            "NOT EXISTS (SELECT 1 FROM memories_memory d WHERE d.team_id = m.team_id AND d.key = m.key"
            " AND d.deleted_at IS NOT NULL AND d.created_at >= m.created_at)",
        ]
        params: list[Any] = [self.team_id]
        if not self.include_superseded:
            clauses.append("m.is_active")
        if not self.include_archived:
            clauses.append("m.archived_at IS NULL")
        if self.types:
            clauses.append("m.type = ANY(%s)")
            params.append(list(self.types))
        if self.project is not None:
            clauses.append("m.project = %s")
            params.append(self.project)
        if self.same_owner_as is not None:
            owner = personal_owner_name(self.same_owner_as)
            if owner is None:
                clauses.append("m.owner_id IS NULL")
            else:
                clauses.append("m.owner_id IS NOT NULL AND split_part(substr(m.key, 2), ':', 1) = %s")
                params.append(owner)
        if self.metadata:
            clauses.append("m.metadata @> %s::jsonb")
            params.append(json.dumps(self.metadata))
        if self.topics:
            clauses.append("jsonb_exists_any(m.metadata -> 'topics', %s::text[])")
            params.append(list(self.topics))
        return " AND ".join(clauses), params


@dataclass
class Candidate:
    memory_id: uuid.UUID
    keyword_rank: float = 0.0
    keyword_chunk: int | None = None
    similarity: float | None = None
    vector_chunk: int | None = None
    found_by: set[str] = field(default_factory=set)


def gather_candidates(
    *,
    query: str,
    vector: VectorOrWait,
    filters: SearchFilters,
    mode: SearchMode,
    limit: int,
    timings: dict[str, float] | None = None,
) -> dict[uuid.UUID, Candidate]:
    """The top `limit` of each path that `mode` runs (the vector path only with a
    vector), by memory id, in the order found: keyword first, then vector; a `vector`
    still being computed is waited for only once the keyword path has read. Each path's
    time is added to `timings` (keyword, vector; the hybrid cross-scoring as merge)."""
    timings = {} if timings is None else timings
    candidates: dict[uuid.UUID, Candidate] = {}
    plan: KeywordPlan | None = None
    if mode in ("hybrid", "keyword"):
        with timed(timings, "keyword"):
            # The query's lexemes and their statistics, read once for both keyword reads.
            stats = read_keyword_stats(query, filters.team_id)
            plan = stats.plan()
            matches = keyword_plan_matches(plan, filters, limit=limit, memory_ids=None) if plan else []
            if not matches and stats.unknown:
                # Nothing matches word for word: the team's words like the unknown ones.
                plan = stats.plan(similar=trigrams.similar_lexemes(stats.unknown))
                matches = keyword_plan_matches(plan, filters, limit=limit, memory_ids=None) if plan else []
            for memory_id, rank, chunk_id in matches:
                c = candidates.setdefault(memory_id, Candidate(memory_id))
                c.keyword_rank, c.keyword_chunk = rank, chunk_id
                c.found_by.add("keyword")
            # Keys like the query's unknown words, ranked as the best match times the overlap.
            where, params = filters.sql()
            best = max((rank for _, rank, _ in matches), default=0.0) or 1.0
            for memory_id, overlap in trigrams.key_matches(query, stats.unknown, where, params, limit=limit):
                c = candidates.setdefault(memory_id, Candidate(memory_id))
                c.keyword_rank = max(c.keyword_rank, best * overlap)
                c.found_by.add("keyword")
    if callable(vector):
        vector = vector()
    if vector is not None:
        with timed(timings, "vector"):
            for memory_id, similarity, chunk_id in vector_matches(vector, filters, limit=limit):
                c = candidates.setdefault(memory_id, Candidate(memory_id))
                c.similarity, c.vector_chunk = similarity, chunk_id
                c.found_by.add("vector")
    if mode == "hybrid" and vector is not None:
        with timed(timings, "merge"):
            complete_scores(candidates, plan, vector, filters)
    return candidates


def complete_scores(
    candidates: dict[uuid.UUID, Candidate],
    plan: KeywordPlan | None,
    vector: QueryVector,
    filters: SearchFilters,
) -> None:
    """Give every candidate both scores, reading only the scores it is missing (no
    keyword score without a `plan`: no lexeme of the query is in the team)."""
    no_keyword = [c.memory_id for c in candidates.values() if "keyword" not in c.found_by]
    if no_keyword and plan is not None:
        for memory_id, rank, chunk_id in keyword_plan_matches(
            plan, filters, limit=None, memory_ids=no_keyword
        ):
            candidates[memory_id].keyword_rank, candidates[memory_id].keyword_chunk = rank, chunk_id
    no_vector = [c.memory_id for c in candidates.values() if "vector" not in c.found_by]
    if no_vector:
        for memory_id, similarity, chunk_id in vector_matches(
            vector, filters, limit=len(no_vector), memory_ids=no_vector
        ):
            candidates[memory_id].similarity, candidates[memory_id].vector_chunk = similarity, chunk_id


def _where(filters: SearchFilters, memory_ids: list[uuid.UUID] | None) -> tuple[str, list[Any]]:
    """The filters' WHERE clause over `m` (the memory) and `c` (the chunk), narrowed to
    `memory_ids` when given."""
    where, params = filters.sql()
    if memory_ids is None:
        return where, params
    return f"{where} AND c.memory_id = ANY(%s)", [*params, memory_ids]


@dataclass(frozen=True)
class KeywordPlan:
    """A query's lexemes that occur in the team, with their BM25 idf, and the rarest of
    them (`picked`), whose chunks are the keyword path's candidates."""

    lexemes: list[str]
    idf: list[float]
    picked: list[str]
    avg_length: float


def plan_keyword_query(query: str, team_id: int, *, bound: int | None = None) -> KeywordPlan | None:
    """The query's keyword plan (KeywordStats.plan); None when no lexeme of the query
    occurs in the team."""
    return read_keyword_stats(query, team_id).plan(bound=bound)


@dataclass(frozen=True)
class KeywordStats:
    """What the team's statistics say about a query's lexemes: the document frequency
    of those it holds, its chunk count and summed length, and the lexemes it does not
    hold that are worth a trigram lookup (search.retrieval.trigrams)."""

    df: dict[str, int]
    chunks: int
    length: int
    unknown: list[str]

    def plan(
        self,
        *,
        bound: int | None = None,
        similar: Sequence[tuple[str, str, int, float]] = (),
    ) -> KeywordPlan | None:
        """The plan over the known lexemes and the `similar` ones (trigrams.similar_lexemes:
        their idf times their similarity), idf = ln(1 + (N - df + 0.5) / (df + 0.5));
        picked: the rarest first, as long as their summed document frequency stays
        within `bound` (always at least one). None when there is no lexeme."""
        bound = KEYWORD_CANDIDATE_CHUNKS if bound is None else bound
        weight = {lexeme: (df, 1.0) for lexeme, df in self.df.items()}
        for _word, lexeme, df, similarity in similar:
            if similarity > weight.get(lexeme, (0, 0.0))[1]:
                weight[lexeme] = (df, similarity)
        if not weight or not self.chunks:
            return None
        found = sorted((df, lexeme) for lexeme, (df, _) in weight.items())
        picked: list[str] = []
        summed = 0
        for df, lexeme in found:
            if picked and summed + df > bound:
                break
            picked.append(lexeme)
            summed += df
        return KeywordPlan(
            lexemes=[lexeme for _, lexeme in found],
            idf=[bm25_idf(chunks=self.chunks, df=df) * weight[lexeme][1] for df, lexeme in found],
            picked=picked,
            avg_length=max(float(self.length) / self.chunks, 1.0),
        )


def read_keyword_stats(query: str, team_id: int) -> KeywordStats:
    """The team's statistics (search.models.KeywordStat) of the query's lexemes, in one
    read; `chunks` is 0 when the team has none."""
    with prepared_cursor(read_connection()) as cursor:
        # The query's own lexemes come back too (chunks NULL): those not found are unknown.
        cursor.execute(
            f"""
            SELECT lexeme, chunks, length FROM search_keywordstat
            WHERE team_id = %s AND chunks > 0 AND lexeme = ANY(ARRAY(
                SELECT lexeme FROM unnest(to_tsvector('{SEARCH_CONFIG}', %s)) LIMIT {MAX_QUERY_LEXEMES}
            ) || ''::text)
            UNION ALL
            (SELECT lexeme, NULL, NULL FROM unnest(to_tsvector('{SEARCH_CONFIG}', %s))
             LIMIT {MAX_QUERY_LEXEMES})
            """,  # noqa: S608 (constants only; one array, so the (team, lexeme) index finds each row)
            [team_id, query, query],
        )
        rows = cursor.fetchall()
    df = {lexeme: int(chunks) for lexeme, chunks, _ in rows if chunks is not None and lexeme != ""}
    totals = [
        (int(chunks), int(length)) for lexeme, chunks, length in rows if chunks is not None and lexeme == ""
    ]
    chunks, length = totals[0] if totals else (0, 0)
    unknown = [lexeme for lexeme, chunks, _ in rows if chunks is None and lexeme not in df]
    return KeywordStats(
        df=df, chunks=max(chunks, 1) if totals else 0, length=length, unknown=trigrams.lookup_words(unknown)
    )


def bm25_idf(*, chunks: int, df: int) -> float:
    """A lexeme's BM25 idf in a team of `chunks` chunks, `df` of which hold it."""
    return math.log(1 + (max(chunks, df) - df + 0.5) / (df + 0.5))


def _or_query(lexemes: list[str]) -> str:
    """A tsquery OR-ing `lexemes`, each quoted as a literal (already normalised)."""
    return " | ".join("'" + lex.replace("\\", "\\\\").replace("'", "''") + "'" for lex in lexemes)


# A lexeme's frequency in a chunk, from the stored tsvector's positions (a lexeme
# without positions counts once). A chunk's length is its number of distinct lexemes
# (`length(tsvector)`, as in KeywordStat): read without unnesting the chunk twice.
LEXEME_OCCURRENCES = "coalesce(array_length(u.positions, 1), 1)::float8"
# A candidate chunk's vector cut down to the query's lexemes before it is unnested:
# setweight marks theirs (a stored vector's positions all weigh D, to_tsvector's
# default) and ts_filter keeps only those, both in C over the vector, so a chunk of 200
# distinct lexemes becomes the one or two rows the score needs, not 200 (BM25 over 652
# candidates at 1k memories: 18 ms instead of 46, the same ranks).
QUERY_LEXEMES_OF_CANDIDATE = (
    "ts_filter(setweight(candidate.search_vector, 'A', (SELECT array_agg(lexeme) FROM q)), '{a}')"
)


def keyword_sql(
    plan: KeywordPlan,
    filters: SearchFilters,
    *,
    limit: int | None,
    memory_ids: list[uuid.UUID] | None = None,
    bound: int | None = None,
) -> tuple[str, list[Any]]:
    """The keyword path's SQL and parameters: the candidate chunks (those holding a
    picked lexeme, through the GIN index, at most `bound`; or every chunk of
    `memory_ids` holding any query lexeme), each scored exactly with BM25 over all the
    query's lexemes; best chunk per memory, best first, at most `limit`."""
    bound = KEYWORD_CANDIDATE_CHUNKS if bound is None else bound
    where, params = _where(filters, memory_ids)
    # The bounded set through the GIN index (search_keyword_candidates, migrations
    # search.0005 and 0011: under row-level security the application role's own query
    # could not use that index; the function hands over the rows it read, the scope's team
    # only); the chunks of `memory_ids` through the team index.
    lexemes = plan.picked if memory_ids is None else plan.lexemes
    if memory_ids is None:
        chunks, match = "search_keyword_candidates(%s::tsquery, %s) AS c(id, memory_id, search_vector)", ""
        chunk_args: list[Any] = [_or_query(lexemes), bound]
    else:
        chunks, match = "search_chunk c", "c.search_vector @@ %s::tsquery AND c.team_id = %s AND"
        chunk_args = [_or_query(lexemes), filters.team_id]
    sql = f"""
        WITH q(lexeme, idf) AS (SELECT * FROM unnest(%s::text[], %s::float8[])),
        candidate AS MATERIALIZED (
            SELECT c.id, c.memory_id, c.search_vector
            FROM {chunks} JOIN memories_memory m ON m.id = c.memory_id
            WHERE {match} {where}
        ),
        scored AS (
            SELECT candidate.id, candidate.memory_id, (
                SELECT coalesce(sum(q.idf * t.tf * ({BM25_K1} + 1)
                    / (t.tf + {BM25_K1} * (1 - {BM25_B} + {BM25_B} * d.length / %s))), 0)
                FROM (
                    SELECT u.lexeme, {LEXEME_OCCURRENCES} AS tf FROM unnest({QUERY_LEXEMES_OF_CANDIDATE}) u
                ) t
                JOIN q ON q.lexeme = t.lexeme
            ) AS rank
            FROM candidate, LATERAL (SELECT length(candidate.search_vector)::float8 AS length) d
        ),
        best AS (
            SELECT DISTINCT ON (memory_id) memory_id, rank, id FROM scored ORDER BY memory_id, rank DESC, id
        )
        SELECT memory_id, rank, id FROM best ORDER BY rank DESC, memory_id
        {"LIMIT %s" if limit is not None else ""}
    """  # noqa: S608 (fragments are constants; values are parameters)
    args: list[Any] = [plan.lexemes, plan.idf, *chunk_args, *params, plan.avg_length]
    if limit is not None:
        args.append(limit)
    return sql, args


def keyword_matches(
    query: str,
    filters: SearchFilters,
    *,
    limit: int | None,
    memory_ids: list[uuid.UUID] | None = None,
) -> list[Match]:
    """Best chunk per memory by BM25, best first (ties by memory id); all of
    `memory_ids` that match when given, else the top `limit` of the bounded candidates."""
    plan = plan_keyword_query(query, filters.team_id)
    if plan is None:
        return []
    return keyword_plan_matches(plan, filters, limit=limit, memory_ids=memory_ids)


def keyword_plan_matches(
    plan: KeywordPlan, filters: SearchFilters, *, limit: int | None, memory_ids: list[uuid.UUID] | None
) -> list[Match]:
    sql, args = keyword_sql(plan, filters, limit=limit, memory_ids=memory_ids)
    with prepared_cursor(read_connection()) as cursor:
        cursor.execute(sql, args)
        return [(row[0], float(row[1]), row[2]) for row in cursor.fetchall()]


def vector_matches(
    vector: QueryVector, filters: SearchFilters, *, limit: int, memory_ids: list[uuid.UUID] | None = None
) -> list[Match]:
    """Best chunk per memory by cosine similarity, best first (ties by memory id), at
    most `limit`. Exact over the team's rows when the team is small or `memory_ids`
    names the memories; through the HNSW index otherwise."""
    if memory_ids is not None:
        found = _named_scan(vector, filters, limit=limit, memory_ids=memory_ids)
    else:
        found = _team_scan(vector, filters, limit=limit)
    rows = [(row[0], max(0.0, 1.0 - float(row[1])), row[2]) for row in found]
    rows.sort(key=lambda row: (-row[1], str(row[0])))
    return rows[:limit]


def _team_scan(vector: QueryVector, filters: SearchFilters, *, limit: int) -> list[tuple[Any, ...]]:
    with read_connection().cursor() as cursor:
        if not scanned_through_index(cursor, filters.team_id, vector.model):
            return _exact_scan(vector, filters, limit=limit)
        _index_scan(cursor, vector, filters, limit=limit)
        return list(cursor.fetchall())


# Nested loops off for the statements between the two, transaction-locally, and then
# back to what the transaction had (RESET would put back the session's default).
NESTED_LOOPS_OFF = (
    "SELECT set_config('memoryhub.enable_nestloop', current_setting('enable_nestloop'), true),"
    " set_config('enable_nestloop', 'off', true)"
)
NESTED_LOOPS_BACK = "SELECT set_config('enable_nestloop', current_setting('memoryhub.enable_nestloop'), true)"


def _exact_scan(vector: QueryVector, filters: SearchFilters, *, limit: int) -> list[tuple[Any, ...]]:
    where, params = filters.sql()
    connection = read_connection()
    # Hash joins only, for this statement. Row-level security turns the team condition
    # into `team_id = <team>` on every joined table; for a team that grew since the last
    # ANALYZE the planner believes the team has a row or two and joins each vector to
    # the team's chunks through the team index, filtering: quadratic in the team's size
    # (docs/search.md, "Vector path"). The whole team is read anyway, at
    # most EXACT_SCAN_BELOW vectors, so hashing is linear whatever the statistics say.
    # Transaction-local, and put back as it was right after; a failed statement rolls it
    # back with the transaction. The setting, the scan and the putting back go in one
    # round trip (psycopg's pipeline), and the scan is prepared like the other hot
    # statements: it always runs with nested loops off, so its plan is made under them.
    # No cast to vector(n): this expression does not match the HNSW index, so the
    # planner scans the team's rows exactly.
    with (
        prepared_cursor(connection) as setting,
        prepared_cursor(connection) as scan,
        prepared_cursor(connection) as restoring,
        connection.connection.pipeline(),
    ):
        setting.execute(NESTED_LOOPS_OFF)
        scan.execute(
            f"""
                SELECT memory_id, distance, chunk_id FROM (
                    SELECT DISTINCT ON (c.memory_id) c.memory_id, e.embedding <=> %s::vector AS distance,
                           c.id AS chunk_id
                    FROM search_chunkembedding e
                    JOIN search_chunk c ON c.id = e.chunk_id
                    JOIN memories_memory m ON m.id = c.memory_id
                    WHERE e.team_id = %s AND e.model = %s AND {where}
                    ORDER BY c.memory_id, distance
                ) best ORDER BY distance, memory_id LIMIT %s
            """,  # noqa: S608
            [vector.literal, filters.team_id, vector.model, *params, limit],
        )
        restoring.execute(NESTED_LOOPS_BACK)
        return list(scan.fetchall())


def _named_scan(
    vector: QueryVector, filters: SearchFilters, *, limit: int, memory_ids: list[uuid.UUID]
) -> list[tuple[Any, ...]]:
    """The exact scan of named memories (the hybrid completion): each table read on its
    own (MATERIALIZED), by the names, and only then joined. As one join, a planner whose
    statistics predate the team's growth believed the team held a row or two and paired
    the team's vectors with its memories before filtering by name, quadratic in the team's
    size (docs/search.md, "Vector path"). Here no step reads the team's rows
    more than once, whatever the statistics say; with current statistics each table is
    read through its index, by the names (tests/search/test_vector_plans.py)."""
    where, params = filters.sql()
    with prepared_cursor(read_connection()) as cursor:
        cursor.execute(
            f"""
                WITH named AS MATERIALIZED (
                    SELECT id, memory_id FROM search_chunk WHERE team_id = %s AND memory_id = ANY(%s)
                ), kept AS MATERIALIZED (
                    SELECT m.id FROM memories_memory m WHERE m.id = ANY(%s) AND {where}
                ), scored AS MATERIALIZED (
                    SELECT e.chunk_id, e.embedding <=> %s::vector AS distance FROM search_chunkembedding e
                    WHERE e.team_id = %s AND e.model = %s AND e.chunk_id = ANY(ARRAY(SELECT id FROM named))
                )
                SELECT memory_id, distance, chunk_id FROM (
                    SELECT DISTINCT ON (c.memory_id) c.memory_id, s.distance, c.id AS chunk_id
                    FROM scored s JOIN named c ON c.id = s.chunk_id JOIN kept k ON k.id = c.memory_id
                    ORDER BY c.memory_id, s.distance
                ) best ORDER BY distance, memory_id LIMIT %s
            """,  # noqa: S608
            [
                filters.team_id,
                memory_ids,
                memory_ids,
                *params,
                vector.literal,
                filters.team_id,
                vector.model,
                limit,
            ],
        )
        return list(cursor.fetchall())


def _index_scan(cursor: Any, vector: QueryVector, filters: SearchFilters, *, limit: int) -> None:
    where, params = filters.sql()
    dims = int(vector.dimensions)
    literal = vector.literal
    # The index hands out rows in distance order and the filters drop some; the
    # iterative scan goes on reading the index until enough rows pass them.
    cursor.execute(
        "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true),"
        " set_config('hnsw.ef_search', %s, true)",
        [str(min(1000, max(100, limit * 4)))],
    )
    # Several chunks of one memory may come back; fetch extra and keep the best.
    sql = f"""
                WITH nearest AS MATERIALIZED (
                    SELECT c.memory_id, e.embedding::vector({dims}) <=> %s::vector({dims}) AS distance,
                           c.id AS chunk_id
                    FROM search_chunkembedding e
                    JOIN search_chunk c ON c.id = e.chunk_id
                    JOIN memories_memory m ON m.id = c.memory_id
                    WHERE e.model = %s AND e.team_id = %s AND {where}
                    ORDER BY e.embedding::vector({dims}) <=> %s::vector({dims})
                    LIMIT %s
                )
                SELECT DISTINCT ON (memory_id) memory_id, distance, chunk_id FROM nearest
                ORDER BY memory_id, distance
            """  # noqa: S608
    cursor.execute(sql, [literal, vector.model, filters.team_id, *params, literal, limit * 2])


# Whether a team's vectors of a model are scanned through the HNSW index, by (team, model,
# the line), kept a minute per process: counting up to EXACT_SCAN_BELOW is a statement of
# its own on every search (a scan of up to that many index entries). Either way the answer
# is right; a team that just crossed the line is scanned the old way for up to a minute.
_SCAN_CHOICES: TTLCache[tuple[int, str, int], bool] = TTLCache(maxsize=4096, ttl=60)
_SCAN_CHOICES_LOCK = threading.Lock()


def scanned_through_index(cursor: Any, team_id: int, model: str) -> bool:
    """Whether the team's vectors of `model` are searched through the HNSW index
    (EXACT_SCAN_BELOW of them or more) rather than scanned exactly: counted once a minute
    per process (the search and the batch's near checks ask the same)."""
    key = (team_id, model, EXACT_SCAN_BELOW)
    with _SCAN_CHOICES_LOCK:
        known = _SCAN_CHOICES.get(key)
    if known is not None:
        return known
    through_index = _vector_count(cursor, team_id, model) >= EXACT_SCAN_BELOW
    with _SCAN_CHOICES_LOCK:
        _SCAN_CHOICES[key] = through_index
    return through_index


def _vector_count(cursor: Any, team_id: int, model: str) -> int:
    """The team's vectors of `model`, counted up to EXACT_SCAN_BELOW (enough to choose)."""
    cursor.execute(
        "SELECT count(*) FROM"
        " (SELECT 1 FROM search_chunkembedding WHERE team_id = %s AND model = %s LIMIT %s) AS capped",
        [team_id, model, EXACT_SCAN_BELOW],
    )
    return cursor.fetchone()[0]
