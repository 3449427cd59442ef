"""The second lock: row-level security bites for the role the service really uses."""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from memories import services as memory_services
from teams import services
from teams.models import Team
from teams.scope import dangerously_bypass_team_scope, team_scope, token_lookup_scope

TEAM_SCOPED_TABLES = [
    "teams_membership",
    "teams_agenttoken",
    "teams_vaultentry",
    "memories_memory",
]


def fill(team: Team, label: str) -> None:
    with team_scope(team.id):
        memory_services.save_memory(team=team, key=f"{label}-key", content=f"{label} note", updated_by=label)
        services.set_vault_entry(
            team=team, key=f"{label}-setting", value=f"{label}-value", is_secret=False, actor=label
        )
    services.create_token(team=team, name=f"{label}-bot", scopes=["read"], actor="test")


def raw_team_ids(table: str) -> set[int]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT team_id FROM {table}")  # noqa: S608 (fixed table names)
        return {row[0] for row in cursor.fetchall()}


def test_service_role_is_neither_superuser_nor_bypassrls(db: None) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user")
        assert cursor.fetchone() == (False, False)


@pytest.mark.parametrize("table", TEAM_SCOPED_TABLES)
def test_every_team_scoped_table_forces_row_level_security(db: None, table: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT relrowsecurity, relforcerowsecurity FROM pg_class WHERE relname = %s", [table])
        assert cursor.fetchone() == (True, True)
        cursor.execute("SELECT count(*) FROM pg_policies WHERE tablename = %s", [table])
        assert cursor.fetchone()[0] == 1


def test_raw_unscoped_query_inside_team_a_sees_no_row_of_team_b(team: Team, other_team: Team) -> None:
    fill(team, "alpha")
    fill(other_team, "bravo")

    with team_scope(team.id):
        for table in ["teams_agenttoken", "teams_vaultentry", "memories_memory"]:
            assert raw_team_ids(table) == {team.id}, table
        with connection.cursor() as cursor:
            cursor.execute("SELECT content FROM memories_memory")
            assert [row[0] for row in cursor.fetchall()] == ["alpha note"]


def test_no_scope_sees_nothing(team: Team) -> None:
    fill(team, "alpha")

    with transaction.atomic():
        for table in TEAM_SCOPED_TABLES:
            assert raw_team_ids(table) == set(), table


def test_writes_into_another_team_are_refused_by_the_policy(team: Team, other_team: Team) -> None:
    with team_scope(team.id), connection.cursor() as cursor, pytest.raises(Exception) as raised:
        with transaction.atomic():
            cursor.execute(
                "INSERT INTO teams_vaultentry (team_id, key, value, ciphertext, is_secret, updated_by,"
                " created_at, updated_at) VALUES (%s, 'x', 'v', '', false, 't', now(), now())",
                [other_team.id],
            )
    assert "row-level security" in str(raised.value)


def test_updates_cannot_touch_another_teams_rows(team: Team, other_team: Team) -> None:
    fill(other_team, "bravo")

    with team_scope(team.id), connection.cursor() as cursor:
        cursor.execute("UPDATE memories_memory SET content = 'overwritten'")
        assert cursor.rowcount == 0
        cursor.execute("DELETE FROM teams_vaultentry")
        assert cursor.rowcount == 0

    with team_scope(other_team.id), connection.cursor() as cursor:
        cursor.execute("SELECT content FROM memories_memory")
        assert cursor.fetchall() == [("bravo note",)]


def test_team_setting_is_transaction_local(team: Team) -> None:
    fill(team, "alpha")
    with team_scope(team.id):
        assert raw_team_ids("memories_memory") == {team.id}
    # A later transaction on the same connection starts with no team bound.
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('memoryhub.team_id', true)")
        assert cursor.fetchone()[0] in (None, "")
        assert raw_team_ids("memories_memory") == set()


@pytest.mark.django_db(transaction=True)
def test_setting_never_survives_commit_on_a_reused_connection() -> None:
    team = services.create_team(slug="commit-check")
    fill(team, "alpha")
    with team_scope(team.id):
        assert raw_team_ids("memories_memory") == {team.id}
    # Autocommit mode: each statement is its own transaction.
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('memoryhub.team_id', true)")
        assert cursor.fetchone()[0] in (None, "")
        cursor.execute("SELECT count(*) FROM memories_memory")
        assert cursor.fetchone()[0] == 0


def test_nested_scopes_restore_the_outer_team(team: Team, other_team: Team) -> None:
    fill(team, "alpha")
    fill(other_team, "bravo")
    with team_scope(team.id):
        with team_scope(other_team.id):
            assert raw_team_ids("memories_memory") == {other_team.id}
        assert raw_team_ids("memories_memory") == {team.id}


def test_token_lookup_scope_shows_exactly_the_presented_token(team: Team, other_team: Team) -> None:
    mine = services.create_token(team=team, name="mine", scopes=["read"], actor="test")
    services.create_token(team=other_team, name="theirs", scopes=["read"], actor="test")

    with transaction.atomic(), token_lookup_scope(mine.token.token_hash):
        with connection.cursor() as cursor:
            cursor.execute("SELECT name FROM teams_agenttoken")
            assert cursor.fetchall() == [("mine",)]
            cursor.execute("SELECT count(*) FROM memories_memory")
            assert cursor.fetchone()[0] == 0


def test_bypass_scope_sees_every_team_and_is_audited(
    team: Team, other_team: Team, caplog: pytest.LogCaptureFixture
) -> None:
    fill(team, "alpha")
    fill(other_team, "bravo")

    with caplog.at_level("INFO", logger="memoryhub.audit"):
        with dangerously_bypass_team_scope(reason="nightly reconcile", actor="beat"):
            assert raw_team_ids("memories_memory") == {team.id, other_team.id}

    assert "nightly reconcile" in caplog.text and "beat" in caplog.text
    with transaction.atomic():
        assert raw_team_ids("memories_memory") == set()
