"""Drop the indexes on the team alone of the tokens, the audit trail, the memberships and
the vault (the foreign keys' default indexes).

Each table has an index that starts with the team and covers every row:
teams_agent_team_id_84a318_idx (team, created_at), auditevent_team_recent (team,
created_at), membership_once (team, user), vault_key_once_per_team (team, key). It
serves the team's reads, its rows' deletion and the row-level security filter as the
index on the team alone did, and without the latter no estimate can make the planner read
a whole team through the team alone (docs/tenancy.md, "Indexes per team")."""

import django.db.models.deletion
from django.db import migrations, models

# (table, the name Django gave its foreign key's index), dropped by name rather than found
# by introspection, so the statements are the same on every database.
TEAM_ONLY_INDEXES = [
    ("teams_agenttoken", "teams_agenttoken_team_id_48f35940"),
    ("teams_auditevent", "dashboard_auditevent_team_id_d6ac4bf6"),
    ("teams_membership", "teams_membership_team_id_d18da3f9"),
    ("teams_vaultentry", "teams_vaultentry_team_id_ad41b82a"),
]


class Migration(migrations.Migration):
    dependencies = [
        ("teams", "0020_team_conversation_retention"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="agenttoken",
                    name="team",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="tokens",
                        to="teams.team",
                    ),
                ),
                migrations.AlterField(
                    model_name="auditevent",
                    name="team",
                    field=models.ForeignKey(
                        db_constraint=False,
                        db_index=False,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to="teams.team",
                    ),
                ),
                migrations.AlterField(
                    model_name="membership",
                    name="team",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="memberships",
                        to="teams.team",
                    ),
                ),
                migrations.AlterField(
                    model_name="vaultentry",
                    name="team",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="vault_entries",
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
