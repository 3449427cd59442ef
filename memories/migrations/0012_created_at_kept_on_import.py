"""created_at (and a note's created_at, a confirmation's confirmed_at) keeps a time the
row was given on insert: an import keeps when each version was made. No SQL."""

from django.db import migrations

import memories.models


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0011_memory_plural"),
    ]

    operations = [
        migrations.AlterField(
            model_name="annotation",
            name="created_at",
            field=memories.models.CreatedAtField(auto_now_add=True),
        ),
        migrations.AlterField(
            model_name="confirmation",
            name="confirmed_at",
            field=memories.models.CreatedAtField(auto_now_add=True),
        ),
        migrations.AlterField(
            model_name="memory",
            name="created_at",
            field=memories.models.CreatedAtField(auto_now_add=True, db_index=True),
        ),
    ]
