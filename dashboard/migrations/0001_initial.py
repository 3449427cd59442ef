import django.db.models.deletion
from django.db import migrations, models

from teams.rls import enable_team_isolation

# The team picker lists the signed-in person's memberships across teams. teams_membership
# is under row-level security keyed on the team, so its one policy also lets through the
# rows of the user named by the transaction-local `memoryhub.user_id`
# (teams.scope.own_memberships_scope): that person's own rows, nothing of
# anyone else. Writes still need the team's scope (WITH CHECK is unchanged). Altering
# the policy, rather than adding a second one, keeps "one policy per table".
TEAM_CONDITION = "team_id = memoryhub_current_team() OR memoryhub_bypass()"
OWN_ROWS_CONDITION = "user_id = NULLIF(current_setting('memoryhub.user_id', true), '')::bigint"


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("teams", "0003_agent_session"),
    ]
    # teams 0005 takes this table over (the audit trail moved to teams).
    run_before = [("teams", "0005_audit_trail")]

    operations = [
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
                "indexes": [models.Index(fields=["team", "-created_at"], name="auditevent_team_recent")],
            },
        ),
        enable_team_isolation("dashboard_auditevent"),
        migrations.RunSQL(
            f"ALTER POLICY team_isolation ON teams_membership USING ({TEAM_CONDITION} OR {OWN_ROWS_CONDITION})",
            reverse_sql=f"ALTER POLICY team_isolation ON teams_membership USING ({TEAM_CONDITION})",
        ),
    ]
