"""An installation from before the layout move upgrades with today's migrations and keeps
everything: its rows (agent sessions now in agents_agentsession, the audit trail in
teams_auditevent), its row-level security, and ends with the shape of a fresh install.

The old database is tests/fixtures/schema_before_layout_move.sql (commit 2bd9074's schema
and its django_migrations rows; tests/fixtures/make_old_schema.py regenerates it), loaded
into a scratch database on the embedded server this run uses, filled with rows as the old
code wrote them, then migrated by `manage.py migrate` in a separate process, as an
operator upgrading would. The scratch databases are dropped even when a test fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest
from django.conf import settings
from psycopg import sql

from teams.roles import APP_ROLE, OPERATOR_ROLE, OWNER_ROLE
from tests.db_roles import connect_as

pytestmark = pytest.mark.slow  # manage.py migrate in a process of its own

REPO = Path(__file__).resolve().parents[1]
OLD_SCHEMA = Path(__file__).parent / "fixtures" / "schema_before_layout_move.sql"
MOVED_TABLES = {"teams_agentsession": "agents_agentsession", "dashboard_auditevent": "teams_auditevent"}
# migrate adds rows here itself (its own bookkeeping, and post_migrate's content types
# and permissions); every other table must come out with exactly the rows it had.
FILLED_BY_MIGRATE = {"django_migrations", "django_content_type", "auth_permission"}
# Tables put under row-level security by a later migration on purpose (the old schema
# had them without): the embedding cache is per team since search.0004.
SECURED_SINCE = {"search_embeddingcache"}
# A hang detector for the migrate process, not a speed target.
MIGRATE_TIMEOUT_SECONDS = 300
# How long a scratch database waits for the sessions that have just left it (teardown).
SESSIONS_END_SECONDS = 10

ALPHA, BRAVO = 1, 2
T0 = "2026-01-05 09:00:00+00"
T1 = "2026-01-06 09:00:00+00"
T2 = "2026-01-07 09:00:00+00"
STYLE_V1, STYLE_V2, STYLE_V3 = (uuid.UUID(int=n) for n in (101, 102, 103))
FORGOTTEN, RESTORED, BRAVO_SKILL = (uuid.UUID(int=n) for n in (104, 105, 106))
# 384 dimensions: the default model's HNSW index casts to vector(384).
EMBEDDING = "[" + ",".join(str((i % 17) / 17) for i in range(384)) + "]"

# Rows as the code of commit 2bd9074 wrote them: two teams, a member of each, live and
# revoked tokens, a vault entry and a secret, a three-version supersede chain, a deleted
# memory and its restored copy, a skill, an annotation, a chunk with its embedding,
# agent sessions (live, ended, expired) and audit events of both teams.
OLD_ROWS = f"""
INSERT INTO auth_user (id, password, is_superuser, username, first_name, last_name, email,
                       is_staff, is_active, date_joined)
VALUES (1, 'md5$salt$0123', false, 'ada', 'Ada', 'L', 'ada@example.org', false, true, '{T0}'),
       (2, 'md5$salt$4567', false, 'bob', 'Bob', 'K', 'bob@example.org', false, true, '{T0}');

INSERT INTO teams_team (id, slug, name, injection_max_entries, injection_max_tokens,
                        decay_half_life_days, hybrid_vector_weight, hybrid_keyword_weight,
                        embedding_profile, created_at, dedup_threshold)
VALUES ({ALPHA}, 'alpha', 'Alpha', 12, 1800, 45.0, 0.7, 0.3, 'default', '{T0}', 0.92),
       ({BRAVO}, 'bravo', 'Bravo', 8, 1200, 30.0, 0.5, 0.5, 'default', '{T0}', 0.95);

INSERT INTO teams_membership (id, role, created_at, user_id, team_id)
VALUES (1, 'owner', '{T0}', 1, {ALPHA}), (2, 'member', '{T0}', 2, {BRAVO});

INSERT INTO teams_agenttoken (id, name, token_hash, prefix, scopes, created_at, revoked_at,
                              last_used_at, team_id)
VALUES (1, 'writer-bot', repeat('a', 64), 'mh_aaaa', '{{read,write}}', '{T0}', NULL, '{T1}', {ALPHA}),
       (2, 'retired-bot', repeat('b', 64), 'mh_bbbb', '{{read}}', '{T0}', '{T1}', NULL, {ALPHA}),
       (3, 'bravo-bot', repeat('c', 64), 'mh_cccc', '{{read,write,admin}}', '{T0}', NULL, NULL, {BRAVO});

INSERT INTO teams_vaultentry (id, key, value, ciphertext, is_secret, updated_by, created_at,
                              updated_at, team_id)
VALUES (1, 'deploy-host', 'db.alpha.internal', '', false, 'ada', '{T0}', '{T1}', {ALPHA}),
       (2, 'api-key', '', 'gAAAAABold-fernet-token', true, 'ada', '{T0}', '{T0}', {ALPHA});

INSERT INTO memories_memory (id, key, content, type, project, metadata, is_active, deleted_at,
                             deleted_by, supersede_reason, supersede_kind, updated_by, content_hash,
                             index_state, created_at, updated_at, supersedes_id, team_id,
                             access_count, downvotes, last_accessed_at, restored_from_id, upvotes,
                             skill_trigger)
VALUES
 ('{STYLE_V1}', 'style', 'Tabs.', 'decision', 'web', '{{}}', false, NULL, '', '', '',
  'writer-bot', repeat('1', 64), 'indexed', '{T0}', '{T0}', NULL, {ALPHA}, 3, 0, '{T0}', NULL, 1, NULL),
 ('{STYLE_V2}', 'style', 'Spaces, four.', 'decision', 'web', '{{"tags": ["format"]}}', false, NULL, '',
  'team vote', 'hard', 'writer-bot', repeat('2', 64), 'indexed', '{T1}', '{T1}', '{STYLE_V1}', {ALPHA},
  0, 1, NULL, NULL, 0, NULL),
 ('{STYLE_V3}', 'style', 'Spaces, four; tabs in Makefiles.', 'decision', 'web', '{{"tags": ["format"]}}',
  true, NULL, '', 'Makefiles need tabs', 'soft', 'ada', repeat('3', 64), 'indexed', '{T2}', '{T2}',
  '{STYLE_V2}', {ALPHA}, 7, 0, '{T2}', NULL, 2, NULL),
 ('{FORGOTTEN}', 'old-host', 'The database lives on db1.', 'context', '', '{{}}', false, '{T1}', 'ada',
  '', '', 'writer-bot', repeat('4', 64), 'indexed', '{T0}', '{T1}', NULL, {ALPHA}, 0, 0, NULL, NULL, 0, NULL),
 ('{RESTORED}', 'old-host', 'The database lives on db1.', 'historical', '', '{{}}', true, NULL, '',
  '', '', 'ada', repeat('4', 64), 'pending', '{T2}', '{T2}', NULL, {ALPHA}, 0, 0, NULL, '{FORGOTTEN}', 0,
  NULL),
 ('{BRAVO_SKILL}', 'deploy', 'Run make deploy from main.', 'lesson', 'ops', '{{"source": "runbook"}}',
  true, NULL, '', '', '', 'bravo-bot', repeat('5', 64), 'failed', '{T0}', '{T0}', NULL, {BRAVO}, 1, 0,
  NULL, NULL, 0, '{{"name": "deploy", "when": "shipping"}}');

INSERT INTO memories_annotation (id, note, created_by, created_at, memory_id, team_id)
VALUES ('{uuid.UUID(int=201)}', 'Checked against the linter config.', 'ada', '{T2}', '{STYLE_V3}', {ALPHA});

INSERT INTO search_chunk (id, chunk_index, text, token_count, content_hash, created_at, memory_id, team_id)
VALUES (1, 0, 'Spaces, four; tabs in Makefiles.', 9, repeat('3', 64), '{T2}', '{STYLE_V3}', {ALPHA}),
       (2, 0, 'Run make deploy from main.', 7, repeat('5', 64), '{T0}', '{BRAVO_SKILL}', {BRAVO});

INSERT INTO search_chunkembedding (id, model, embedding, chunk_id, team_id)
VALUES (1, 'all-MiniLM-L6-v2-onnx-int8', '{EMBEDDING}', 1, {ALPHA});

INSERT INTO teams_agentsession (id, agent, source, project, cwd, pid, host, current_task, started_at,
                                last_heartbeat_at, ended_at, end_reason, team_id, token_id)
VALUES ('{uuid.UUID(int=301)}', 'claude-code', 'hook', 'web', '/srv/web', 4242, 'laptop',
        'Fixing the login form', '{T1}', '{T2}', NULL, '', {ALPHA}, 1),
       ('{uuid.UUID(int=302)}', 'codex', 'cli', 'web', '/srv/web', NULL, 'ci', '', '{T0}', '{T0}',
        '{T1}', 'ended', {ALPHA}, 2),
       ('{uuid.UUID(int=303)}', 'claude-code', '', 'ops', '', 77, '', 'Deploying', '{T0}', '{T0}',
        '{T1}', 'expired', {BRAVO}, NULL);

INSERT INTO dashboard_auditevent (id, actor, action, target, created_at, team_id)
VALUES (1, 'ada', 'token.create', 'writer-bot', '{T0}', {ALPHA}),
       (2, 'ada', 'vault.reveal', 'api-key', '{T1}', {ALPHA}),
       (3, 'ada', 'token.revoke', 'retired-bot', '{T1}', {ALPHA}),
       (4, 'bob', 'member.add', 'bob', '{T0}', {BRAVO});
"""  # noqa: S608 (built from this module's constants only)


IDENTITY_TABLES = (
    "auth_user",
    "teams_team",
    "teams_membership",
    "teams_agenttoken",
    "teams_vaultentry",
    "search_chunk",
    "search_chunkembedding",
    "dashboard_auditevent",
)


def _connect(database: str, *, role: str = APP_ROLE, **options: Any) -> psycopg.Connection[Any]:
    """A connection logged in as the service logs in as `role`: the application role
    (row-level security applies), the operator (sees every team) or the owner, which
    creates databases and owns their tables."""
    return connect_as(role, dbname=database, **options)


def _bypass_old_row_security(conn: psycopg.Connection[Any]) -> None:
    # The old schema's policies let a setting through (teams.0008_roles ends that).
    # Session-level, which is fine in a scratch database nothing else uses.
    conn.execute("SELECT set_config('memoryhub.bypass', 'on', false)")


@contextmanager
def _scratch_database(purpose: str) -> Iterator[str]:
    name = f"memoryhub_{purpose}_{uuid.uuid4().hex[:12]}"
    with _connect("postgres", role=OWNER_ROLE, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield name
    finally:
        with _connect("postgres", role=OWNER_ROLE, autocommit=True) as admin:
            # A session of the application role that has just disconnected (a
            # manage.py child that exited) may still be ending; FORCE would have to
            # terminate it, which the owner role may not do. Wait for it first.
            deadline = time.monotonic() + SESSIONS_END_SECONDS
            while time.monotonic() < deadline and admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = %s", [name]
            ).fetchone() != (0,):
                time.sleep(0.1)
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def _manage(database: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    """Run today's manage.py against `database`, in a process of its own."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "memoryhub.settings",
        "MEMORYHUB_DATA_DIR": str(settings.DATA_DIR),
        "MEMORYHUB_DATABASE_NAME": database,
    }
    for variable in ("DATABASE_URL", "OPERATOR_DATABASE_URL"):
        if env.get(variable):
            # A run against a server of its own: the scratch database lives there, and
            # the server's own database must never be the one migrated here.
            env[variable] = urlsplit(env[variable])._replace(path=f"/{database}").geturl()
    return subprocess.run(  # noqa: S603
        [sys.executable, "manage.py", *arguments],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=MIGRATE_TIMEOUT_SECONDS,
    )


def _migrate(database: str) -> None:
    result = _manage(database, "migrate", "--noinput")
    # The end of the output names the migration that failed and why.
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]


def _load_old_schema(database: str) -> None:
    dump = OLD_SCHEMA.read_text()
    # psycopg runs SQL only; a psql meta-command left in the fixture would be a syntax
    # error half-way through, so say what is wrong up front.
    meta_commands = [line for line in dump.splitlines() if line.startswith("\\")]
    assert not meta_commands, f"{OLD_SCHEMA.name} holds psql meta-commands: {meta_commands}"
    # pg_dump's preamble empties search_path for the session: this connection is closed after.
    with _connect(database, role=OWNER_ROLE) as conn:
        conn.execute(dump)  # type: ignore[arg-type]  # a checked-in file, not user input
    with _connect(database, role=OWNER_ROLE) as conn:
        _bypass_old_row_security(conn)
        conn.execute(OLD_ROWS)  # type: ignore[arg-type]
        # The rows give their ids so that they can refer to each other; move the identity
        # sequences past them, where the old code's own inserts would have left them.
        for table in IDENTITY_TABLES:
            conn.execute(
                sql.SQL(
                    "SELECT setval(pg_get_serial_sequence({name}, 'id'), (SELECT max(id) FROM {table}))"
                ).format(name=sql.Literal(table), table=sql.Identifier(table))
            )


def _tables(conn: psycopg.Connection[Any]) -> set[str]:
    rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'").fetchall()
    return {table for (table,) in rows}


def _columns(conn: psycopg.Connection[Any], table: str) -> list[str]:
    rows = conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = 'public' "
        "AND table_name = %s ORDER BY ordinal_position",
        [table],
    ).fetchall()
    return [column for (column,) in rows]


def _rows(conn: psycopg.Connection[Any], table: str, columns: list[str]) -> list[dict[str, Any]]:
    """Every row of `table` as JSON values, limited to `columns` (a later migration may add
    columns; the old ones must keep their values), in a stable order."""
    query = sql.SQL("SELECT to_jsonb(t) FROM {} AS t").format(sql.Identifier(table))
    rows = [{column: row[column] for column in columns} for (row,) in conn.execute(query)]
    return sorted(rows, key=lambda row: json.dumps(row, sort_keys=True))


def _row_security(conn: psycopg.Connection[Any]) -> dict[str, tuple[bool, bool, list[tuple[str, ...]]]]:
    """Per public table: RLS enabled, forced, and its policies (name, command, USING, CHECK)."""
    tables = conn.execute(
        "SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind = 'r'"
    ).fetchall()
    policies: dict[str, list[tuple[str, ...]]] = {}
    for table, name, command, using, check in conn.execute(
        "SELECT tablename, policyname, cmd, qual, with_check FROM pg_policies WHERE schemaname = 'public'"
    ):
        policies.setdefault(table, []).append((name, command, using, check))
    return {
        table: (enabled, forced, sorted(policies.get(table, [])))
        for table, enabled, forced in tables
        if enabled or forced or table in policies
    }


# Tables of personal entries (docs/tenancy.md, "Personal entries"): the team's policy and,
# restrictive, `personal_rows`.
PERSONAL_TABLES = {
    "memories_memory",
    "memories_fact",
    "memories_conversation",
    "memories_conversationline",
    "search_conversationchunk",
}


def _team_part(state: tuple[bool, bool, list[tuple[str, ...]]]) -> tuple[bool, bool, list[tuple[str, ...]]]:
    """A table's row security without the personal entries' policy."""
    enabled, forced, policies = state
    return enabled, forced, [policy for policy in policies if policy[0] != "personal_rows"]


def _shape(conn: psycopg.Connection[Any]) -> dict[str, list[tuple[Any, ...]]]:
    """Columns, constraints and indexes of the public tables, without the names PostgreSQL
    or Django generated (they keep the old table's name after a rename)."""
    columns = conn.execute(
        "SELECT table_name, column_name, data_type, character_maximum_length, is_nullable, "
        "column_default, is_identity, generation_expression FROM information_schema.columns "
        "WHERE table_schema = 'public'"
    ).fetchall()
    # A CHECK loaded from a dump comes back spelled differently (pg_dump's `x = ANY
    # ((ARRAY['a'::varchar])::text[])` reparses as per-element casts), the same check in
    # other words: checks compare by the columns they cover, the rest by definition.
    constraints = conn.execute(
        "SELECT c.conrelid::regclass::text, c.contype, CASE WHEN c.contype = 'c' THEN "
        "(SELECT string_agg(a.attname, ',' ORDER BY a.attname) FROM pg_attribute a "
        "WHERE a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey)) "
        "ELSE pg_get_constraintdef(c.oid) END FROM pg_constraint c "
        "JOIN pg_namespace n ON n.oid = c.connamespace WHERE n.nspname = 'public' AND c.conrelid <> 0"
    ).fetchall()
    indexes = conn.execute(
        r"SELECT tablename, regexp_replace(indexdef, '^(CREATE (UNIQUE )?INDEX )\S+', '\1') "
        "FROM pg_indexes WHERE schemaname = 'public'"
    ).fetchall()
    return {"columns": sorted(columns), "constraints": sorted(constraints), "indexes": sorted(indexes)}


def _team_ids_seen_as(conn: psycopg.Connection[Any], team: int | None, table: str) -> list[int]:
    """The team_id of every row `table` shows to a connection scoped to `team` (no bypass)."""
    with conn.transaction():
        conn.execute("SELECT set_config('memoryhub.team_id', %s, true)", ["" if team is None else str(team)])
        query = sql.SQL("SELECT team_id FROM {}").format(sql.Identifier(table))
        return sorted(team_id for (team_id,) in conn.execute(query))


@pytest.fixture(scope="module")
def fresh_database() -> Iterator[str]:
    """An empty database migrated with today's code: what a new installation gets."""
    with _scratch_database("fresh") as database:
        _migrate(database)
        yield database


def test_database_on_the_old_schema_upgrades_keeping_every_row_and_its_isolation(fresh_database: str) -> None:
    with _scratch_database("upgrade") as database:
        _load_old_schema(database)
        with _connect(database, role=OWNER_ROLE) as conn:
            _bypass_old_row_security(conn)
            old_tables = _tables(conn) - FILLED_BY_MIGRATE
            assert set(MOVED_TABLES) <= old_tables
            old_columns = {table: _columns(conn, table) for table in old_tables}
            before = {table: _rows(conn, table, old_columns[table]) for table in old_tables}
            old_security = _row_security(conn)
        assert len(before["teams_agentsession"]) == 3 and len(before["dashboard_auditevent"]) == 4

        _migrate(database)
        check = _manage(database, "migrate", "--check")
        assert check.returncode == 0, f"migrations left unapplied:\n{check.stdout}{check.stderr}"

        with _connect(database, role=OPERATOR_ROLE) as conn:
            tables = _tables(conn)
            assert not set(MOVED_TABLES) & tables, "the old tables are still there next to the new ones"
            for old_table, rows in before.items():
                table = MOVED_TABLES.get(old_table, old_table)
                assert table in tables, f"{old_table} is gone and {table} was not made"
                assert _rows(conn, table, old_columns[old_table]) == rows, f"rows of {old_table} changed"

            # Freshness (memories.0007): every version was last confirmed when it was made.
            (unbackfilled,) = conn.execute(
                "SELECT count(*) FROM memories_memory WHERE last_confirmed_at IS DISTINCT FROM created_at"
            ).fetchone()  # type: ignore[misc]
            assert unbackfilled == 0

            # Row-level security moves with the tables: the same ENABLE + FORCE and policies.
            renamed = {MOVED_TABLES.get(table, table): state for table, state in old_security.items()}
            security = _row_security(conn)
            for table in PERSONAL_TABLES:
                assert [name for name, *_ in security[table][2]] == ["personal_rows", "team_isolation"], table
            security = {table: _team_part(state) for table, state in security.items()}
            team_policy = security["memories_memory"]
            assert not SECURED_SINCE & set(renamed), "secured already before: drop it from SECURED_SINCE"
            for table in SECURED_SINCE:
                assert security.pop(table) == team_policy, f"{table}: not the team policy"
            # Team tables made by later migrations (e.g. freshness's nudges) come with the
            # same policy as every other team table.
            for table in sorted(set(security) - set(renamed)):
                assert table not in old_tables, f"{table}: secured by the upgrade, not in SECURED_SINCE"
                assert security.pop(table) == team_policy, f"{table}: not the team policy"
            assert security == renamed
            for table in MOVED_TABLES.values():
                enabled, forced, policies = renamed[table]
                assert enabled and forced and [name for name, *_ in policies] == ["team_isolation"]

        with _connect(database, autocommit=True) as conn:
            for old_table, table in MOVED_TABLES.items():
                alpha_rows = [row for row in before[old_table] if row["team_id"] == ALPHA]
                assert _team_ids_seen_as(conn, ALPHA, table) == [ALPHA] * len(alpha_rows)
                assert _team_ids_seen_as(conn, BRAVO, table) == [BRAVO]
                assert _team_ids_seen_as(conn, None, table) == []
            with conn.transaction():
                conn.execute("SELECT set_config('memoryhub.team_id', %s, true)", [str(ALPHA)])
                # The identity sequence came along: a new event gets an id after the old ones.
                (new_id,) = conn.execute(
                    "INSERT INTO teams_auditevent (actor, action, target, created_at, team_id) "
                    "VALUES ('ada', 'team.reindex', '', now(), %s) RETURNING id",
                    [ALPHA],
                ).fetchone()  # type: ignore[misc]
                assert new_id > max(row["id"] for row in before["dashboard_auditevent"])
                with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
                    conn.execute(
                        "INSERT INTO agents_agentsession (id, agent, source, project, cwd, host, "
                        "current_task, started_at, last_heartbeat_at, end_reason, team_id) "
                        "VALUES (gen_random_uuid(), 'x', '', '', '', '', '', now(), now(), '', %s)",
                        [BRAVO],
                    )

        # It ends with the roles of today: the application role is a member of no role,
        # and no login of the web or the workers may change or erase the audit trail,
        # whose rows (of both teams) are all still there.
        for role in (APP_ROLE, OPERATOR_ROLE):
            with _connect(database, role=role) as conn:
                if role == APP_ROLE:
                    with pytest.raises(psycopg.errors.InsufficientPrivilege):
                        conn.execute(f"SET ROLE {OPERATOR_ROLE}")
                    conn.rollback()
                for statement in ("UPDATE teams_auditevent SET actor = 'x'", "DELETE FROM teams_auditevent",
                                  "TRUNCATE teams_auditevent"):  # fmt: skip
                    with pytest.raises(psycopg.errors.InsufficientPrivilege):
                        conn.execute(statement)
                    conn.rollback()
        with _connect(database, role=OPERATOR_ROLE) as conn:
            events = conn.execute("SELECT count(*) FROM teams_auditevent").fetchone()
            assert events == (len(before["dashboard_auditevent"]) + 1,)  # and the one added above

        # An upgraded installation and a fresh one end up with the same tables.
        with _connect(database) as upgraded, _connect(fresh_database) as fresh:
            upgraded_shape, fresh_shape = _shape(upgraded), _shape(fresh)
            for part, items in upgraded_shape.items():
                only_upgraded = sorted(set(items) - set(fresh_shape[part]))
                only_fresh = sorted(set(fresh_shape[part]) - set(items))
                assert items == fresh_shape[part], (
                    f"{part} only after the upgrade: {only_upgraded}; only fresh: {only_fresh}"
                )
            assert _row_security(upgraded) == _row_security(fresh)


def test_fresh_database_gets_the_moved_tables_under_row_level_security(fresh_database: str) -> None:
    with _connect(fresh_database) as conn:
        tables = _tables(conn)
        assert set(MOVED_TABLES.values()) <= tables
        assert not set(MOVED_TABLES) & tables
        security = _row_security(conn)
        for table in MOVED_TABLES.values():
            # The same policy as every other team table, e.g. the memories' (theirs but
            # for the personal entries' own).
            assert security[table] == _team_part(security["memories_memory"])
            enabled, forced, policies = security[table]
            assert enabled and forced and [name for name, *_ in policies] == ["team_isolation"]

    with (
        _connect(fresh_database, role=OPERATOR_ROLE, autocommit=True) as conn,
        conn.transaction(force_rollback=True),
    ):
        conn.execute(
            "INSERT INTO teams_team (id, slug, name, injection_max_entries, injection_max_tokens, "
            "decay_half_life_days, hybrid_vector_weight, hybrid_keyword_weight, embedding_profile, "
            "created_at, dedup_threshold) VALUES "
            "(%(alpha)s, 'alpha', 'Alpha', 10, 1000, 30, 0.5, 0.5, 'default', now(), 0.9), "
            "(%(bravo)s, 'bravo', 'Bravo', 10, 1000, 30, 0.5, 0.5, 'default', now(), 0.9)",
            {"alpha": ALPHA, "bravo": BRAVO},
        )
        conn.execute(
            "INSERT INTO agents_agentsession (id, agent, source, project, cwd, host, current_task, "
            "started_at, last_heartbeat_at, end_reason, team_id) "
            "SELECT gen_random_uuid(), 'bot', '', '', '', '', '', now(), now(), '', team "
            "FROM unnest(ARRAY[%(alpha)s, %(bravo)s]) AS team",
            {"alpha": ALPHA, "bravo": BRAVO},
        )
        conn.execute(
            "INSERT INTO teams_auditevent (actor, action, target, created_at, team_id) "
            "SELECT 'ada', 'member.add', '', now(), team FROM unnest(ARRAY[%(alpha)s, %(bravo)s]) AS team",
            {"alpha": ALPHA, "bravo": BRAVO},
        )
        # Narrowed to the application role, as a team's scope in the bypass does.
        conn.execute(f"SET LOCAL ROLE {APP_ROLE}")
        for table in MOVED_TABLES.values():
            assert _team_ids_seen_as(conn, ALPHA, table) == [ALPHA]
            assert _team_ids_seen_as(conn, None, table) == []


def test_job_runs_keep_their_rows_when_their_table_moves_down_to_teams() -> None:
    """The record of beat job runs moved from freshness to teams (teams 0013): an
    installation that has runs on record keeps them, with their ids, and the services'
    logins can still write and trim them."""
    with _scratch_database("jobruns") as database:
        before_move = _manage(database, "migrate", "freshness", "0006", "--noinput")
        assert before_move.returncode == 0, (before_move.stdout + before_move.stderr)[-4000:]
        with _connect(database, role=OWNER_ROLE) as conn:
            assert "teams_jobrun" not in _tables(conn)
            conn.execute(
                "INSERT INTO freshness_jobrun (job, started_at, finished_at, succeeded, outcome, error) VALUES "
                "('freshness.mark_due', %(t0)s, %(t0)s, true, '{\"checked\": 4}', ''), "
                "('search.reconcile_index_states', %(t1)s, %(t1)s, false, '{}', 'OperationalError')",
                {"t0": T0, "t1": T1},
            )
            before = _rows(conn, "freshness_jobrun", _columns(conn, "freshness_jobrun"))

        _migrate(database)

        with _connect(database, role=APP_ROLE) as conn:
            tables = _tables(conn)
            assert "freshness_jobrun" not in tables
            assert _rows(conn, "teams_jobrun", _columns(conn, "teams_jobrun")) == before
            (new_id,) = conn.execute(
                "INSERT INTO teams_jobrun (job, started_at, outcome, error) "
                "VALUES ('agents.expire_sessions', now(), '{}', '') RETURNING id"
            ).fetchone()  # type: ignore[misc]
            assert new_id > max(row["id"] for row in before)
            conn.execute("DELETE FROM teams_jobrun WHERE job = 'freshness.mark_due'")
            assert "teams_jobrun" not in _row_security(conn)  # counts only: not team-scoped
