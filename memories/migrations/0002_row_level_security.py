from django.db import migrations

from teams.rls import enable_team_isolation


class Migration(migrations.Migration):
    dependencies = [("memories", "0001_initial"), ("teams", "0002_row_level_security")]

    operations = [enable_team_isolation("memories_memory")]
