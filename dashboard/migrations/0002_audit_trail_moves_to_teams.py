"""The audit model now belongs to teams (teams 0005 took over the table); the dashboard
only forgets it."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("dashboard", "0001_initial"),
        ("teams", "0005_audit_trail"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[migrations.DeleteModel(name="AuditEvent")]),
    ]
