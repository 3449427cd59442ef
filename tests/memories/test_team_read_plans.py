"""A team's common reads of its entries and their chunks go through an index that names
more than the team, whatever the planner's statistics say of the team (docs/tenancy.md,
"Indexes per team"): a team whose rows were written after the last ANALYZE is unknown to
them and estimated at one row, and an index on the team alone then looked as good as the
exact one to the planner, which read and filtered every row of the team through it (as
the fact lookup did: tests/memories/test_fact_lookup_plan.py)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memories import selectors
from memories.models import IndexState, Memory
from search.chunking import chunk_text
from search.models import Chunk
from search.services import replace_chunks
from teams.models import Team
from teams.roles import as_owner
from teams.scope import team_scope
from tests.factories import TeamFactory
from tests.search.plans import explain, scans_of

ENTRIES_PER_TEAM = 4_000


def seed_entries(team: Team, count: int) -> None:
    """`count` active entries with their chunks, in batches, as an import writes them."""
    memories = []
    for i in range(count):
        content = f"Entry {i} of team {team.slug}: the deploy of service {i % 97} runs on host {i % 13}."
        memories.append(
            Memory(
                team=team,
                key=f"entry-{i:05d}",
                content=content,
                type="context",
                updated_by="seed",
                content_hash=Memory.hash_content(content),
                index_state=IndexState.INDEXED,
            )
        )
    with team_scope(team.id):
        saved = Memory.objects.bulk_create(memories, batch_size=1_000)
        Chunk.objects.bulk_create(
            (
                Chunk(
                    team=team,
                    memory=memory,
                    chunk_index=piece.index,
                    text=piece.text,
                    token_count=piece.token_count,
                    content_hash=piece.content_hash,
                )
                for memory in saved
                for piece in chunk_text(memory.content)
            ),
            batch_size=1_000,
        )


def only_plan_of(table: str, captured: CaptureQueriesContext) -> list[dict[str, Any]]:
    """EXPLAIN (ANALYZE) of the one captured statement that reads `table`."""
    (statement,) = [q["sql"] for q in captured.captured_queries if f'FROM "{table}"' in q["sql"]]
    return explain(statement, None, analyze=True)


def active_entry_plan(team: Team, key: str) -> list[dict[str, Any]]:
    """The plan of the read of a key's active entry, as the selector sends it."""
    with team_scope(team.id), CaptureQueriesContext(connection) as captured:
        memory = selectors.get_active_memory(team=team, key=key)
        assert memory.key == key
        return only_plan_of("memories_memory", captured)


def chunks_of_entry_plan(team: Team, key: str) -> list[dict[str, Any]]:
    """The plan of the read of an entry's chunks that indexing starts with (the chunks
    are unchanged, so it writes nothing)."""
    with team_scope(team.id):
        memory = selectors.get_active_memory(team=team, key=key)
        with CaptureQueriesContext(connection) as captured:
            replace_chunks(memory, chunk_text(memory.content))
        return only_plan_of("search_chunk", captured)


@pytest.fixture
def known_and_new_team(transactional_db: None) -> tuple[Team, Team]:
    """A team whose rows the statistics know (ANALYZE as the owner role, as autovacuum
    does), then a team that wrote as many after it."""
    known, new = TeamFactory(), TeamFactory()
    seed_entries(known, ENTRIES_PER_TEAM)
    with as_owner(connection), connection.cursor() as cursor:
        for table in ("memories_memory", "search_chunk"):
            cursor.execute(f"ANALYZE {table}")
            cursor.execute("SELECT reltuples FROM pg_class WHERE relname = %s", [table])
            assert cursor.fetchone()[0] == ENTRIES_PER_TEAM, table  # the ANALYZE was not skipped
    seed_entries(new, ENTRIES_PER_TEAM)
    return known, new


def assert_exact_index_read(scan: dict[str, Any], column: str) -> None:
    assert scan["Node Type"] in ("Index Scan", "Index Only Scan"), scan
    # The index condition names the row, not only its team: no row of the team is read
    # and thrown away.
    assert column in scan["Index Cond"], scan["Index Cond"]
    assert scan.get("Rows Removed by Filter", 0) == 0, scan


def test_a_teams_entries_and_chunks_are_read_by_their_index_even_for_a_team_the_statistics_do_not_know(
    known_and_new_team: tuple[Team, Team],
) -> None:
    # One seeding for the three reads that hold (each plan is EXPLAIN ANALYZE of a read
    # that writes nothing, so they do not change each other's statistics).
    known, new = known_and_new_team
    for team in (known, new):
        (scan,) = scans_of(chunks_of_entry_plan(team, "entry-02357"), "search_chunk")
        assert_exact_index_read(scan, "memory_id")
        assert scan["Actual Rows"] == 1
    (scan,) = scans_of(active_entry_plan(known, "entry-02357"), "memories_memory")
    assert_exact_index_read(scan, "key")
    assert scan["Actual Rows"] == 1


@pytest.mark.xfail(
    strict=True,
    reason="a tie: every index that starts with the team and holds the active entries "
    "(memory_team_active_confirmed, _type, one_active_memory_per_team_key) costs the same "
    "for a team estimated at one row, and the planner keeps the first it costed "
    '(docs/tenancy.md, "Indexes per team")',
)
def test_the_active_entry_of_a_key_is_read_by_team_and_key_even_for_a_team_the_statistics_do_not_know(
    known_and_new_team: tuple[Team, Team],
) -> None:
    _, new = known_and_new_team
    (scan,) = scans_of(active_entry_plan(new, "entry-02357"), "memories_memory")
    assert_exact_index_read(scan, "key")
    assert scan["Actual Rows"] == 1
