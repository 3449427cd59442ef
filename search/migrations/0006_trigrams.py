"""Trigrams for partial words and identifiers (search.retrieval.trigrams; docs/search.md,
"Partial words and identifiers"): pg_trgm is not in the embedded PostgreSQL, so the
trigrams are plain SQL.

- `search_team_trigrams(team, text)`: the distinct trigrams of the text's words, as
  pg_trgm makes them (lowercase, two spaces before a word and one after; a word's
  first 32 characters), each prefixed with the team id, so that a GIN index over them
  holds a posting list per team and trigram: a lookup reads the team's own entries.
  IMMUTABLE and calling built-ins only, so an index and a dump's restore can use it.
- Both GIN indexes without the pending list (`fastupdate = off`): a search would read
  the whole list of entries not merged yet (74 ms for 19,000 keys); a write of a new
  key or lexeme updates the index at once instead.
- The team's vocabulary: a stored `trigrams` column on search_keywordstat (the triggers
  of search.0005 insert its rows, the column follows), with a GIN index.
- Keys: search_keytrigrams (search.models.KeyTrigrams), each key of a team once with
  a stored `trigrams` column and a GIN index, filled by a statement trigger on
  memories_memory and backfilled here. Deriving a key's trigrams at lookup time cost
  about 0.1 ms a key: a word found in every key took 130 ms for 1,000 keys.
- `search_similar_lexemes` and `search_similar_keys` read those indexes for the team of
  the caller's scope only, as search_keyword_candidates (search.0005) does: the GIN
  operators are not LEAKPROOF, so under row-level security the application role's own
  query could not use the indexes.
"""

import django.db.models.deletion
from django.db import migrations, models

from teams.rls import enable_team_isolation

TRIGRAMS_FUNCTION = """
CREATE FUNCTION search_team_trigrams(team bigint, words text) RETURNS text[]
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT coalesce(array_agg(DISTINCT team::text || ':' || substr(padded, i, 3)), '{}')
    FROM (
        SELECT '  ' || left(word, 32) || ' ' AS padded
        FROM regexp_split_to_table(lower(words), '[^[:alnum:]]+') AS word
        WHERE word <> ''
    ) AS w, generate_series(1, length(padded) - 2) AS i
$$;
"""

VOCABULARY = """
ALTER TABLE search_keywordstat
    ADD COLUMN trigrams text[] GENERATED ALWAYS AS (search_team_trigrams(team_id, lexeme)) STORED;
CREATE INDEX keyword_stat_trigrams ON search_keywordstat USING gin (trigrams) WITH (fastupdate = off);
ALTER TABLE search_keytrigrams
    ADD COLUMN trigrams text[] GENERATED ALWAYS AS (search_team_trigrams(team_id, key)) STORED;

CREATE FUNCTION search_keys_maintain() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO search_keytrigrams (team_id, key)
    SELECT DISTINCT team_id, key FROM new_memories ORDER BY team_id, key
    ON CONFLICT (team_id, key) DO NOTHING;
    RETURN NULL;
END $$;
CREATE TRIGGER memories_memory_search_keys AFTER INSERT ON memories_memory
    REFERENCING NEW TABLE AS new_memories FOR EACH STATEMENT EXECUTE FUNCTION search_keys_maintain();
"""

DROP_VOCABULARY = """
DROP TRIGGER IF EXISTS memories_memory_search_keys ON memories_memory;
DROP FUNCTION IF EXISTS search_keys_maintain();
ALTER TABLE search_keytrigrams DROP COLUMN IF EXISTS trigrams;
DROP INDEX IF EXISTS keyword_stat_trigrams;
ALTER TABLE search_keywordstat DROP COLUMN IF EXISTS trigrams;
"""

# The owner role that runs migrations is bound by FORCE ROW LEVEL SECURITY: the
# backfill runs as the operator role (BYPASSRLS), as in search.0005. The index comes
# after it, built in one pass.
BACKFILL = """
SET LOCAL ROLE memoryhub_operator;
INSERT INTO search_keytrigrams (team_id, key)
SELECT DISTINCT team_id, key FROM memories_memory ORDER BY team_id, key;
RESET ROLE;
CREATE INDEX key_trigrams ON search_keytrigrams USING gin (trigrams) WITH (fastupdate = off);
ANALYZE search_keytrigrams;
"""

# A word's two opening trigrams ("  g", " gr") are shared by a large part of the
# vocabulary: they count in the overlap but do not choose the candidates (a word of 3
# characters or more has 4 trigrams or more, so a match at the thresholds shares
# another one). At most max_candidates entries are
# read per lookup: a word whose trigrams are everywhere (every key starts "proj-")
# reads a sample, as the keyword path's common words do. The trigrams carry the team, so the
# GIN index alone keeps to it: no team condition, which would tempt the planner into
# reading the team's whole vocabulary through the team index. EXECUTE: each lookup is
# planned with its actual trigrams. Words and thresholds come from
# search.retrieval.trigrams.
LOOKUP_FUNCTIONS = """
CREATE FUNCTION search_similar_lexemes(
    words text[], min_coverage float8, min_similarity float8, per_word integer, max_candidates integer
) RETURNS TABLE (word text, lexeme text, chunks bigint, similarity float8)
LANGUAGE plpgsql STABLE SECURITY DEFINER ROWS 10
SET search_path = public, pg_temp AS $$
DECLARE
    team bigint := memoryhub_current_team();
    asked text;
    wanted text[];
    probe text[];
BEGIN
    IF team IS NULL OR words IS NULL THEN
        RETURN;
    END IF;
    FOREACH asked IN ARRAY words[1:8] LOOP
        wanted := search_team_trigrams(team, asked);
        probe := ARRAY(SELECT t FROM unnest(wanted) AS t WHERE t NOT LIKE '%: %');
        CONTINUE WHEN cardinality(probe) = 0;
        RETURN QUERY EXECUTE
            'SELECT $1, s.lexeme, s.chunks, o.shared / (cardinality($2) + cardinality(s.trigrams) - o.shared)
             FROM (
                 SELECT s.lexeme, s.chunks, s.trigrams FROM search_keywordstat s
                 WHERE s.trigrams && $3 AND s.chunks > 0 AND s.lexeme <> '''' LIMIT $7
             ) AS s,
             LATERAL (SELECT count(*)::float8 AS shared FROM unnest(s.trigrams) AS t WHERE t = ANY($2)) AS o
             WHERE o.shared >= $4 * cardinality($2)
               AND o.shared / (cardinality($2) + cardinality(s.trigrams) - o.shared) >= $5
             ORDER BY 4 DESC, 2 LIMIT $6'
            USING asked, wanted, probe, min_coverage, min_similarity, greatest(per_word, 0),
                greatest(max_candidates, 0);
    END LOOP;
END
$$;

CREATE FUNCTION search_similar_keys(
    words text[], query text, min_overlap float8, max_rows integer, max_candidates integer
) RETURNS TABLE (key text, overlap float8)
LANGUAGE plpgsql STABLE SECURITY DEFINER ROWS 10
SET search_path = public, pg_temp AS $$
DECLARE
    team bigint := memoryhub_current_team();
    wanted text[];
    probe text[];
BEGIN
    IF team IS NULL OR words IS NULL THEN
        RETURN;
    END IF;
    wanted := search_team_trigrams(team, left(query, 2000));
    probe := ARRAY(
        SELECT DISTINCT t FROM unnest(words[1:8]) AS w, unnest(search_team_trigrams(team, w)) AS t
        WHERE t NOT LIKE '%: %'
    );
    IF cardinality(probe) = 0 THEN
        RETURN;
    END IF;
    RETURN QUERY EXECUTE
        'SELECT k.key::text, o.shared / least(cardinality(k.trigrams), cardinality($1))
         FROM (
             SELECT k.key, k.trigrams FROM search_keytrigrams k WHERE k.trigrams && $2 LIMIT $5
         ) AS k,
         LATERAL (SELECT count(*)::float8 AS shared FROM unnest(k.trigrams) AS t WHERE t = ANY($1)) AS o
         WHERE o.shared >= $3 * least(cardinality(k.trigrams), cardinality($1))
         ORDER BY 2 DESC, 1 LIMIT $4'
        USING wanted, probe, min_overlap, greatest(max_rows, 0), greatest(max_candidates, 0);
END
$$;

REVOKE ALL ON FUNCTION search_similar_lexemes(text[], float8, float8, integer, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION search_similar_keys(text[], text, float8, integer, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION search_similar_lexemes(text[], float8, float8, integer, integer)
    TO memoryhub_app, memoryhub_operator;
GRANT EXECUTE ON FUNCTION search_similar_keys(text[], text, float8, integer, integer)
    TO memoryhub_app, memoryhub_operator;
GRANT CREATE ON SCHEMA public TO memoryhub_operator;
ALTER FUNCTION search_similar_lexemes(text[], float8, float8, integer, integer) OWNER TO memoryhub_operator;
ALTER FUNCTION search_similar_keys(text[], text, float8, integer, integer) OWNER TO memoryhub_operator;
REVOKE CREATE ON SCHEMA public FROM memoryhub_operator;
"""

DROP_LOOKUP_FUNCTIONS = """
DROP FUNCTION IF EXISTS search_similar_lexemes(text[], float8, float8, integer, integer);
DROP FUNCTION IF EXISTS search_similar_keys(text[], text, float8, integer, integer);
"""


class Migration(migrations.Migration):
    dependencies = [
        ("search", "0005_keyword_stats"),
        ("memories", "0012_created_at_kept_on_import"),
    ]

    operations = [
        migrations.RunSQL(
            TRIGRAMS_FUNCTION, reverse_sql="DROP FUNCTION IF EXISTS search_team_trigrams(bigint, text);"
        ),
        migrations.CreateModel(
            name="KeyTrigrams",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("key", models.CharField(max_length=200)),
                (
                    "team",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="teams.team"
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(fields=("team", "key"), name="one_key_trigrams_per_team_key")
                ],
            },
        ),
        enable_team_isolation("search_keytrigrams"),
        migrations.RunSQL(VOCABULARY, reverse_sql=DROP_VOCABULARY),
        migrations.RunSQL(
            BACKFILL, reverse_sql="DROP INDEX IF EXISTS key_trigrams; DELETE FROM search_keytrigrams;"
        ),
        migrations.RunSQL(LOOKUP_FUNCTIONS, reverse_sql=DROP_LOOKUP_FUNCTIONS),
    ]
