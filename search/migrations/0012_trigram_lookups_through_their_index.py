"""The trigram lookups read their GIN index whatever the table's size, and choose their
candidates without a word's closing trigram, for a word of 5 letters or digits or more.

- Through the index: on a small team (1,000 keys in 27 pages) the planner estimated a
  few matching rows and read the whole table, testing each row's trigrams (1.75 ms for a
  lookup that found nothing); the functions now run with enable_seqscan off.
- A word's opening trigrams ("  g", " gr") were already left out of the probe; its
  closing one ("na " of "grafana") is as common: every key ending in "em", every lexeme
  ending in "ing". A lexeme at the thresholds (coverage 0.6) shares at least 4 of the 6
  or more trigrams of such a word, so at least one inner one: leaving the closing
  trigram out of the probe loses no lexeme. A shorter word keeps it ("reed" reaches
  "red" through "  r", " re" and "ed " alone), as does a word of parts ("inc-12345",
  whose parts each have a closing trigram). The closing trigram still counts in the
  overlap and the similarity.

The functions are otherwise as migration search.0006 made them, replaced in place (same
signature, owner and grants) by their owner, the operator role: the migration's role may
act as it (SET ROLE) but does not inherit its ownership."""

from django.db import migrations

# The functions of migration search.0006, with what this migration changes as placeholders.
LOOKUP_FUNCTIONS = """CREATE OR REPLACE FUNCTION search_similar_lexemes(
    words text[], min_coverage float8, min_similarity float8, per_word integer, max_candidates integer
) RETURNS TABLE (word text, lexeme text, chunks bigint, similarity float8)
LANGUAGE plpgsql STABLE SECURITY DEFINER ROWS 10
SET search_path = public, pg_temp__PLANNER__ AS $$
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
        probe := ARRAY(SELECT t FROM unnest(wanted) AS t WHERE t NOT LIKE '%: %'__WORD_PROBE__);
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

CREATE OR REPLACE FUNCTION search_similar_keys(
    words text[], query text, min_overlap float8, max_rows integer, max_candidates integer
) RETURNS TABLE (key text, overlap float8)
LANGUAGE plpgsql STABLE SECURITY DEFINER ROWS 10
SET search_path = public, pg_temp__PLANNER__ AS $$
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
        WHERE t NOT LIKE '%: %'__WORDS_PROBE__
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
"""
# A word of 5 letters or digits or more: its closing trigram ("% ") does not choose.
WITHOUT_CLOSING = " AND (t NOT LIKE '% ' OR {word} !~ '^[[:alnum:]]{{5,}}$')"


def lookup_functions(*, through_index: bool, without_closing: bool) -> str:
    """The two functions, replaced in place, as their owner (which needs the schema's
    CREATE privilege to replace them)."""
    functions = (
        LOOKUP_FUNCTIONS.replace("__PLANNER__", "\nSET enable_seqscan = off" if through_index else "")
        .replace("__WORD_PROBE__", WITHOUT_CLOSING.format(word="asked") if without_closing else "")
        .replace("__WORDS_PROBE__", WITHOUT_CLOSING.format(word="w") if without_closing else "")
    )
    return f"""
GRANT CREATE ON SCHEMA public TO memoryhub_operator;
SET LOCAL ROLE memoryhub_operator;
{functions}
RESET ROLE;
REVOKE CREATE ON SCHEMA public FROM memoryhub_operator;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("search", "0011_keyword_candidates_with_vectors"),
    ]

    operations = [
        migrations.RunSQL(
            lookup_functions(through_index=True, without_closing=True),
            reverse_sql=lookup_functions(through_index=False, without_closing=False),
        ),
    ]
