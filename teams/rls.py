"""Migration operations that put a team-scoped table under row-level security."""

from __future__ import annotations

from django.db import migrations

CURRENT_TEAM_FUNCTION = """
CREATE OR REPLACE FUNCTION memoryhub_current_team() RETURNS bigint
LANGUAGE sql STABLE AS
$$ SELECT NULLIF(current_setting('memoryhub.team_id', true), '')::bigint $$;

CREATE OR REPLACE FUNCTION memoryhub_bypass() RETURNS boolean
LANGUAGE sql STABLE AS
$$ SELECT coalesce(current_setting('memoryhub.bypass', true), '') = 'on' $$;
"""


def create_scope_functions() -> migrations.RunSQL:
    return migrations.RunSQL(
        CURRENT_TEAM_FUNCTION,
        reverse_sql="DROP FUNCTION IF EXISTS memoryhub_current_team(); "
        "DROP FUNCTION IF EXISTS memoryhub_bypass();",
    )


def enable_team_isolation(table: str, *, extra_condition: str = "") -> migrations.RunSQL:
    """ENABLE + FORCE row-level security (FORCE so that the owning role, which the
    service may connect as, is bound too) with one policy for every command."""
    condition = "team_id = memoryhub_current_team() OR memoryhub_bypass()"
    if extra_condition:
        condition = f"{condition} OR ({extra_condition})"
    return migrations.RunSQL(
        f"""
        ALTER TABLE {table} ENABLE ROW LEVEL SECURITY;
        ALTER TABLE {table} FORCE ROW LEVEL SECURITY;
        CREATE POLICY team_isolation ON {table} USING ({condition}) WITH CHECK ({condition});
        """,
        reverse_sql=f"""
        DROP POLICY IF EXISTS team_isolation ON {table};
        ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY;
        ALTER TABLE {table} DISABLE ROW LEVEL SECURITY;
        """,
    )
