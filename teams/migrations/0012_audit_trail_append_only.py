"""The operator's own login and an append-only audit trail (docs/tenancy.md, "Database roles").

Run by the owner role. The roles themselves are a superuser's business (the embedded
boot, or deploy/postgres-roles.sql with its upgrade section): this refuses to go on while
the application role may still become the operator, so an upgrade cannot end half done.
"""

import django.db.models.deletion
from django.db import migrations, models

CHECK_ROLES = """
DO $$
BEGIN
    IF pg_has_role('memoryhub_app', 'memoryhub_operator', 'MEMBER') THEN
        RAISE EXCEPTION 'memoryhub_app may still SET ROLE memoryhub_operator: give the operator a login '
            'of its own and revoke that membership first (docs/operations.md, "Your own PostgreSQL")';
    END IF;
END
$$;
"""

# Every surface appends to the trail; no login of the web or the workers may change or
# erase it. (TRUNCATE was never granted to them; revoked all the same, for databases
# where it was, such as a test database of an older checkout.)
APPEND_ONLY = "REVOKE UPDATE, DELETE, TRUNCATE ON teams_auditevent FROM memoryhub_app, memoryhub_operator;"
EDITABLE = "GRANT UPDATE, DELETE ON teams_auditevent TO memoryhub_app, memoryhub_operator;"


class Migration(migrations.Migration):
    dependencies = [
        ("teams", "0011_team_settings_limits"),
    ]

    operations = [
        migrations.RunSQL(CHECK_ROLES, reverse_sql=migrations.RunSQL.noop),
        migrations.AlterField(
            model_name="auditevent",
            name="action",
            field=models.CharField(
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
                    ("team.export", "Team Export"),
                    ("team.import", "Team Import"),
                    ("team.settings", "Team Settings"),
                    ("team.shutdown", "Team Shutdown"),
                ],
                max_length=32,
            ),
        ),
        # The trail outlives its team (a shutdown keeps it): no foreign key constraint.
        migrations.AlterField(
            model_name="auditevent",
            name="team",
            field=models.ForeignKey(
                db_constraint=False,
                on_delete=django.db.models.deletion.DO_NOTHING,
                related_name="+",
                to="teams.team",
            ),
        ),
        migrations.RunSQL(APPEND_ONLY, reverse_sql=EDITABLE),
    ]
