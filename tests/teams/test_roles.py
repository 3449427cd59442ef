"""The database roles (docs/decisions.md, "Database roles"): the service's role owns
nothing and cannot switch row-level security off, no setting it can set bypasses the
policies, and only the operator role's BYPASSRLS, entered through the audited bypass
scope, sees every team; a team's scope nested inside it sees only that team."""

from __future__ import annotations

import psycopg
import pytest
from django.db import DatabaseError, connection, transaction
from django.db.models import Model

from search import vector_index
from teams.models import Team
from teams.roles import APP_ROLE, OPERATOR_ROLE
from teams.scope import dangerously_bypass_team_scope, own_memberships_scope, team_scope
from tests.teams.test_isolation import TEAM_SCOPED_MODELS, fill, raw_team_ids, table_of, team_column


def test_the_service_logs_in_as_the_application_role_which_owns_no_table(db: None) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_user, session_user")
        assert cursor.fetchone() == (APP_ROLE, APP_ROLE)
        cursor.execute(
            "SELECT rolsuper, rolbypassrls, rolcreaterole FROM pg_roles WHERE rolname = current_user"
        )
        assert cursor.fetchone() == (False, False, False)
        cursor.execute(
            "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'public' AND pg_has_role(current_user, c.relowner, 'USAGE')"
        )
        assert cursor.fetchone() == (0,), "the application role owns (or inherits) a table"
        cursor.execute("SELECT pg_has_role(current_user, %s, 'USAGE')", [OPERATOR_ROLE])
        assert cursor.fetchone() == (False,), "the operator role's BYPASSRLS must not be inherited"


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
