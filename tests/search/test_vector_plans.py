"""The vector path's plans and results on a corpus big enough for PostgreSQL's own choices.

One corpus for the module, committed and analysed as autovacuum would have it: a large
team of 10,800 vectors (EXACT_SCAN_BELOW is 10,000), another of 4,800 and a small one of
360, all in the model's one HNSW index; every fifth memory has two chunks, and some are
superseded, deleted (with an older version of the key) or archived. Vectors are clustered (64 fixed centres plus noise from a fixed
seed), so nearest neighbours mean something, as with real embeddings.

Plans are read with EXPLAIN (ANALYZE, BUFFERS) of the statement the selector really ran
(captured), after the same set_config prelude, inside the team's scope: row-level
security applies as it does for the service.
"""

from __future__ import annotations

import math
import random
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memories.models import Memory
from search.models import Chunk, KeywordStat
from search.retrieval import candidates
from search.retrieval.candidates import Candidate, QueryVector, SearchFilters
from search.vector_index import drop_index_sql, ensure_index, index_name
from teams.models import Team
from teams.roles import as_owner
from teams.scope import dangerously_bypass_team_scope, team_scope
from tests.factories import TeamFactory
from tests.search.plans import buffers, explain, rows_read, scans_of

# A model of its own, with the default model's dimensions: its index is built once the
# corpus is in (see `corpus`) and dropped with it.
MODEL = "test-vector-plans-384"
DIMENSIONS = 384
CENTRES = 64
SPREAD = 1.2  # noise per dimension around a centre (centre components are in [-1, 1])
SEED = 0.42
EMBEDDINGS = "search_chunkembedding"


def centre(k: int) -> list[float]:
    """Cluster centre `k`, the same formula as the seeding SQL's."""
    return [math.sin(k * 7.31 + d * 1.7) for d in range(1, DIMENSIONS + 1)]


@dataclass(frozen=True)
class Corpus:
    large: Team
    other: Team
    small: Team
    vectors: dict[int, int]  # team id -> its vectors


SEED_TEAM_SQL = """
    WITH rows AS (
        INSERT INTO memories_memory (id, team_id, key, content, type, project, metadata, is_active,
            deleted_by, supersede_reason, supersede_kind, updated_by, content_hash, index_state,
            access_count, upvotes, downvotes, created_at, updated_at, deleted_at, archived_at)
        SELECT gen_random_uuid(), %(team)s,
            -- 8 of every 50: an older version of the key the row before deletes
            'k-' || CASE WHEN n %% 50 = 8 THEN n - 1 ELSE n END,
            'note number ' || n,
            (ARRAY['identity', 'lesson', 'decision', 'context', 'reference', 'historical'])[1 + (n * 7) %% 6],
            (ARRAY['', 'alpha', 'beta'])[1 + (n / 6) %% 3],  -- independent of the type
            '{}',
            n %% 10 <> 3 AND n %% 50 NOT IN (7, 8, 9),  -- superseded, deleted, archived
            '', '', '', 'seed', md5(%(team)s || '-' || n), 'indexed', 0, 0, 0,
            now() - make_interval(secs => CASE WHEN n %% 50 = 8 THEN 60 ELSE 0 END), now(),
            CASE WHEN n %% 50 = 7 THEN now() END,
            CASE WHEN n %% 50 = 9 THEN now() END
        FROM generate_series(1, %(memories)s) AS n
        RETURNING id, content, (substring(content FROM 13))::int AS n
    ), chunks AS (
        -- one chunk per memory, two for every fifth
        INSERT INTO search_chunk (team_id, memory_id, chunk_index, text, token_count, content_hash, created_at)
        SELECT %(team)s, rows.id, i, rows.content || ' part ' || i, 4, md5(rows.content || i), now()
        FROM rows, generate_series(0, CASE WHEN rows.n %% 5 = 0 THEN 1 ELSE 0 END) AS i
        ORDER BY rows.n, i
        RETURNING id, memory_id, chunk_index
    )
    INSERT INTO search_chunkembedding (team_id, chunk_id, model, embedding)
    SELECT %(team)s, chunks.id, %(model)s, (
        SELECT array_agg(sin(((rows.n * 13 + chunks.chunk_index) %% %(centres)s) * 7.31 + d * 1.7)
                         + (random() - 0.5) * %(spread)s ORDER BY d)::vector
        FROM generate_series(1, %(dims)s) AS d WHERE chunks.id > 0
    )
    FROM chunks JOIN rows ON rows.id = chunks.memory_id
    ORDER BY chunks.id
"""


def seed_team(team: Team, memories: int) -> int:
    with dangerously_bypass_team_scope(reason="test data"), connection.cursor() as cursor:
        cursor.execute(
            SEED_TEAM_SQL,
            {
                "team": team.id,
                "memories": memories,
                "model": MODEL,
                "centres": CENTRES,
                "spread": SPREAD,
                "dims": DIMENSIONS,
            },
        )
        cursor.execute("SELECT count(*) FROM search_chunkembedding WHERE team_id = %s", [team.id])
        return int(cursor.fetchone()[0])


@pytest.fixture(scope="module")
def corpus(django_db_setup: None, django_db_blocker: Any) -> Iterator[Corpus]:
    # The test database exists only when a test of the session asks for `db`; ours do.
    assert connection.settings_dict["NAME"].startswith("test_")
    with django_db_blocker.unblock():
        large, other, small = TeamFactory(), TeamFactory(), TeamFactory()
        try:
            with dangerously_bypass_team_scope(reason="test data"), connection.cursor() as cursor:
                cursor.execute("SELECT setseed(%s)", [SEED])
            vectors = {
                large.id: seed_team(large, 9_000),
                other.id: seed_team(other, 4_000),
                small.id: seed_team(small, 300),
            }
            # The model's index built over the seeded rows, as `reindex --model` builds it:
            # several times faster than inserting them into an existing index.
            with dangerously_bypass_team_scope(reason="test data"):
                ensure_index(MODEL, DIMENSIONS)
            with as_owner(connection), connection.cursor() as cursor:
                cursor.execute("ANALYZE memories_memory, search_chunk, search_chunkembedding")
            yield Corpus(large, other, small, vectors)
        finally:
            # Emptied as transactional tests' flush empties them, as the owner (a DELETE of
            # the chunks would spend seconds on the keyword statistics' trigger).
            with as_owner(connection), connection.cursor() as cursor:
                cursor.execute(f"TRUNCATE {EMBEDDINGS}, search_chunk, memories_memory CASCADE")
            teams = [large.id, other.id, small.id]
            with dangerously_bypass_team_scope(reason="test data"):
                KeywordStat.objects.filter(team_id__in=teams).delete()
                Team.objects.filter(id__in=teams).delete()
            with as_owner(connection), connection.cursor() as cursor:
                cursor.execute(drop_index_sql(MODEL))


def query_vectors() -> list[list[float]]:
    """Ten queries: eight near cluster centres, two in random directions."""
    rng = random.Random(7)
    near = [[x + (rng.random() - 0.5) * SPREAD for x in centre(k)] for k in (0, 5, 11, 23, 37, 50, 61, 63)]
    return near + [[rng.uniform(-1, 1) for _ in range(DIMENSIONS)] for _ in range(2)]


QUERIES = query_vectors()


def as_query(values: list[float]) -> QueryVector:
    return QueryVector(values=values, model=MODEL, dimensions=DIMENSIONS)


def filters_of(team: Team, **options: Any) -> SearchFilters:
    return SearchFilters(
        team_id=team.id,
        types=options.get("types"),
        project=options.get("project"),
        include_superseded=options.get("include_superseded", False),
    )


def captured(run: Callable[[], Any]) -> tuple[Any, list[str]]:
    """What `run` returns and the statements it sent, parameters in place (one sent
    with its setting and reset, as the exact scan sends it, counts as each of them)."""
    with CaptureQueriesContext(connection) as queries:
        result = run()
    sent = [part.strip() for q in queries.captured_queries for part in q["sql"].split(";")]
    return result, [statement for statement in sent if statement]


def vector_statement_plan(statements: list[str]) -> list[dict[str, Any]]:
    """EXPLAIN (ANALYZE, BUFFERS) of the captured vector statement, after replaying the
    settings the selector set before it (hnsw.iterative_scan, hnsw.ef_search)."""
    main = [s for s in statements if f"FROM {EMBEDDINGS} e" in s]
    assert len(main) == 1, statements
    with connection.cursor() as cursor:
        for statement in statements:
            if "set_config(" in statement:
                cursor.execute(statement)
    return explain(main[0], None, analyze=True)


def test_a_large_team_is_read_through_its_models_hnsw_index(
    corpus: Corpus, db: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At EXACT_SCAN_BELOW-plus vectors PostgreSQL walks the model's HNSW index on its own
    (nothing pinned): a few dozen rows, where the same search written as the exact scan
    (no cast to vector(n), so no index can serve its order) computes the distance to
    every vector of the team."""
    team = corpus.large
    with team_scope(team.id):
        found, statements = captured(
            lambda: candidates.vector_matches(as_query(QUERIES[0]), filters_of(team), limit=10)
        )
        assert any("'hnsw.iterative_scan', 'relaxed_order'" in s for s in statements)
        nodes = vector_statement_plan(statements)

        monkeypatch.setattr(candidates, "EXACT_SCAN_BELOW", 10**9)
        _, exact_statements = captured(
            lambda: candidates.vector_matches(as_query(QUERIES[0]), filters_of(team), limit=10)
        )
        exact = vector_statement_plan(exact_statements)

    assert len(found) == 10
    embeddings = scans_of(nodes, EMBEDDINGS)
    assert [(n["Node Type"], n.get("Index Name")) for n in embeddings] == [("Index Scan", index_name(MODEL))]
    assert not any(n["Node Type"] == "Seq Scan" for n in nodes)
    # "No later deletion of the key" reads the team's deleted entries from their own small
    # index: at 100k memories the planner read the whole table for it (31 of 35 ms).
    deleted_check = [
        n for n in scans_of(nodes, "memories_memory") if n.get("Index Name") != "memories_memory_pkey"
    ]
    assert {n.get("Index Name") for n in deleted_check} == {"memory_team_deleted_key"}, deleted_check
    # limit * 2 rows kept (several chunks may share a memory), plus other teams' rows dropped.
    assert rows_read(embeddings) <= 10 * 2 * 3, embeddings

    exact_embeddings = scans_of(exact, EMBEDDINGS)
    assert index_name(MODEL) not in {n.get("Index Name") for n in exact}
    assert rows_read(exact_embeddings) >= corpus.vectors[team.id]
    # Measured: 1,512 shared buffers through the index, 2,956 for the exact scan.
    assert buffers(nodes) < buffers(exact) * 0.75, (buffers(nodes), buffers(exact))


def test_hybrid_completion_reads_only_the_named_memories_chunks(corpus: Corpus, db: None) -> None:
    """Memories the keyword path found get their similarity exactly, by memory id: their
    own chunks through the chunk indexes, never a scan of the large team's vectors."""
    team = corpus.large
    with team_scope(team.id):
        named = list(
            Memory.objects.filter(team_id=team.id, is_active=True)
            .order_by("key")
            .values_list("id", flat=True)[:8]
        )
        chunks = Chunk.objects.filter(memory_id__in=named).count()
        found = {m: Candidate(m, keyword_rank=1.0, found_by={"keyword"}) for m in named}
        _, statements = captured(
            lambda: candidates.complete_scores(
                found, candidates.plan_keyword_query("note", team.id), as_query(QUERIES[0]), filters_of(team)
            )
        )
        assert not any("hnsw" in s for s in statements)
        nodes = vector_statement_plan(statements)

    assert all(c.similarity is not None for c in found.values())
    assert chunks > len(named)  # some of them have two chunks
    assert not any(n["Node Type"] == "Seq Scan" for n in nodes), nodes
    for table in (EMBEDDINGS, "search_chunk", "memories_memory"):
        scans = scans_of(nodes, table)
        assert scans, table
        # Looked up by their ids: an index, or a bitmap of the named ids over the primary key.
        assert all(
            n["Node Type"] in ("Index Scan", "Index Only Scan")
            or (n["Node Type"] == "Bitmap Heap Scan" and "id = ANY" in n.get("Recheck Cond", ""))
            for n in scans
        ), scans
        assert rows_read(scans) <= 2 * chunks, scans
    assert {n.get("Index Name") for n in scans_of(nodes, "search_chunk")} == {"chunk_team_memory"}
    # Measured: 68 shared buffers, where the exact scan of the team touches about 3,000.
    assert buffers(nodes) < 400


def test_a_small_team_among_large_ones_reads_only_its_own_rows(corpus: Corpus, db: None) -> None:
    """A team under EXACT_SCAN_BELOW is scanned exactly, through its team indexes: the
    other teams' 15,600 vectors are never read, not even to be filtered out."""
    team = corpus.small
    with team_scope(team.id):
        memories = Memory.objects.filter(team_id=team.id).count()
        found, statements = captured(
            lambda: candidates.vector_matches(as_query(QUERIES[0]), filters_of(team), limit=10)
        )
        assert not any("hnsw" in s for s in statements)
        nodes = vector_statement_plan(statements)

    assert len(found) == 10
    assert not any(n["Node Type"] == "Seq Scan" for n in nodes), nodes
    for table, own_rows in (
        (EMBEDDINGS, corpus.vectors[team.id]),
        ("search_chunk", corpus.vectors[team.id]),
        ("memories_memory", memories + corpus.vectors[team.id]),  # + the deleted-key probe per chunk
    ):
        scans = scans_of(nodes, table)
        assert scans, table
        assert all(n["Node Type"] in ("Index Scan", "Index Only Scan", "Bitmap Heap Scan") for n in scans), (
            scans
        )
        assert rows_read(scans) <= own_rows, (table, scans)
    assert index_name(MODEL) not in {n.get("Index Name") for n in nodes}


# ------------------------------------------------------------------ old against new
#
# The vector SQL as it was at commit 74c1d5e ( the last change
# to search/retrieval/candidates.py before it), frozen: SearchFilters.sql() and
# _exact_scan, then vector_matches' floor and tie order. The bounded-candidates work did
# not change this SQL (only the connection it runs on); the comparison catches a future change.


def reference_vector_matches(
    values: list[float],
    team_id: int,
    *,
    types: list[str] | None,
    project: str | None,
    include_superseded: bool,
) -> list[tuple[uuid.UUID, float, int]]:
    clauses = [
        "m.team_id = %s",
        "m.deleted_at IS NULL",
        "NOT EXISTS (SELECT 1 FROM memories_memory d WHERE d.team_id = m.team_id AND d.key = m.key"
        " AND d.deleted_at IS NOT NULL AND d.created_at >= m.created_at)",
    ]
    params: list[Any] = [team_id]
    if not include_superseded:
        clauses.append("m.is_active")
    clauses.append("m.archived_at IS NULL")
    if types:
        clauses.append("m.type = ANY(%s)")
        params.append(list(types))
    if project is not None:
        clauses.append("m.project = %s")
        params.append(project)
    where = " AND ".join(clauses)
    sql = f"""
                SELECT memory_id, distance, chunk_id FROM (
                    SELECT DISTINCT ON (c.memory_id) c.memory_id, e.embedding <=> %s::vector AS distance,
                           c.id AS chunk_id
                    FROM search_chunkembedding e
                    JOIN search_chunk c ON c.id = e.chunk_id
                    JOIN memories_memory m ON m.id = c.memory_id
                    WHERE e.team_id = %s AND e.model = %s AND {where}
                    ORDER BY c.memory_id, distance
                ) best ORDER BY distance, memory_id LIMIT %s
            """  # noqa: S608
    literal = "[" + ",".join(repr(float(x)) for x in values) + "]"
    with connection.cursor() as cursor:
        cursor.execute(sql, [literal, team_id, MODEL, *params, TOP])
        rows = [(row[0], max(0.0, 1.0 - float(row[1])), row[2]) for row in cursor.fetchall()]
    rows.sort(key=lambda row: (-row[1], str(row[0])))
    return rows[:TOP]


TOP = 10
FILTER_CASES: list[dict[str, Any]] = [
    {},
    {"include_superseded": True},
    {"types": ["decision", "lesson"]},
    {"project": "alpha"},
    {"project": ""},
    {"types": ["identity"], "project": "beta", "include_superseded": True},
]


def current_vector_matches(team: Team, values: list[float], options: dict[str, Any]) -> list[Any]:
    return candidates.vector_matches(as_query(values), filters_of(team, **options), limit=TOP)


@pytest.mark.parametrize("team_name", ["large", "small"])
def test_exact_scans_return_the_old_codes_top_10(
    corpus: Corpus, db: None, team_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Identical ids, chunks and order as the frozen reference, for every query and
    filter; the large team is scanned exactly too (EXACT_SCAN_BELOW raised)."""
    team = getattr(corpus, team_name)
    monkeypatch.setattr(candidates, "EXACT_SCAN_BELOW", 10**9)
    with team_scope(team.id):
        for options in FILTER_CASES:
            for n, values in enumerate(QUERIES):
                old = reference_vector_matches(
                    values,
                    team.id,
                    types=options.get("types"),
                    project=options.get("project"),
                    include_superseded=options.get("include_superseded", False),
                )
                new, statements = captured(lambda: current_vector_matches(team, values, options))  # noqa: B023
                assert not any("hnsw" in s for s in statements)
                assert len(old) == TOP
                assert [(m, c) for m, _, c in new] == [(m, c) for m, _, c in old], (options, n)
                assert [s for _, s, _ in new] == pytest.approx([s for _, s, _ in old], abs=1e-12)


# Recall@10 of the HNSW path against the exact reference on this corpus (m 16,
# ef_construction 64, the selector's ef_search of 100 and iterative scan), over the
# filter cases. Measured over three builds (the index's levels are random): queries near
# a cluster centre, mean 0.987-0.992 and no query under 0.9; queries in a random
# direction, whose neighbours are all about equally far, mean 0.72-0.74 (worst 0.5);
# all together, mean 0.937-0.938.
RECALL_FLOOR = 0.9
NEAR_RECALL_FLOOR = 0.95
NEAR_RECALL_FLOOR_PER_QUERY = 0.7
NEAR_QUERIES = 8  # QUERIES' first eight


def test_the_index_path_finds_the_exact_top_10_within_the_recall_floor(corpus: Corpus, db: None) -> None:
    team = corpus.large
    near: list[float] = []
    far: list[float] = []
    with team_scope(team.id):
        for options in FILTER_CASES:
            for n, values in enumerate(QUERIES):
                exact = reference_vector_matches(
                    values,
                    team.id,
                    types=options.get("types"),
                    project=options.get("project"),
                    include_superseded=options.get("include_superseded", False),
                )
                found, statements = captured(lambda: current_vector_matches(team, values, options))  # noqa: B023
                assert any("'hnsw.iterative_scan', 'relaxed_order'" in s for s in statements)
                assert len(found) == TOP, options  # the iterative scan never comes back short
                recall = len({m for m, _, _ in exact} & {m for m, _, _ in found}) / TOP
                (near if n < NEAR_QUERIES else far).append(recall)
    recalls = near + far
    assert sum(recalls) / len(recalls) >= RECALL_FLOOR, recalls
    assert sum(near) / len(near) >= NEAR_RECALL_FLOOR, near
    assert min(near) >= NEAR_RECALL_FLOOR_PER_QUERY, near
