"""The second lock: row-level security bites for the role the service really uses.

The tables under test are derived from the models, not listed by hand: every model of
every installed app with a foreign key to Team is team-scoped, so a new one without
row-level security fails here."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model
from django.db import connection, models, transaction

from agents.sessions import boot_session
from freshness.models import AnchorCheck, AnchorCheckSource, Draft, Nudge, NudgeKind
from memories import writes
from memories.conversations.services import Line, store_conversation
from memories.facts.services import set_fact
from memories.feedback import annotate_memory
from search.models import Chunk, ChunkEmbedding, ConversationChunk, EmbeddingCache
from teams import services
from teams.models import Membership, Team
from teams.scope import dangerously_bypass_team_scope, team_scope, token_lookup_scope
from tests.conftest import operator_view


def team_foreign_key(model: type[models.Model]) -> models.ForeignKey | None:
    for field in model._meta.concrete_fields:
        if isinstance(field, models.ForeignKey) and field.related_model is Team:
            return field
    return None


def team_scoped_models() -> list[type[models.Model]]:
    """Every model, across all installed apps, that holds rows of one team."""
    found = [model for model in apps.get_models() if team_foreign_key(model) is not None]
    return sorted(found, key=lambda model: model._meta.db_table)


TEAM_SCOPED_MODELS = team_scoped_models()
# The tables that exist today: a floor, so that a derivation matching nothing (and
# so testing nothing) fails instead of passing.
KNOWN_TEAM_TABLES = {
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
    "search_keywordstat",
    "teams_agenttoken",
    "teams_auditevent",
    "teams_membership",
    "teams_vaultentry",
}


def table_of(model: type[models.Model]) -> str:
    return model._meta.db_table


def team_column(model: type[models.Model]) -> str:
    field = team_foreign_key(model)
    assert field is not None
    return field.column


def fill(team: Team, label: str) -> None:
    """One row (at least) of every team-scoped table for `team`, through the services
    that write them where there is one. The search index rows are written directly:
    their values do not matter here, only whose they are."""
    person = get_user_model().objects.create_user(f"{label}-person")
    with team_scope(team.id):
        Membership.objects.create(team=team, user=person, role=Membership.Role.MEMBER)
        memory = writes.save_memory(
            team=team, key=f"{label}-key", content=f"{label} note", updated_by=label
        ).memory
        annotate_memory(team=team, key=f"{label}-key", note=f"{label} annotation", created_by=label)
        writes.confirm_memory(team=team, key=f"{label}-key", confirmed_by=label)
        set_fact(team=team, entity=f"{label}-entity", key="provider", value=f"{label} value", actor=label)
        conversation = store_conversation(team=team, lines=[Line("user", f"{label} said")], actor=label)
        ConversationChunk.objects.create(
            team=team,
            conversation=conversation,
            first_line=1,
            last_line=1,
            text=f"user: {label} said",
            content_hash=memory.content_hash,
        )
        Nudge.objects.create(team=team, kind=NudgeKind.DUE, memory=memory, message=f"{label} nudge")
        AnchorCheck.objects.create(
            team=team, memory=memory, source=AnchorCheckSource.SERVER, checked_at=memory.created_at, ok=True
        )
        Draft.objects.create(
            team=team, type="lesson", key=f"{label}-draft", content=f"{label} draft", extractor="test"
        )
        # Writes the vault entry and its audit event.
        services.set_vault_entry(
            team=team, key=f"{label}-setting", value=f"{label}-value", is_secret=False, actor=label
        )
        boot_session(team=team, token=None, agent=f"{label}-agent")
        chunk = Chunk.objects.create(
            team=team,
            memory=memory,
            chunk_index=0,
            text=f"{label} note",
            token_count=2,
            content_hash=memory.content_hash,
        )
        ChunkEmbedding.objects.create(
            team=team, chunk=chunk, model="isolation-test", embedding=[0.1, 0.2, 0.3]
        )
        # search_keywordstat: its rows are written by the chunk's insert (a trigger).
        EmbeddingCache.objects.create(
            team=team,
            content_hash=memory.content_hash,
            model="isolation-test",
            dimensions=3,
            embedding=[0.1, 0.2, 0.3],
        )
    services.create_token(team=team, name=f"{label}-bot", scopes=["read"], actor="test")


def raw_team_ids(table: str, column: str = "team_id") -> set[int]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {column} FROM {table}")  # noqa: S608 (names from the models)
        return {row[0] for row in cursor.fetchall()}


def test_service_role_is_neither_superuser_nor_bypassrls(db: None) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user")
        assert cursor.fetchone() == (False, False)


def test_the_team_scoped_tables_are_derived_from_every_installed_app() -> None:
    assert {table_of(model) for model in TEAM_SCOPED_MODELS} >= KNOWN_TEAM_TABLES


@pytest.mark.parametrize("model", TEAM_SCOPED_MODELS, ids=table_of)
def test_every_team_scoped_table_forces_row_level_security_with_a_team_policy(
    db: None, model: type[models.Model]
) -> None:
    table, column = table_of(model), team_column(model)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relrowsecurity, relforcerowsecurity FROM pg_class WHERE oid = %s::regclass", [table]
        )
        assert cursor.fetchone() == (True, True), f"{table} needs ENABLE and FORCE ROW LEVEL SECURITY"
        cursor.execute(
            "SELECT policyname, cmd, qual, with_check FROM pg_policies"
            " WHERE schemaname = current_schema() AND tablename = %s AND permissive = 'PERMISSIVE'",
            [table],
        )
        policies = cursor.fetchall()
        cursor.execute(
            "SELECT policyname, cmd, qual FROM pg_policies"
            " WHERE schemaname = current_schema() AND tablename = %s AND permissive = 'RESTRICTIVE'",
            [table],
        )
        restrictive = cursor.fetchall()
    # Only personal entries' tables narrow the team's policy, and only by their owner.
    has_owner = any(field.name == "owner" for field in model._meta.fields)
    assert [(name, command) for name, command, _ in restrictive] == (
        [("personal_rows", "ALL")] if has_owner else []
    )
    assert all("owner_id IS NULL" in using for _, _, using in restrictive)
    assert len(policies) == 1, f"{table} needs exactly one policy, has {policies}"
    [(name, command, using, with_check)] = policies
    # One policy for every command, keyed on the team of the row for reads and writes.
    assert (name, command) == ("team_isolation", "ALL")
    assert f"({column} = memoryhub_current_team())" in using
    assert f"({column} = memoryhub_current_team())" in with_check


@pytest.mark.parametrize("model", TEAM_SCOPED_MODELS, ids=table_of)
def test_inside_one_teams_scope_a_select_returns_none_of_another_teams_rows(
    team: Team, other_team: Team, model: type[models.Model]
) -> None:
    fill(team, "alpha")
    fill(other_team, "bravo")
    table, column = table_of(model), team_column(model)
    with operator_view():
        assert raw_team_ids(table, column) == {team.id, other_team.id}, (
            f"fill() wrote no row of {table} for both teams: add one, or this check proves nothing"
        )

    with team_scope(team.id), connection.cursor() as cursor:
        assert raw_team_ids(table, column) == {team.id}
        cursor.execute(f"SELECT count(*) FROM {table} WHERE {column} = %s", [other_team.id])  # noqa: S608
        assert cursor.fetchone()[0] == 0


def test_memory_content_of_another_team_is_not_readable_inside_a_teams_scope(
    team: Team, other_team: Team
) -> None:
    fill(team, "alpha")
    fill(other_team, "bravo")

    with team_scope(team.id), connection.cursor() as cursor:
        cursor.execute("SELECT content FROM memories_memory")
        assert [row[0] for row in cursor.fetchall()] == ["alpha note"]


def test_no_scope_sees_nothing(team: Team, other_team: Team) -> None:
    fill(team, "alpha")
    fill(other_team, "bravo")

    with transaction.atomic():
        for model in TEAM_SCOPED_MODELS:
            assert raw_team_ids(table_of(model), team_column(model)) == set(), table_of(model)


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
