"""Drop the indexes on the team alone of the nudges and the anchor checks (the foreign
keys' default indexes).

Each table has an index that starts with the team and covers every row: nudge_team_memory
(team, memory), anchorcheck_team_memory (team, memory, checked_at). It serves the team's
reads, its rows' deletion and the row-level security filter as the index on the team alone
did, and without the latter no estimate can make the planner read a whole team through the
team alone (docs/tenancy.md, "Indexes per team"). The drafts keep theirs: their indexes
that start with the team are partial (pending drafts), so the team's deletion needs it."""

import django.db.models.deletion
from django.db import migrations, models

# (table, the name Django gave its foreign key's index), dropped by name rather than found
# by introspection, so the statements are the same on every database.
TEAM_ONLY_INDEXES = [
    ("freshness_anchorcheck", "freshness_anchorcheck_team_id_83b30275"),
    ("freshness_nudge", "freshness_nudge_team_id_36d81335"),
]


class Migration(migrations.Migration):
    dependencies = [
        ("freshness", "0012_personal_nudges"),
        ("teams", "0021_team_only_indexes_dropped"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="anchorcheck",
                    name="team",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="teams.team",
                    ),
                ),
                migrations.AlterField(
                    model_name="nudge",
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
