"""The database roles (docs/tenancy.md, "Database roles"): the service's role owns
nothing and cannot switch row-level security off, no setting it can set bypasses the
policies, and only the operator role's BYPASSRLS, entered through the audited bypass
scope, sees every team; a team's scope nested inside it sees only that team."""

from __future__ import annotations

import psycopg
import pytest
from django.db import DatabaseError, connection, transaction
from django.db.models import Model
from django.test.utils import CaptureQueriesContext

from search import vector_index
from teams.models import Team
from teams.roles import APP_ROLE, OPERATOR_ROLE, OWNER_ROLE
from teams.scope import dangerously_bypass_team_scope, own_memberships_scope, team_scope
from tests.db_roles import connect_as, service_login
from tests.teams.test_isolation import TEAM_SCOPED_MODELS, fill, raw_team_ids, table_of, team_column


def test_the_service_logs_in_as_the_application_role_which_owns_no_table(db: None) -> None:
    assert service_login(APP_ROLE)[0] == APP_ROLE
    with connect_as(APP_ROLE) as conn:
        assert conn.execute("SELECT current_user, session_user").fetchone() == (APP_ROLE, APP_ROLE)
        row = conn.execute(
            "SELECT rolsuper, rolbypassrls, rolcreaterole FROM pg_roles WHERE rolname = current_user"
        ).fetchone()
        assert row == (False, False, False)
        row = conn.execute(
            "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'public' AND pg_has_role(current_user, c.relowner, 'USAGE')"
        ).fetchone()
        assert row == (0,), "the application role owns (or inherits) a table"
    # The test process's own connection runs as the application role too, outside the bypass.
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_user")
        assert cursor.fetchone() == (APP_ROLE,)


def test_the_operator_logs_in_as_itself_and_may_narrow_to_the_application_role_only(db: None) -> None:
    assert service_login(OPERATOR_ROLE)[0] == OPERATOR_ROLE
    with connect_as(OPERATOR_ROLE) as conn:
        row = conn.execute("SELECT rolbypassrls, rolsuper FROM pg_roles WHERE rolname = current_user")
        assert row.fetchone() == (True, False)
        conn.execute(f"SET ROLE {APP_ROLE}")
        conn.execute("RESET ROLE")
        for statement in (f"SET ROLE {OWNER_ROLE}", f"SET SESSION AUTHORIZATION {OWNER_ROLE}"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)
            conn.rollback()


@pytest.mark.parametrize(
    "statement",
    [
        "ALTER TABLE memories_memory NO FORCE ROW LEVEL SECURITY",
        "ALTER TABLE memories_memory DISABLE ROW LEVEL SECURITY",
        "DROP POLICY team_isolation ON memories_memory",
        "CREATE OR REPLACE FUNCTION memoryhub_bypass() RETURNS boolean LANGUAGE sql AS $$ SELECT true $$",
        "CREATE OR REPLACE FUNCTION memoryhub_current_team() RETURNS bigint LANGUAGE sql AS $$ SELECT 1 $$",
    ],
)
def test_the_application_role_cannot_switch_row_level_security_off(db: None, statement: str) -> None:
    with pytest.raises(DatabaseError) as raised, transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(statement)
    assert isinstance(raised.value.__cause__, psycopg.errors.InsufficientPrivilege)


@pytest.mark.parametrize("model", TEAM_SCOPED_MODELS, ids=table_of)
def test_the_old_bypass_setting_inside_a_team_scope_shows_no_other_team(
    team: Team, other_team: Team, model: type[Model]
) -> None:
    fill(team, "alpha")
    fill(other_team, "bravo")
    table, column = table_of(model), team_column(model)

    with team_scope(team.id), connection.cursor() as cursor:
        cursor.execute("SELECT set_config('memoryhub.bypass', 'on', true)")
        assert raw_team_ids(table, column) == {team.id}
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT set_config('memoryhub.bypass', 'on', true)")
        assert raw_team_ids(table, column) == set()


@pytest.mark.parametrize("model", TEAM_SCOPED_MODELS, ids=table_of)
def test_a_team_scope_nested_in_the_bypass_sees_only_its_team(
    team: Team, other_team: Team, model: type[Model]
) -> None:
    fill(team, "alpha")
    fill(other_team, "bravo")
    table, column = table_of(model), team_column(model)

    with dangerously_bypass_team_scope(reason="shutdown action", actor="test"):
        assert raw_team_ids(table, column) == {team.id, other_team.id}
        with team_scope(other_team.id):
            assert raw_team_ids(table, column) == {other_team.id}
            with team_scope(team.id):
                assert raw_team_ids(table, column) == {team.id}
            assert raw_team_ids(table, column) == {other_team.id}
        # Leaving the inner scope gives the operator its view back.
        assert raw_team_ids(table, column) == {team.id, other_team.id}
    with transaction.atomic():
        assert raw_team_ids(table, column) == set()


def test_the_own_memberships_scope_nested_in_the_bypass_sees_only_that_persons_rows(
    team: Team, other_team: Team
) -> None:
    fill(team, "alpha")
    fill(other_team, "bravo")
    with dangerously_bypass_team_scope(reason="team picker", actor="test"):
        assert raw_team_ids("teams_membership") == {team.id, other_team.id}
        with connection.cursor() as cursor:
            cursor.execute("SELECT user_id FROM teams_membership WHERE team_id = %s", [team.id])
            (alpha_person,) = cursor.fetchone()
        with own_memberships_scope(alpha_person):
            assert raw_team_ids("teams_membership") == {team.id}
            assert raw_team_ids("memories_memory") == set()


def test_the_bypass_runs_as_the_operator_role_and_ends_with_its_transaction(db: None) -> None:
    with dangerously_bypass_team_scope(reason="role check", actor="test"), connection.cursor() as cursor:
        cursor.execute("SELECT current_user")
        assert cursor.fetchone() == (OPERATOR_ROLE,)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT current_user")
        assert cursor.fetchone() == (APP_ROLE,)


def test_the_application_role_indexes_a_new_embedding_model_through_the_owners_function(db: None) -> None:
    model = "roles-test-model"
    with transaction.atomic():
        vector_index.ensure_index(model, 8)
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT indexdef FROM pg_indexes WHERE indexname = %s", [vector_index.index_name(model)]
            )
            (definition,) = cursor.fetchone()
    assert "hnsw" in definition and "vector(8)" in definition and "'roles-test-model'" in definition


# What a statement run on the application's connection (a SQL injection, a bug) could try
# in order to leave its team: every one is refused by PostgreSQL itself.
ESCALATIONS = [
    f"SET ROLE {OPERATOR_ROLE}",
    f"SET SESSION ROLE {OPERATOR_ROLE}",
    f"SELECT set_config('role', '{OPERATOR_ROLE}', false)",
    f"SET SESSION AUTHORIZATION {OPERATOR_ROLE}",
    f"SET ROLE {OWNER_ROLE}",
    f"GRANT {OPERATOR_ROLE} TO {APP_ROLE}",
    f"ALTER ROLE {APP_ROLE} BYPASSRLS",
    f"CREATE ROLE memoryhub_escape LOGIN BYPASSRLS IN ROLE {OPERATOR_ROLE}",
]


@pytest.mark.parametrize("statement", ESCALATIONS)
def test_the_application_login_cannot_become_the_operator(db: None, statement: str) -> None:
    with connect_as(APP_ROLE) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(statement)
        conn.rollback()
        row = conn.execute("SELECT current_user, session_user, current_setting('role')").fetchone()
        assert row == (APP_ROLE, APP_ROLE, "none")


def test_the_application_login_is_a_member_of_no_role(db: None) -> None:
    with connect_as(APP_ROLE) as conn:
        granted = conn.execute(
            "SELECT roleid::regrole::text FROM pg_auth_members WHERE member = %s::regrole", [APP_ROLE]
        ).fetchall()
        assert granted == []
        row = conn.execute("SELECT pg_has_role(%s, %s, 'SET')", [APP_ROLE, OPERATOR_ROLE]).fetchone()
        assert row == (False,)


AUDIT_CHANGES = [
    "UPDATE teams_auditevent SET actor = 'someone else'",
    "DELETE FROM teams_auditevent",
    "TRUNCATE teams_auditevent",
]


@pytest.mark.parametrize("statement", AUDIT_CHANGES)
@pytest.mark.parametrize("role", [APP_ROLE, OPERATOR_ROLE])
def test_no_login_of_the_web_or_the_workers_may_change_or_erase_the_audit_trail(
    db: None, role: str, statement: str
) -> None:
    with connect_as(role) as conn:
        row = conn.execute("SELECT has_table_privilege('teams_auditevent', 'INSERT')").fetchone()
        assert row == (True,), "the trail must stay writable: every surface appends to it"
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(statement)


@pytest.mark.django_db(transaction=True)
def test_a_team_scope_that_opens_its_transaction_leaves_its_settings_to_its_end(team: Team) -> None:
    def binding() -> tuple[str, str, str]:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT current_user, coalesce(current_setting('memoryhub.team_id', true), ''),"
                " coalesce(current_setting('memoryhub.viewer', true), '')"
            )
            row: tuple[str, str, str] = cursor.fetchone()
            return row

    before = binding()
    with CaptureQueriesContext(connection) as sent, team_scope(team.id):
        inside = binding()

    assert inside == (APP_ROLE, str(team.id), "*")
    # BEGIN, the binding, the block's statement, COMMIT: no statement to undo the binding.
    assert [query["sql"].split()[0] for query in sent.captured_queries] == [
        "BEGIN",
        "SELECT",
        "SELECT",
        "COMMIT",
    ]
    assert binding() == before  # the COMMIT ended the transaction's settings

    with transaction.atomic():
        with team_scope(team.id):
            assert binding() == inside
        assert binding() == before  # nested: put back at once, the transaction goes on
