"""search_keyword_candidates returns each candidate chunk's memory and tsvector with its id.

The keyword path read them again by id from search_chunk after the function had read the
same rows (a second visit of up to 1,000 heap rows per search). The function stays what
migration search.0005 made it otherwise: SECURITY DEFINER, owned by the operator role
(BYPASSRLS) so that the GIN index serves it, the team taken only from the caller's scope
(memoryhub_current_team()), nothing outside a scope. A function's result type cannot be
replaced in place: it is dropped and created again, in one transaction."""

from django.db import migrations

# The function as migration search.0005 made it, with `{returns}` and `{columns}`: dropped
# and created again (a result type cannot be replaced in place), then owned by the
# operator as before.
FUNCTION = """
DROP FUNCTION search_keyword_candidates(tsquery, integer);
CREATE FUNCTION search_keyword_candidates(query tsquery, max_rows integer)
RETURNS TABLE ({returns}) LANGUAGE plpgsql STABLE SECURITY DEFINER ROWS 100
SET search_path = public, pg_temp AS $$
BEGIN
    IF memoryhub_current_team() IS NULL THEN
        RETURN;
    END IF;
    -- EXECUTE: planned with the actual query, whose lexemes' frequencies decide the plan.
    RETURN QUERY EXECUTE
        'SELECT {columns} FROM search_chunk c WHERE c.team_id = $1 AND c.search_vector @@ $2 LIMIT $3'
        USING memoryhub_current_team(), query, greatest(max_rows, 0);
END
$$;
REVOKE ALL ON FUNCTION search_keyword_candidates(tsquery, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION search_keyword_candidates(tsquery, integer) TO memoryhub_app, memoryhub_operator;
GRANT CREATE ON SCHEMA public TO memoryhub_operator;
ALTER FUNCTION search_keyword_candidates(tsquery, integer) OWNER TO memoryhub_operator;
REVOKE CREATE ON SCHEMA public FROM memoryhub_operator;
"""

CANDIDATES_FUNCTION = FUNCTION.format(
    returns="chunk_id bigint, memory_id uuid, search_vector tsvector",
    columns="c.id, c.memory_id, c.search_vector",
)
IDS_ONLY_FUNCTION = FUNCTION.format(returns="chunk_id bigint", columns="c.id")


class Migration(migrations.Migration):
    dependencies = [
        ("search", "0010_team_only_indexes_dropped"),
    ]

    operations = [
        migrations.RunSQL(CANDIDATES_FUNCTION, reverse_sql=IDS_ONLY_FUNCTION),
    ]
