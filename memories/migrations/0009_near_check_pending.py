"""The batch save's deferred near-duplicate check: one boolean column with a
constant default, which PostgreSQL adds without rewriting the table. Row-level security
is unchanged."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0008_archive"),
    ]

    operations = [
        migrations.AddField(
            model_name="memory",
            name="near_check_pending",
            field=models.BooleanField(db_default=False, default=False),
        ),
    ]
