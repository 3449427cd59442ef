"""AgentSession now belongs to agents (agents 0001 takes over the table); teams only
forgets the model, the table stays."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("teams", "0005_audit_trail"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[migrations.DeleteModel(name="AgentSession")]),
    ]
