"""The three database roles (docs/tenancy.md, "Database roles").

Run by the owner role (teams/management/commands/migrate.py). The roles themselves are
made by a superuser first: the embedded server's boot does it, an external PostgreSQL's
administrator runs deploy/postgres-roles.sql (docs/operations.md).
"""

from django.db import migrations

from teams.rls import NO_SETTING_BYPASS_FUNCTION

CHECK_ROLES = """
DO $$
BEGIN
    IF (SELECT count(*) FROM pg_roles WHERE rolname IN ('memoryhub_app', 'memoryhub_operator')) < 2 THEN
        RAISE EXCEPTION 'the roles memoryhub_app and memoryhub_operator are missing: '
            'create them first (docs/operations.md, "Your own PostgreSQL")';
    END IF;
END
$$;
"""

# The application and operator roles read and write rows; neither may change the schema,
# and neither gets TRUNCATE (row-level security does not apply to it). Default
# privileges give tables created by later migrations the same grants.
GRANTS = """
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO memoryhub_app, memoryhub_operator;
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO memoryhub_app, memoryhub_operator;
ALTER DEFAULT PRIVILEGES IN SCHEMA public
    GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO memoryhub_app, memoryhub_operator;
ALTER DEFAULT PRIVILEGES IN SCHEMA public
    GRANT USAGE, SELECT ON SEQUENCES TO memoryhub_app, memoryhub_operator;
"""

REVOKE_GRANTS = """
ALTER DEFAULT PRIVILEGES IN SCHEMA public
    REVOKE USAGE, SELECT ON SEQUENCES FROM memoryhub_app, memoryhub_operator;
ALTER DEFAULT PRIVILEGES IN SCHEMA public
    REVOKE SELECT, INSERT, UPDATE, DELETE ON TABLES FROM memoryhub_app, memoryhub_operator;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM memoryhub_app, memoryhub_operator;
REVOKE ALL ON ALL TABLES IN SCHEMA public FROM memoryhub_app, memoryhub_operator;
"""

# Each embedding model's HNSW index is created on first use (search.vector_index), and
# only a table's owner may index it: this one function, owned by the owner role, does
# exactly that and nothing else. The name matches search.vector_index.index_name.
ENSURE_VECTOR_INDEX_FUNCTION = """
CREATE OR REPLACE FUNCTION memoryhub_ensure_vector_index(model text, dimensions integer)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS
$$
BEGIN
    IF dimensions IS NULL OR dimensions < 1 OR dimensions > 16000 THEN
        RAISE EXCEPTION 'bad vector dimensions: %', dimensions;
    END IF;
    EXECUTE format(
        'CREATE INDEX IF NOT EXISTS %I ON search_chunkembedding USING hnsw '
        '((embedding::vector(%s)) vector_cosine_ops) WHERE model = %L',
        'chunk_hnsw_' || left(encode(sha256(convert_to(model, 'UTF8')), 'hex'), 16),
        dimensions,
        model
    );
END
$$;
REVOKE ALL ON FUNCTION memoryhub_ensure_vector_index(text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION memoryhub_ensure_vector_index(text, integer) TO memoryhub_app, memoryhub_operator;
"""

SETTING_BYPASS_FUNCTION = """
CREATE OR REPLACE FUNCTION memoryhub_bypass() RETURNS boolean
LANGUAGE sql STABLE AS
$$ SELECT coalesce(current_setting('memoryhub.bypass', true), '') = 'on' $$;
"""


class Migration(migrations.Migration):
    dependencies = [
        # plpgsql resolves search_chunkembedding when the function runs, so this needs
        # no dependency on the search app (a higher floor).
        ("teams", "0007_agenttoken_expires_at"),
    ]

    operations = [
        migrations.RunSQL(CHECK_ROLES, reverse_sql=migrations.RunSQL.noop),
        migrations.RunSQL(NO_SETTING_BYPASS_FUNCTION, reverse_sql=SETTING_BYPASS_FUNCTION),
        migrations.RunSQL(GRANTS, reverse_sql=REVOKE_GRANTS),
        migrations.RunSQL(
            ENSURE_VECTOR_INDEX_FUNCTION,
            reverse_sql="DROP FUNCTION IF EXISTS memoryhub_ensure_vector_index(text, integer);",
        ),
    ]
