"""The audit trail moves from the dashboard into teams (every surface records into it).

`dashboard_auditevent` (made by dashboard 0001, which runs before this migration) is
renamed with its rows, index and policy. The membership policy
that the dashboard's migration widened for the team picker is now teams' own."""

import django.db.models.deletion
from django.db import migrations, models

from teams.rls import OWN_MEMBERSHIPS_CONDITION, TEAM_CONDITION, adopt_team_table


class Migration(migrations.Migration):
    dependencies = [
        ("teams", "0004_team_dedup_threshold"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="AuditEvent",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("actor", models.CharField(max_length=200)),
                        (
                            "action",
                            models.CharField(
                                choices=[
                                    ("vault.reveal", "Vault Reveal"),
                                    ("vault.set", "Vault Set"),
                                    ("vault.delete", "Vault Delete"),
                                    ("token.create", "Token Create"),
                                    ("token.revoke", "Token Revoke"),
                                    ("member.add", "Member Add"),
                                    ("member.role", "Member Role"),
                                    ("member.remove", "Member Remove"),
                                    ("team.reindex", "Team Reindex"),
                                ],
                                max_length=32,
                            ),
                        ),
                        ("target", models.CharField(blank=True, default="", max_length=300)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        (
                            "team",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE, related_name="+", to="teams.team"
                            ),
                        ),
                    ],
                    options={
                        "indexes": [
                            models.Index(fields=["team", "-created_at"], name="auditevent_team_recent")
                        ],
                    },
                ),
            ],
        ),
        adopt_team_table("dashboard_auditevent", app_label="teams", model_name="AuditEvent"),
        migrations.RunSQL(
            "ALTER POLICY team_isolation ON teams_membership "
            f"USING ({TEAM_CONDITION} OR {OWN_MEMBERSHIPS_CONDITION})",
            reverse_sql=migrations.RunSQL.noop,
        ),
    ]
