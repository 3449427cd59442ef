from django.db import migrations

from teams.rls import create_scope_functions, enable_team_isolation


class Migration(migrations.Migration):
    dependencies = [("teams", "0001_initial")]

    operations = [
        create_scope_functions(),
        enable_team_isolation("teams_membership"),
        # Authentication may see the one token whose hash the caller presented.
        enable_team_isolation(
            "teams_agenttoken",
            extra_condition="token_hash = NULLIF(current_setting('memoryhub.token_hash', true), '')",
        ),
        enable_team_isolation("teams_vaultentry"),
    ]
