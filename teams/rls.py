"""Migration operations that put a team-scoped table under row-level security."""

from __future__ import annotations

from typing import Any

from django.db import migrations

# As first created (teams.0002); teams.0008_roles replaces `memoryhub_bypass`.
CURRENT_TEAM_FUNCTION = """
CREATE OR REPLACE FUNCTION memoryhub_current_team() RETURNS bigint
LANGUAGE sql STABLE AS
$$ SELECT NULLIF(current_setting('memoryhub.team_id', true), '')::bigint $$;

CREATE OR REPLACE FUNCTION memoryhub_bypass() RETURNS boolean
LANGUAGE sql STABLE AS
$$ SELECT coalesce(current_setting('memoryhub.bypass', true), '') = 'on' $$;
"""


# teams.0008_roles: bypassing row-level security is the operator role's BYPASSRLS, not a
# setting the application role could set itself; the policies' bypass clause is now
# always false (the policies keep their text, so no table's policy had to change).
NO_SETTING_BYPASS_FUNCTION = """
CREATE OR REPLACE FUNCTION memoryhub_bypass() RETURNS boolean
LANGUAGE sql IMMUTABLE AS
$$ SELECT false $$;
"""


def create_scope_functions() -> migrations.RunSQL:
    return migrations.RunSQL(
        CURRENT_TEAM_FUNCTION,
        reverse_sql="DROP FUNCTION IF EXISTS memoryhub_current_team(); "
        "DROP FUNCTION IF EXISTS memoryhub_bypass();",
    )


TEAM_CONDITION = "team_id = memoryhub_current_team() OR memoryhub_bypass()"
# The team picker lists the signed-in person's memberships across teams: the membership
# policy also lets through the rows of the user named by the transaction-local
# `memoryhub.user_id` (teams.scope.own_memberships_scope), that person's own rows and
# nothing of anyone else. Writes still need the team's scope (WITH CHECK is unchanged).
OWN_MEMBERSHIPS_CONDITION = "user_id = NULLIF(current_setting('memoryhub.user_id', true), '')::bigint"


def team_isolation_sql(table: str, *, extra_condition: str = "") -> tuple[str, str]:
    """ENABLE + FORCE row-level security (FORCE so that the owning role, which runs the
    migrations, is bound too) with one policy for every command; returns the SQL and
    its reverse."""
    condition = TEAM_CONDITION
    if extra_condition:
        condition = f"{condition} OR ({extra_condition})"
    forward = f"""
        ALTER TABLE {table} ENABLE ROW LEVEL SECURITY;
        ALTER TABLE {table} FORCE ROW LEVEL SECURITY;
        CREATE POLICY team_isolation ON {table} USING ({condition}) WITH CHECK ({condition});
        """
    reverse = f"""
        DROP POLICY IF EXISTS team_isolation ON {table};
        ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY;
        ALTER TABLE {table} DISABLE ROW LEVEL SECURITY;
        """
    return forward, reverse


def enable_team_isolation(table: str, *, extra_condition: str = "") -> migrations.RunSQL:
    forward, reverse = team_isolation_sql(table, extra_condition=extra_condition)
    return migrations.RunSQL(forward, reverse_sql=reverse)


def adopt_team_table(old_table: str, *, app_label: str, model_name: str) -> migrations.RunPython:
    """Move a team-scoped model's table to the app that now owns the model, keeping its
    rows, indexes and row-level security: a rename. The migration declares the model in
    its state first (SeparateDatabaseAndState) and must run after the migration that
    created `old_table` (a dependency, or `run_before` in the higher app); the old app
    drops the model from its state only."""

    def forwards(apps: Any, schema_editor: Any) -> None:
        model = apps.get_model(app_label, model_name)
        schema_editor.alter_db_table(model, old_table, model._meta.db_table)

    def backwards(apps: Any, schema_editor: Any) -> None:
        model = apps.get_model(app_label, model_name)
        schema_editor.alter_db_table(model, model._meta.db_table, old_table)

    return migrations.RunPython(forwards, backwards)


# Personal entries (docs/tenancy.md, "Personal entries"): a row with an owner passes only
# when the transaction's `memoryhub.viewer` (teams.scope.VIEWER_SETTING) is that person's
# id, or `*` (the team's own jobs). A team's token binds `team`, and an unset viewer
# sees none: a path that forgets to say who is asking sees nothing personal.
PERSONAL_FUNCTIONS = """
-- The owner of a name that starts with `@`: the team member whose username runs from the
-- `@` to the first `:` (or the end). A name whose prefix names no member is refused, so
-- a personal row is never stored without its owner.
CREATE OR REPLACE FUNCTION memoryhub_personal_owner() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    personal_name text := to_jsonb(NEW) ->> TG_ARGV[0];
    wanted text;
BEGIN
    IF left(personal_name, 1) <> '@' THEN
        NEW.owner_id := NULL;
        RETURN NEW;
    END IF;
    wanted := split_part(substr(personal_name, 2), ':', 1);
    SELECT u.id INTO NEW.owner_id FROM auth_user u
        JOIN teams_membership m ON m.user_id = u.id AND m.team_id = NEW.team_id
        WHERE u.username = wanted;
    IF NEW.owner_id IS NULL THEN
        RAISE EXCEPTION 'no member % owns %', wanted, personal_name USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;
"""
PERSONAL_FUNCTIONS_REVERSE = "DROP FUNCTION IF EXISTS memoryhub_personal_owner();"
# Written out, not as a function: `owner_id IS NULL` on the column itself is what the
# planner estimates from the column's statistics (through a cast to a function's
# argument type it guessed 1% of the team's rows and gave up the vector index).
PERSONAL_CONDITION = (
    "owner_id IS NULL OR current_setting('memoryhub.viewer', true) = '*'"
    " OR owner_id::text = current_setting('memoryhub.viewer', true)"
)


def enable_personal_rows(table: str, *, name_column: str) -> migrations.RunSQL:
    """A restrictive policy (ANDed with the team's) hiding other people's personal rows,
    and the trigger that sets a row's owner from `name_column`."""
    return migrations.RunSQL(
        f"""
        CREATE POLICY personal_rows ON {table} AS RESTRICTIVE
            USING ({PERSONAL_CONDITION}) WITH CHECK ({PERSONAL_CONDITION});
        CREATE TRIGGER {table}_personal_owner BEFORE INSERT OR UPDATE OF {name_column}, team_id ON {table}
            FOR EACH ROW EXECUTE FUNCTION memoryhub_personal_owner('{name_column}');
        """,
        reverse_sql=f"""
        DROP TRIGGER IF EXISTS {table}_personal_owner ON {table};
        DROP POLICY IF EXISTS personal_rows ON {table};
        """,
    )


# A row with no name to read its owner from: a conversation is its writer's when a person's
# token sent it (`memoryhub.viewer` is their id), the team's otherwise; its lines and
# windows copy the conversation's owner.
WRITER_OWNER_FUNCTIONS = """
CREATE OR REPLACE FUNCTION memoryhub_owner_from_writer() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    viewer text := current_setting('memoryhub.viewer', true);
BEGIN
    NEW.owner_id := CASE WHEN viewer ~ '^[0-9]+$' THEN viewer::integer END;
    RETURN NEW;
END $$;

CREATE OR REPLACE FUNCTION memoryhub_owner_from_conversation() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.owner_id := (SELECT c.owner_id FROM memories_conversation c WHERE c.id = NEW.conversation_id);
    RETURN NEW;
END $$;
"""
WRITER_OWNER_FUNCTIONS_REVERSE = """
DROP FUNCTION IF EXISTS memoryhub_owner_from_writer();
DROP FUNCTION IF EXISTS memoryhub_owner_from_conversation();
"""


def enable_personal_writer_rows(table: str, *, owner_from: str) -> migrations.RunSQL:
    """The `personal_rows` policy on `table`, and the trigger (`memoryhub_owner_from_writer`
    or `memoryhub_owner_from_conversation`) that sets a new row's owner."""
    return migrations.RunSQL(
        f"""
        CREATE POLICY personal_rows ON {table} AS RESTRICTIVE
            USING ({PERSONAL_CONDITION}) WITH CHECK ({PERSONAL_CONDITION});
        CREATE TRIGGER {table}_personal_owner BEFORE INSERT ON {table}
            FOR EACH ROW EXECUTE FUNCTION {owner_from}();
        """,
        reverse_sql=f"""
        DROP TRIGGER IF EXISTS {table}_personal_owner ON {table};
        DROP POLICY IF EXISTS personal_rows ON {table};
        """,
    )


# A nudge has no name of its own: it is its subject's (an entry, the other entry of a
# contradiction, or a fact), seen with the inserting transaction's own visibility (the
# jobs that open nudges see every owner).
SUBJECT_OWNER_FUNCTION = """
CREATE OR REPLACE FUNCTION memoryhub_owner_from_subject() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.owner_id := coalesce(
        (SELECT m.owner_id FROM memories_memory m WHERE m.id = NEW.memory_id),
        (SELECT m.owner_id FROM memories_memory m WHERE m.id = NEW.other_memory_id),
        (SELECT f.owner_id FROM memories_fact f WHERE f.id = NEW.fact_id)
    );
    RETURN NEW;
END $$;
"""
SUBJECT_OWNER_FUNCTION_REVERSE = "DROP FUNCTION IF EXISTS memoryhub_owner_from_subject();"


def enable_personal_subject_rows(table: str) -> migrations.RunSQL:
    """The `personal_rows` policy on `table`, whose rows take their owner from their
    subject (memoryhub_owner_from_subject) when written; rows written before are given
    theirs here (the owning role lifts FORCE for that one statement's tables)."""
    subject_tables = (table, "memories_memory", "memories_fact")
    lift = "".join(f"ALTER TABLE {name} NO FORCE ROW LEVEL SECURITY;" for name in subject_tables)
    restore = "".join(f"ALTER TABLE {name} FORCE ROW LEVEL SECURITY;" for name in subject_tables)
    return migrations.RunSQL(
        f"""
        CREATE POLICY personal_rows ON {table} AS RESTRICTIVE
            USING ({PERSONAL_CONDITION}) WITH CHECK ({PERSONAL_CONDITION});
        CREATE TRIGGER {table}_personal_owner
            BEFORE INSERT OR UPDATE OF memory_id, other_memory_id, fact_id ON {table}
            FOR EACH ROW EXECUTE FUNCTION memoryhub_owner_from_subject();
        {lift}
        UPDATE {table} SET memory_id = memory_id
            WHERE memory_id IS NOT NULL OR other_memory_id IS NOT NULL OR fact_id IS NOT NULL;
        {restore}
        """,  # noqa: S608 (table names and this module's constants, no input)
        reverse_sql=f"""
        DROP TRIGGER IF EXISTS {table}_personal_owner ON {table};
        DROP POLICY IF EXISTS personal_rows ON {table};
        """,
    )
