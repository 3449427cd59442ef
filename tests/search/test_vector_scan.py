"""The vector path returns k results whatever the team filter does to the index scan.

pgvector's HNSW index filters after the scan (team, type, state), so a filtered
approximate scan can come back short. Small teams are scanned exactly; large ones
use the HNSW index with iterative scans. Both are checked here among large teams."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from search import selectors
from search.embeddings.profiles import provider_for
from teams.models import Team
from teams.scope import dangerously_bypass_team_scope, team_scope
from tests.conftest import Agent
from tests.factories import TeamFactory

MODEL = "all-MiniLM-L6-v2-onnx-int8"


def bulk_team(slug: str, count: int, *, identity_every: int = 0) -> Team:
    """A team of `count` memories, one chunk and one random unit vector each, in SQL."""
    team = TeamFactory(slug=slug, name=slug)
    with dangerously_bypass_team_scope(reason="test data"), connection.cursor() as cursor:
        cursor.execute(
            """
            WITH rows AS (
                INSERT INTO memories_memory (id, team_id, key, content, type, project, metadata, is_active,
                    deleted_by, supersede_reason, supersede_kind, updated_by, content_hash, index_state,
                    access_count, upvotes, downvotes, created_at, updated_at)
                SELECT gen_random_uuid(), %(team)s, %(slug)s || '-' || n, 'note number ' || n,
                    CASE WHEN %(every)s > 0 AND n %% %(every)s = 0 THEN 'identity' ELSE 'context' END,
                    '', '{}', true, '', '', '', 'seed', md5(n::text), 'indexed', 0, 0, 0, now(), now()
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
                SELECT array_agg(random() - 0.5)::vector FROM generate_series(1, 384) WHERE chunks.id > 0
            ) FROM chunks
            """,
            {"team": team.id, "slug": slug, "count": count, "every": identity_every, "model": MODEL},
        )
    return team


@pytest.fixture
def crowd(db: None) -> list[Team]:
    teams = [bulk_team(f"big-{n}", 1500, identity_every=250) for n in range(2)]
    with connection.cursor() as cursor:  # planner statistics, as autovacuum would gather them
        cursor.execute("ANALYZE memories_memory, search_chunk, search_chunkembedding")
    return teams


def run_search(team: Team, **options: Any) -> tuple[list[Any], list[str]]:
    with team_scope(team.id), CaptureQueriesContext(connection) as queries:
        outcome = selectors.search_memories(
            team=team, query="a note about something", mode="vector", **options
        )
    return outcome.results, [q["sql"] for q in queries.captured_queries]


def test_small_team_among_large_ones_gets_k_results(
    crowd: list[Team], member: Agent, django_capture_on_commit_callbacks: Any
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


def test_large_team_with_a_narrow_filter_still_gets_k_results_from_hnsw(
    crowd: list[Team], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(selectors, "EXACT_SCAN_BELOW", 100)
    team = crowd[0]
    assert provider_for("local") is not None

    results, queries = run_search(team, max_results=5, types=["identity"])

    assert any("iterative_scan" in q for q in queries)  # went through the HNSW path
    assert len(results) == 5  # 6 identity rows among 1,500
    assert {r.type for r in results} == {"identity"}
    # Which plan PostgreSQL picks (the HNSW index, or the type's few rows first) is
    # its choice by statistics; either way the answer must not come back short.


def test_large_team_unfiltered_gets_k_results_from_the_hnsw_path(
    crowd: list[Team], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(selectors, "EXACT_SCAN_BELOW", 100)

    results, queries = run_search(crowd[1], max_results=10, include_superseded=False)

    assert any("iterative_scan" in q for q in queries)
    assert len(results) == 10
    assert {r.key for r in results} <= {f"big-1-{n}" for n in range(1, 1501)}
