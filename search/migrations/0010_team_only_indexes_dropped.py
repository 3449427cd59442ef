"""Drop the indexes on the team alone of the chunks, their embeddings, the conversations'
chunks, the embedding cache, the key trigrams and the keyword statistics (the foreign
keys' default indexes).

Each table has an index that starts with the team and covers every row: chunk_team_memory
(team, memory), chunk_embedding_team_model and conversation_chunk_team_model (team,
model), one_cached_embedding_per_team_model (team, content_hash, model),
one_key_trigrams_per_team_key (team, key), one_keyword_stat_per_team_lexeme (team,
lexeme). It serves the team's reads, its rows' deletion and the row-level security filter
as the index on the team alone did, and without the latter no estimate can make the
planner read a whole team through the team alone (docs/tenancy.md, "Indexes per team")."""

import django.db.models.deletion
from django.db import migrations, models

# (table, the name Django gave its foreign key's index), dropped by name rather than found
# by introspection, so the statements are the same on every database.
TEAM_ONLY_INDEXES = [
    ("search_chunk", "search_chunk_team_id_a091eb9b"),
    ("search_chunkembedding", "search_chunkembedding_team_id_10fd500d"),
    ("search_conversationchunk", "search_conversationchunk_team_id_b7ce680d"),
    ("search_embeddingcache", "search_embeddingcache_team_id_2b4058a9"),
    ("search_keytrigrams", "search_keytrigrams_team_id_dc0865b0"),
    ("search_keywordstat", "search_keywordstat_team_id_1f9034cc"),
]


class Migration(migrations.Migration):
    dependencies = [
        ("search", "0009_personal_conversation_chunks"),
        ("teams", "0021_team_only_indexes_dropped"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="chunk",
                    name="team",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="teams.team",
                    ),
                ),
                migrations.AlterField(
                    model_name="chunkembedding",
                    name="team",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="teams.team",
                    ),
                ),
                migrations.AlterField(
                    model_name="conversationchunk",
                    name="team",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="teams.team",
                    ),
                ),
                migrations.AlterField(
                    model_name="embeddingcache",
                    name="team",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="teams.team",
                    ),
                ),
                migrations.AlterField(
                    model_name="keytrigrams",
                    name="team",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="teams.team",
                    ),
                ),
                migrations.AlterField(
                    model_name="keywordstat",
                    name="team",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="teams.team",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    f"DROP INDEX IF EXISTS {index}",
                    reverse_sql=f"CREATE INDEX IF NOT EXISTS {index} ON {table} (team_id)",
                )
                for table, index in TEAM_ONLY_INDEXES
            ],
        ),
    ]
