"""What would block distributing the schema by team on a distributed PostgreSQL such as
Citus (docs/operations.md, "Sharding by team"): read from the migrated database's
catalog and compared with the list that page decides on, so a new table, unique index or
foreign key that would add to the work fails here until the page says what becomes of
it.

Citus distributes a table by one column (`team_id`) and requires that every primary key
and unique index of a distributed table include it, and that a foreign key between two
distributed tables include it too. A table without `team_id` can only be a reference
table (copied to every node) or stay on the coordinator, and a reference table may not
point at a distributed one.
"""

from __future__ import annotations

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db

_TABLES = """
SELECT c.relname,
       EXISTS (SELECT 1 FROM pg_attribute a
               WHERE a.attrelid = c.oid AND a.attname = 'team_id' AND NOT a.attisdropped)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')
"""
_UNIQUE_INDEXES = """
SELECT c.relname, i.relname,
       array(SELECT a.attname FROM unnest(ix.indkey) k
             JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k)
FROM pg_index ix
JOIN pg_class c ON c.oid = ix.indrelid
JOIN pg_class i ON i.oid = ix.indexrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = current_schema() AND ix.indisunique
"""
_FOREIGN_KEYS = """
SELECT src.relname, dst.relname,
       array(SELECT a.attname FROM unnest(con.conkey) k
             JOIN pg_attribute a ON a.attrelid = src.oid AND a.attnum = k)
FROM pg_constraint con
JOIN pg_class src ON src.oid = con.conrelid
JOIN pg_class dst ON dst.oid = con.confrelid
JOIN pg_namespace n ON n.oid = src.relnamespace
WHERE n.nspname = current_schema() AND con.contype = 'f'
"""

# Tables without team_id, and what each becomes (docs/operations.md, "Sharding by team").
TABLES_WITHOUT_TEAM = {
    # reference tables (copied to every node): read by every team's requests, or pointed
    # at by reference tables
    "teams_team": "reference",
    "auth_user": "reference",
    # on the coordinator: the admin's, the beat schedule's and Django's own
    "auth_group": "coordinator",
    "auth_group_permissions": "coordinator",
    "auth_permission": "coordinator",
    "auth_user_groups": "coordinator",
    "auth_user_user_permissions": "coordinator",
    "axes_accessattempt": "coordinator",
    "axes_accessattemptexpiration": "coordinator",
    "axes_accessfailurelog": "coordinator",
    "axes_accesslog": "coordinator",
    "django_admin_log": "coordinator",
    "django_celery_beat_clockedschedule": "coordinator",
    "django_celery_beat_crontabschedule": "coordinator",
    "django_celery_beat_intervalschedule": "coordinator",
    "django_celery_beat_periodictask": "coordinator",
    "django_celery_beat_periodictasks": "coordinator",
    "django_celery_beat_solarschedule": "coordinator",
    "django_content_type": "coordinator",
    "django_migrations": "coordinator",
    "django_session": "coordinator",
    "teams_jobrun": "coordinator",
}

# Tables with team_id that become reference tables, not distributed ones: they are
# looked up across teams (a token by its hash before its team is known; a person's
# memberships for the dashboard's team picker), and they are small.
REFERENCE_TABLES_WITH_TEAM = {"teams_agenttoken", "teams_membership"}

# Primary keys and unique indexes of distributed tables that do not include team_id:
# {(table, columns)}. Each becomes (team_id, ...) when the schema is distributed.
UNIQUE_WITHOUT_TEAM = {
    *(
        (table, ("id",))
        for table in (
            "agents_agentsession",
            "freshness_anchorcheck",
            "freshness_draft",
            "freshness_nudge",
            "memories_annotation",
            "memories_confirmation",
            "memories_conversation",
            "memories_conversationline",
            "memories_fact",
            "memories_memory",
            "search_chunk",
            "search_chunkembedding",
            "search_conversationchunk",
            "search_embeddingcache",
            "search_keytrigrams",
            "search_keywordstat",
            "teams_auditevent",
            "teams_vaultentry",
        )
    ),
    ("search_chunk", ("chunk_index", "memory_id")),
    ("search_chunkembedding", ("model", "chunk_id")),
}

# Foreign keys between distributed tables that do not include team_id: {(from, to,
# columns)}. Each becomes (team_id, column) REFERENCES (team_id, id).
FOREIGN_KEYS_WITHOUT_TEAM = {
    ("freshness_anchorcheck", "memories_memory", ("memory_id",)),
    ("freshness_draft", "memories_memory", ("conflict_memory_id",)),
    ("freshness_draft", "memories_memory", ("memory_id",)),
    ("freshness_draft", "memories_fact", ("fact_id",)),
    ("freshness_nudge", "memories_memory", ("memory_id",)),
    ("freshness_nudge", "memories_fact", ("fact_id",)),
    ("freshness_nudge", "memories_memory", ("other_memory_id",)),
    ("memories_annotation", "memories_memory", ("memory_id",)),
    ("memories_confirmation", "memories_memory", ("memory_id",)),
    ("memories_conversationline", "memories_conversation", ("conversation_id",)),
    ("memories_fact", "memories_fact", ("supersedes_id",)),
    ("memories_memory", "memories_memory", ("restored_from_id",)),
    ("memories_memory", "memories_memory", ("supersedes_id",)),
    ("search_chunk", "memories_memory", ("memory_id",)),
    ("search_chunkembedding", "search_chunk", ("chunk_id",)),
    ("search_conversationchunk", "memories_conversation", ("conversation_id",)),
}


def _blockers() -> tuple[
    dict[str, bool], set[tuple[str, tuple[str, ...]]], set[tuple[str, str, tuple[str, ...]]]
]:
    """Every table (whether it has team_id), and the unique keys and foreign keys of the
    distributed tables that do not include team_id."""
    with connection.cursor() as cursor:
        cursor.execute(_TABLES)
        has_team = {table: bool(flag) for table, flag in cursor.fetchall()}
        cursor.execute(_UNIQUE_INDEXES)
        unique_keys = [(table, tuple(columns)) for table, _index, columns in cursor.fetchall()]
        cursor.execute(_FOREIGN_KEYS)
        foreign_keys = [(src, dst, tuple(columns)) for src, dst, columns in cursor.fetchall()]

    def distributed(table: str) -> bool:
        return has_team.get(table, False) and table not in REFERENCE_TABLES_WITH_TEAM

    uniques = {key for key in unique_keys if distributed(key[0]) and "team_id" not in key[1]}
    between_distributed = {
        fk for fk in foreign_keys if distributed(fk[0]) and distributed(fk[1]) and "team_id" not in fk[2]
    }
    # Citus refuses these outright: a reference table may not point at a distributed one.
    reference_to_distributed = {fk for fk in foreign_keys if not distributed(fk[0]) and distributed(fk[1])}
    assert not reference_to_distributed, (
        f"a reference table points at a distributed one: {reference_to_distributed}"
    )
    return has_team, uniques, between_distributed


def test_the_tables_without_team_id_are_the_documented_ones() -> None:
    has_team, _, _ = _blockers()
    assert sorted(t for t, flag in has_team.items() if not flag) == sorted(TABLES_WITHOUT_TEAM)
    assert all(has_team.get(table) for table in REFERENCE_TABLES_WITH_TEAM)


def test_the_unique_keys_without_team_id_are_the_documented_ones() -> None:
    _, uniques, _ = _blockers()
    assert uniques == UNIQUE_WITHOUT_TEAM


def test_the_foreign_keys_between_team_tables_without_team_id_are_the_documented_ones() -> None:
    _, _, foreign_keys = _blockers()
    assert foreign_keys == FOREIGN_KEYS_WITHOUT_TEAM
