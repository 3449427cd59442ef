"""Drop the indexes on the team alone of the entries, their annotations and
confirmations, the conversations and their lines (the foreign keys' default indexes), as
0021 did for the facts.

Each table has an index that starts with the team and covers every row:
memory_team_key_recent (team, key, created_at), annotation_team_memory_recent,
confirmation_team_memory (team, memory, ...), conversation_team_recent (team,
created_at, id), one_line_per_number (team, conversation, number). It serves the team's
reads, its rows' deletion and the row-level security filter as the index on the team alone
did, and without the latter no estimate can make the planner read a whole team through the
team alone: while the statistics did not know a team, they estimated it at one row and an
exact read went through the team alone, filtering all of the team's rows
(docs/tenancy.md, "Indexes per team")."""

import django.db.models.deletion
from django.db import migrations, models

# (table, the name Django gave its foreign key's index), dropped by name rather than found
# by introspection, so the statements are the same on every database.
TEAM_ONLY_INDEXES = [
    ("memories_annotation", "memories_annotation_team_id_e62dadc7"),
    ("memories_confirmation", "memories_confirmation_team_id_c1939897"),
    ("memories_conversation", "memories_conversation_team_id_0a3e9c7d"),
    ("memories_conversationline", "memories_conversationline_team_id_9d6ab49e"),
    ("memories_memory", "memories_memory_team_id_a5f3a5f0"),
]


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0021_fact_team_index_dropped"),
        ("teams", "0021_team_only_indexes_dropped"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="annotation",
                    name="team",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="teams.team",
                    ),
                ),
                migrations.AlterField(
                    model_name="confirmation",
                    name="team",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="teams.team",
                    ),
                ),
                migrations.AlterField(
                    model_name="conversation",
                    name="team",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="teams.team",
                    ),
                ),
                migrations.AlterField(
                    model_name="conversationline",
                    name="team",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="teams.team",
                    ),
                ),
                migrations.AlterField(
                    model_name="memory",
                    name="team",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="memories",
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
