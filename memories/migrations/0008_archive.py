"""Archive: a soft state of the key's last version, inactive but neither
replaced nor deleted. Columns only: the table's row-level security is unchanged."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0007_freshness"),
    ]

    operations = [
        migrations.AddField(
            model_name="memory",
            name="archived_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="memory",
            name="archived_by",
            field=models.CharField(blank=True, db_default="", default="", max_length=200),
        ),
        migrations.AddConstraint(
            model_name="memory",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("archived_at__isnull", True),
                    models.Q(("deleted_at__isnull", True), ("is_active", False)),
                    _connector="OR",
                ),
                name="archived_memory_is_inactive_not_deleted",
            ),
        ),
    ]
