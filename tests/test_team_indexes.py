"""No table keeps an index on the team alone beside an index that starts with the team
(docs/tenancy.md, "Indexes per team"), read from the migrated database's catalog.

Such an index serves nothing the other does not (the team's reads, its rows' deletion,
the row-level security filter), and while the planner's statistics do not know a team
(its rows written since the last ANALYZE, estimated at one row) it looks as cheap as the
exact index to the planner, which then reads and filters every row of the team through
it. Django gives every ForeignKey an index of its own unless `db_index=False`.
"""

from __future__ import annotations

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db

# Every btree index of a table with team_id: its key columns in order (NULL for an
# expression) and whether it is partial.
_BTREE_INDEXES = """
SELECT t.relname, i.relname,
       array(SELECT a.attname
             FROM unnest((x.indkey::int2[])[0:x.indnkeyatts - 1]) WITH ORDINALITY AS k(attnum, position)
             LEFT JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum
             ORDER BY k.position),
       x.indpred IS NOT NULL
FROM pg_index x
JOIN pg_class i ON i.oid = x.indexrelid
JOIN pg_class t ON t.oid = x.indrelid
JOIN pg_namespace n ON n.oid = t.relnamespace
JOIN pg_am am ON am.oid = i.relam
WHERE n.nspname = current_schema() AND am.amname = 'btree'
  AND EXISTS (SELECT 1 FROM pg_attribute a
              WHERE a.attrelid = t.oid AND a.attname = 'team_id' AND NOT a.attisdropped)
"""

# Tables that keep their index on the team alone, and why: their indexes that start with
# the team are partial, so the team's deletion and its reads of every row need it.
KEEP_TEAM_ONLY_INDEX = {
    "agents_agentsession": "session_team_live* cover the live sessions only",
    "freshness_draft": "draft_team_pending_* cover the pending drafts only",
}


def _indexes() -> dict[str, list[tuple[str, list[str | None], bool]]]:
    with connection.cursor() as cursor:
        cursor.execute(_BTREE_INDEXES)
        rows = cursor.fetchall()
    by_table: dict[str, list[tuple[str, list[str | None], bool]]] = {}
    for table, index, columns, partial in rows:
        by_table.setdefault(table, []).append((index, columns, partial))
    return by_table


def test_the_catalog_query_sees_the_indexes_that_start_with_the_team() -> None:
    indexes = dict((name, (columns, partial)) for name, columns, partial in _indexes()["memories_memory"])
    assert indexes["memory_team_key_recent"] == (["team_id", "key", "created_at"], False)
    assert indexes["one_active_memory_per_team_key"] == (["team_id", "key"], True)
    # An expression is a column without a name.
    assert indexes["one_active_skill_per_team_name"] == (["team_id", None], True)
    drafts = dict((name, (columns, partial)) for name, columns, partial in _indexes()["freshness_draft"])
    assert (["team_id"], False) in drafts.values()


def test_no_index_on_the_team_alone_beside_a_full_index_that_starts_with_the_team() -> None:
    trapped = {}
    kept = set()
    for table, indexes in _indexes().items():
        team_only = [name for name, columns, _ in indexes if columns == ["team_id"]]
        if not team_only:
            continue
        starting_with_team = [
            (name, partial)
            for name, columns, partial in indexes
            if columns[0] == "team_id" and name not in team_only
        ]
        full = [name for name, partial in starting_with_team if not partial]
        if full:
            trapped[table] = (team_only, full)
        elif starting_with_team:
            kept.add(table)
    assert trapped == {}, "drop the index on the team alone (ForeignKey(..., db_index=False) and a migration)"
    # A table whose only indexes that start with the team are partial keeps its index on
    # the team alone; each is decided on here.
    assert kept == set(KEEP_TEAM_ONLY_INDEX)
