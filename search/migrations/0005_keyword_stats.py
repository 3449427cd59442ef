"""BM25 statistics per team (docs/search.md, "Keyword path: bounded candidates and BM25"):
the KeywordStat table under row-level security, the statement triggers on search_chunk that
keep it in the transaction writing the chunks, and the backfill from the chunks already there."""

import django.db.models.deletion
from django.db import migrations, models

from teams.rls import enable_team_isolation

# Per lexeme: how many chunks hold it; on the team's row (empty lexeme): how many chunks
# and their summed length (distinct lexemes: `length(tsvector)`, read without unnesting).
STATS_OF = """
    SELECT team_id, lexeme, sum(chunks) AS chunks, sum(length) AS length FROM (
        SELECT t.team_id, '' AS lexeme, 1 AS chunks,
               length(t.search_vector) AS length
        FROM {rows} AS t
        UNION ALL
        SELECT t.team_id, u.lexeme, 1, 0 FROM {rows} AS t, unnest(t.search_vector) AS u
    ) AS counted GROUP BY team_id, lexeme
"""

# Every statement that changes a team's statistics first locks the team's row (the empty
# lexeme sorts first, and the subtraction locks it explicitly), so writers of one team
# queue on that row and never deadlock on lexeme rows taken in different orders.
TRIGGER_FUNCTION = f"""
CREATE FUNCTION search_keyword_stats_maintain() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        PERFORM 1 FROM search_keywordstat
        WHERE lexeme = '' AND team_id IN (SELECT DISTINCT team_id FROM old_chunks)
        ORDER BY team_id FOR UPDATE;
        UPDATE search_keywordstat AS s
        SET chunks = s.chunks - d.chunks, length = s.length - d.length
        FROM ({STATS_OF.format(rows="old_chunks")}) AS d
        WHERE s.team_id = d.team_id AND s.lexeme = d.lexeme;
        DELETE FROM search_keywordstat AS s
        USING (SELECT DISTINCT t.team_id, u.lexeme FROM old_chunks AS t, unnest(t.search_vector) AS u) AS d
        WHERE s.team_id = d.team_id AND s.lexeme = d.lexeme AND s.chunks <= 0;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO search_keywordstat AS s (team_id, lexeme, chunks, length)
        SELECT team_id, lexeme, chunks, length FROM ({STATS_OF.format(rows="new_chunks")}) AS a
        ORDER BY team_id, lexeme
        ON CONFLICT (team_id, lexeme)
        DO UPDATE SET chunks = s.chunks + excluded.chunks, length = s.length + excluded.length;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER search_chunk_keyword_stats_insert AFTER INSERT ON search_chunk
    REFERENCING NEW TABLE AS new_chunks FOR EACH STATEMENT EXECUTE FUNCTION search_keyword_stats_maintain();
CREATE TRIGGER search_chunk_keyword_stats_delete AFTER DELETE ON search_chunk
    REFERENCING OLD TABLE AS old_chunks FOR EACH STATEMENT EXECUTE FUNCTION search_keyword_stats_maintain();
CREATE TRIGGER search_chunk_keyword_stats_update AFTER UPDATE ON search_chunk
    REFERENCING OLD TABLE AS old_chunks NEW TABLE AS new_chunks
    FOR EACH STATEMENT EXECUTE FUNCTION search_keyword_stats_maintain();
"""  # noqa: S608 (constants only)

DROP_TRIGGERS = """
DROP TRIGGER IF EXISTS search_chunk_keyword_stats_insert ON search_chunk;
DROP TRIGGER IF EXISTS search_chunk_keyword_stats_delete ON search_chunk;
DROP TRIGGER IF EXISTS search_chunk_keyword_stats_update ON search_chunk;
DROP FUNCTION IF EXISTS search_keyword_stats_maintain();
"""

# The GIN index on search_chunk.search_vector cannot serve the application role: `@@`
# is not LEAKPROOF, and under row-level security PostgreSQL evaluates no non-leakproof
# condition before the policy's, so never as an index condition (the team's chunks are
# read through the team index and filtered instead). This function reads the index for
# the team of the caller's scope only (memoryhub_current_team(), the setting the policy
# itself trusts; never a team passed in) and returns chunk ids, at most max_rows: it
# runs as the operator role (BYPASSRLS), which owns it. CREATE on the schema is needed
# only for the change of owner, and taken back at once.
CANDIDATES_FUNCTION = """
CREATE FUNCTION search_keyword_candidates(query tsquery, max_rows integer)
RETURNS TABLE (chunk_id bigint) LANGUAGE plpgsql STABLE SECURITY DEFINER ROWS 100
SET search_path = public, pg_temp AS $$
BEGIN
    IF memoryhub_current_team() IS NULL THEN
        RETURN;
    END IF;
    -- EXECUTE: planned with the actual query, whose lexemes' frequencies decide the plan.
    RETURN QUERY EXECUTE
        'SELECT c.id FROM search_chunk c WHERE c.team_id = $1 AND c.search_vector @@ $2 LIMIT $3'
        USING memoryhub_current_team(), query, greatest(max_rows, 0);
END
$$;
REVOKE ALL ON FUNCTION search_keyword_candidates(tsquery, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION search_keyword_candidates(tsquery, integer) TO memoryhub_app, memoryhub_operator;
GRANT CREATE ON SCHEMA public TO memoryhub_operator;
ALTER FUNCTION search_keyword_candidates(tsquery, integer) OWNER TO memoryhub_operator;
REVOKE CREATE ON SCHEMA public FROM memoryhub_operator;
"""

# The owner role that runs migrations is bound by FORCE ROW LEVEL SECURITY: the
# backfill runs as the operator role (BYPASSRLS), as in memories.0007.
BACKFILL = f"""
SET LOCAL ROLE memoryhub_operator;
INSERT INTO search_keywordstat (team_id, lexeme, chunks, length)
SELECT team_id, lexeme, chunks, length FROM ({STATS_OF.format(rows="search_chunk")}) AS a;
RESET ROLE;
"""  # noqa: S608 (constants only)


class Migration(migrations.Migration):
    dependencies = [
        ("search", "0004_embedding_cache_per_team"),
        ("teams", "0010_audit_export_import"),
    ]

    operations = [
        migrations.CreateModel(
            name="KeywordStat",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("lexeme", models.TextField()),
                ("chunks", models.BigIntegerField(default=0)),
                ("length", models.BigIntegerField(default=0)),
                (
                    "team",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="teams.team"
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("team", "lexeme"), name="one_keyword_stat_per_team_lexeme"
                    )
                ],
            },
        ),
        enable_team_isolation("search_keywordstat"),
        migrations.RunSQL(TRIGGER_FUNCTION, reverse_sql=DROP_TRIGGERS),
        migrations.RunSQL(
            CANDIDATES_FUNCTION,
            reverse_sql="DROP FUNCTION IF EXISTS search_keyword_candidates(tsquery, integer);",
        ),
        migrations.RunSQL(BACKFILL, reverse_sql="DELETE FROM search_keywordstat"),
    ]
