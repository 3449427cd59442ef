"""The vector path returns k results whatever the filters do to the index scan.

pgvector's HNSW index applies filters after the scan (team, type, state): a plain
scan hands out its `hnsw.ef_search` nearest rows of every team and the filters keep
what they keep, so a narrow filter comes back short. Small teams are scanned exactly;
larger ones go through the index with `hnsw.iterative_scan`, which keeps reading the
index until enough rows pass the filters (pgvector README, "Iterative Index Scans").

At this test's size PostgreSQL would rather sort a team's few filtered rows than walk
the index (right for the size, and never short); a team of production size gets the
index plan. The tests that are about the index pin the planner to it (no explicit
sort), and prove that the index ran: the same search without the iterative scan comes
back short."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memories.models import Memory
from search.retrieval import candidates
from search.retrieval.candidates import QueryVector
from search.run_search import embed_and_search, embed_query
from search.selectors import nearest_other_active_entries_of_batch
from teams.models import Team
from teams.scope import dangerously_bypass_team_scope, team_scope
from tests.conftest import Agent
from tests.factories import TeamFactory
from tests.search.plans import plan_nodes as all_nodes
from tests.search.plans import rows_read

MODEL = "all-MiniLM-L6-v2-onnx-int8"
QUERY = "a note about something"
NEAR_ENTRIES = 400  # more than the plain scan's hnsw.ef_search (100..1000, 160 here)


def add_memories(
    team: Team, prefix: str, count: int, memory_type: str, *, centre: list[float] | None, spread: float
) -> None:
    """`count` memories of `memory_type`, one chunk each, with vectors `centre` plus
    uniform noise of width `spread` in every dimension (no centre: random directions)."""
    with dangerously_bypass_team_scope(reason="test data"), connection.cursor() as cursor:
        cursor.execute(
            """
            WITH rows AS (
                INSERT INTO memories_memory (id, team_id, key, content, type, project, metadata, is_active,
                    deleted_by, supersede_reason, supersede_kind, updated_by, content_hash, index_state,
                    access_count, upvotes, downvotes, created_at, updated_at)
                SELECT gen_random_uuid(), %(team)s, %(prefix)s || '-' || n, 'note number ' || n, %(type)s,
                    '', '{}', true, '', '', '', 'seed', md5(%(prefix)s || n), 'indexed', 0, 0, 0, now(), now()
                FROM generate_series(1, %(count)s) AS n
                RETURNING id, content
            ), chunks AS (
                INSERT INTO search_chunk (team_id, memory_id, chunk_index, text, token_count, content_hash,
                    created_at)
                SELECT %(team)s, id, 0, content, 3, md5(content), now() FROM rows
                RETURNING id
            )
            INSERT INTO search_chunkembedding (team_id, chunk_id, model, embedding)
            SELECT %(team)s, chunks.id, %(model)s, (
                SELECT array_agg(coalesce((%(centre)s::float8[])[d], 0) + (random() - 0.5) * %(spread)s
                                 ORDER BY d)::vector
                FROM generate_series(1, 384) AS d WHERE chunks.id > 0
            ) FROM chunks
            """,
            {
                "team": team.id,
                "prefix": prefix,
                "count": count,
                "type": memory_type,
                "model": MODEL,
                "centre": centre,
                "spread": spread,
            },
        )


@pytest.fixture
def crowded(db: None) -> tuple[Team, Team]:
    """Two teams in one HNSW index. `near` has 400 entries right next to the query
    (cosine about 0.96). `far` has 300 context entries in random directions (about 0)
    and 5 identity entries in between (about 0.66): every one of its entries is
    farther from the query than all of `near`'s, so a plain index scan, whose first
    rows are all `near`'s, finds none of `far`'s."""
    near, far = TeamFactory(slug="near", name="Near"), TeamFactory(slug="far", name="Far")
    centre, _warnings = embed_query(team=near, query=QUERY)
    assert centre is not None
    add_memories(near, "near", NEAR_ENTRIES, "context", centre=centre.values, spread=0.05)
    add_memories(far, "far-context", 300, "context", centre=None, spread=1.0)
    add_memories(far, "far-identity", 5, "identity", centre=centre.values, spread=0.2)
    with connection.cursor() as cursor:  # planner statistics, as autovacuum would gather them
        cursor.execute("ANALYZE memories_memory, search_chunk, search_chunkembedding")
    return near, far


@pytest.fixture
def index_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """Teams of 100 vectors or more take the HNSW path, and PostgreSQL walks the index
    (it may not sort instead); both settings end with the test."""
    monkeypatch.setattr(candidates, "EXACT_SCAN_BELOW", 100)
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_sort = off")


def run_search(team: Team, **options: Any) -> tuple[list[Any], list[str]]:
    with team_scope(team.id), CaptureQueriesContext(connection) as queries:
        outcome = embed_and_search(team=team, query=QUERY, mode="vector", **options)
    assert outcome.search_mode == "vector"
    return outcome.results, [q["sql"] for q in queries.captured_queries]


def without_iterative_scan(execute: Callable[..., Any], sql: str, *args: Any) -> Any:
    """Runs the selector's statements with the iterative scan turned off instead of on."""
    return execute(
        sql.replace("'hnsw.iterative_scan', 'relaxed_order'", "'hnsw.iterative_scan', 'off'"), *args
    )


def test_small_team_among_large_ones_is_scanned_exactly(
    crowded: tuple[Team, Team], member: Agent, django_capture_on_commit_callbacks: Any
) -> None:
    for n in range(8):
        with django_capture_on_commit_callbacks(execute=True):
            member.client.post(
                member.url("memories/"), {"key": f"s{n}", "content": f"Small team note {n}."}, format="json"
            )

    results, queries = run_search(member.team, max_results=5)

    assert len(results) == 5
    assert {r.key for r in results} <= {f"s{n}" for n in range(8)}
    assert not any("iterative_scan" in q for q in queries)  # scanned exactly


def test_a_teams_scan_is_chosen_once_a_minute_and_a_team_that_grew_past_the_line_then_goes_through_the_index(
    db: None, index_plan: None
) -> None:
    team = TeamFactory(slug="growing", name="Growing")
    add_memories(team, "small", 8, "context", centre=None, spread=1.0)

    _, first = run_search(team, max_results=5)
    _, second = run_search(team, max_results=5)
    counted = [q for q in first + second if "AS capped" in q]
    assert len(counted) == 1  # the first search counted the team's vectors; the second did not
    assert not any("iterative_scan" in q for q in first + second)  # exactly, both times

    add_memories(team, "grown", 150, "context", centre=None, spread=1.0)  # past the test's line of 100
    # Within the minute it is still scanned exactly: the right results, more slowly.
    _, within_the_minute = run_search(team, max_results=5)
    assert not any("iterative_scan" in q or "AS capped" in q for q in within_the_minute)
    candidates._SCAN_CHOICES.expire(time.monotonic() + 61)  # a minute later
    results, after = run_search(team, max_results=5)
    assert len(results) == 5
    assert any("AS capped" in q for q in after)
    assert any("'hnsw.iterative_scan', 'relaxed_order'" in q for q in after)


def test_narrow_filter_on_a_large_team_gets_k_results_through_the_iterative_scan(
    crowded: tuple[Team, Team], index_plan: None
) -> None:
    _near, far = crowded
    # The case is one where the iterative scan matters: without it the index hands
    # out only `near`'s rows, which the team filter drops.
    with connection.execute_wrapper(without_iterative_scan):
        short, _ = run_search(far, max_results=5, types=["identity"])
    assert len(short) < 5

    results, queries = run_search(far, max_results=5, types=["identity"])

    assert len(results) == 5
    assert {r.key for r in results} == {f"far-identity-{n}" for n in range(1, 6)}
    assert any("'hnsw.iterative_scan', 'relaxed_order'" in q for q in queries)


def test_large_team_behind_another_teams_rows_gets_k_results_of_its_own(
    crowded: tuple[Team, Team], index_plan: None
) -> None:
    _near, far = crowded
    with connection.execute_wrapper(without_iterative_scan):
        short, _ = run_search(far, max_results=10, include_superseded=False)
    assert len(short) < 10

    results, _queries = run_search(far, max_results=10, include_superseded=False)

    assert len(results) == 10
    assert all(r.key.startswith("far-") for r in results)
    # The 5 identity entries are far's nearest: they come first.
    assert {r.key for r in results[:5]} == {f"far-identity-{n}" for n in range(1, 6)}


def plan_nodes(plan: dict[str, Any]) -> list[str]:
    return [plan["Node Type"], *(node for child in plan.get("Plans", []) for node in plan_nodes(child))]


GROWN_SIZE = 600


@pytest.fixture
def grown(db: None) -> tuple[Team, QueryVector]:
    """A team of GROWN_SIZE memories added after the planner's statistics were taken
    (as after a flood of saves or an import), and the test query's vector."""
    team = TeamFactory(slug="grown", name="Grown")
    with connection.cursor() as cursor:  # statistics from before the team's rows
        cursor.execute("ANALYZE memories_memory, search_chunk, search_chunkembedding")
    add_memories(team, "grown", GROWN_SIZE, "context", centre=None, spread=1.0)
    query, _warnings = embed_query(team=team, query=QUERY)
    assert query is not None
    return team, query


@contextmanager
def exact_scan_plans(*, analyze: bool = False) -> Iterator[list[dict[str, Any]]]:
    """The plans of the exact vector scans run in the block (run too when `analyze`)."""
    plans: list[dict[str, Any]] = []
    options = "ANALYZE, FORMAT JSON" if analyze else "FORMAT JSON"

    def explain(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        if "DISTINCT ON (c.memory_id)" in sql:
            raw = context["cursor"].cursor  # psycopg's own: not through this wrapper again
            raw.execute(f"EXPLAIN ({options}) " + sql, params)
            plans.append(raw.fetchone()[0][0]["Plan"])
        return execute(sql, params, many, context)

    with connection.execute_wrapper(explain):
        yield plans


def test_a_team_grown_since_the_last_analyze_is_scanned_in_one_pass(grown: tuple[Team, QueryVector]) -> None:
    """The planner's statistics lag behind a team that has just grown (a
    flood of saves, an import). Believing the team holds a row or two, PostgreSQL joined
    each of its vectors to its chunks through the team index, a pass over the team's
    chunks per vector: quadratic in the team's size, paid by each save's duplicate check
    and each search. The exact scan joins by hashing, one pass over each table."""
    team, query = grown
    filters = candidates.SearchFilters(team_id=team.id, types=None, project=None, include_superseded=False)
    with team_scope(team.id), exact_scan_plans() as plans:
        matches = candidates.vector_matches(query, filters, limit=5)

    assert len(matches) == 5
    assert len(plans) == 1
    assert "Nested Loop" not in plan_nodes(plans[0])


def test_named_memories_of_a_team_grown_since_the_last_analyze_are_read_once(
    grown: tuple[Team, QueryVector],
) -> None:
    """The hybrid completion's scan of named memories, under the same stale statistics:
    as one join, PostgreSQL paired the team's vectors with its memories before filtering
    by name (quadratic; 3,000 memories ran for 23 minutes). Each table is now read on
    its own, by the names, so no row of the team is read more than a few times."""
    team, query = grown
    filters = candidates.SearchFilters(team_id=team.id, types=None, project=None, include_superseded=False)
    with team_scope(team.id):
        named = list(Memory.objects.filter(team_id=team.id).values_list("id", flat=True)[:40])
        with exact_scan_plans(analyze=True) as plans:
            matches = candidates.vector_matches(query, filters, limit=len(named), memory_ids=named)

    assert {memory_id for memory_id, _, _ in matches} == set(named)
    assert len(plans) == 1
    # Every row a scan of a table produced or filtered out, over all its loops: the old
    # join read about size * size (360,000 here); three tables read once each, and the
    # deleted-key check, about 3 * size. The bound leaves room for other linear plans.
    table_scans = [node for node in all_nodes(plans[0]) if "Relation Name" in node]
    assert {node["Relation Name"] for node in table_scans} == {
        "memories_memory",
        "search_chunk",
        "search_chunkembedding",
    }
    assert rows_read(table_scans) <= 10 * GROWN_SIZE


@pytest.mark.parametrize("before", ["on", "off"])
def test_the_exact_scan_leaves_nested_loops_as_it_found_them(
    grown: tuple[Team, QueryVector], before: str
) -> None:
    """The scan turns nested loops off for itself only: the rest of the caller's
    transaction keeps whatever it had, an operator's setting included."""
    team, query = grown
    filters = candidates.SearchFilters(team_id=team.id, types=None, project=None, include_superseded=False)
    with team_scope(team.id), connection.cursor() as cursor:
        cursor.execute("SELECT set_config('enable_nestloop', %s, true)", [before])
        matches = candidates.vector_matches(query, filters, limit=5)
        cursor.execute("SHOW enable_nestloop")
        after = cursor.fetchone()[0]

    assert len(matches) == 5
    assert after == before


@pytest.mark.parametrize("before", ["on", "off"])
def test_the_batch_duplicate_scan_leaves_nested_loops_as_it_found_them(
    grown: tuple[Team, QueryVector], before: str
) -> None:
    """The indexing batch's near-duplicate scan turns nested loops off for itself only,
    as the search's scan does."""
    team, query = grown
    with team_scope(team.id), connection.cursor() as cursor:
        batch = [
            (memory_id, key, False)
            for memory_id, key in Memory.objects.filter(team_id=team.id).values_list("id", "key")[:3]
        ]
        cursor.execute("SELECT set_config('enable_nestloop', %s, true)", [before])
        found = nearest_other_active_entries_of_batch(
            team_id=team.id, batch=batch, checked={batch[0][0]}, model=query.model
        )
        cursor.execute("SHOW enable_nestloop")
        after = cursor.fetchone()[0]

    assert found is not None and len(found[batch[0][0]]) == 1
    assert after == before
