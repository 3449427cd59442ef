"""Drop the index on memories_fact's team alone (the foreign key's default index).

An exact lookup (team, entity, key) has two indexes that answer it outright
(fact_one_active_per_entity_key, fact_team_entity_key). When the planner's statistics
did not know the team (its facts written since the last ANALYZE: estimated at one row),
the index on the team alone cost the same to it, and it chose it: each lookup then read
and filtered the team's facts (85 ms for one at 100,000 facts; docs/facts.md, "Bench").
Every read by team alone (lists, unified search, the team's deletion) has an index
that starts with the team beside it."""

import django.db.models.deletion
from django.db import migrations, models

# The name Django gave the foreign key's index (memories.0014), dropped by name rather
# than found by introspection, so the statement is the same on every database.
TEAM_INDEX = "memories_fact_team_id_858a207e"


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0020_personal_conversations"),
        ("teams", "0020_team_conversation_retention"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="fact",
                    name="team",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="facts",
                        to="teams.team",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    f"DROP INDEX IF EXISTS {TEAM_INDEX}",
                    reverse_sql=f"CREATE INDEX IF NOT EXISTS {TEAM_INDEX} ON memories_fact (team_id)",
                ),
            ],
        ),
    ]
