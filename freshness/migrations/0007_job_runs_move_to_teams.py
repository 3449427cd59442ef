"""JobRun now belongs to teams (teams 0013 takes over the table); freshness only forgets
the model, the table stays."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("freshness", "0006_anchor_check_job"),
        ("teams", "0013_job_runs"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[migrations.DeleteModel(name="JobRun")]),
    ]
