"""Personal entries: a memory whose key, or a fact whose entity, starts with
`@<username>` belongs to that member, and row-level security shows it to them only
(teams.rls.enable_personal_rows)."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from teams.rls import PERSONAL_FUNCTIONS, PERSONAL_FUNCTIONS_REVERSE, enable_personal_rows


def _owner_field() -> models.ForeignKey:
    return models.ForeignKey(
        blank=True,
        editable=False,
        null=True,
        on_delete=django.db.models.deletion.CASCADE,
        related_name="+",
        to=settings.AUTH_USER_MODEL,
    )


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0015_memory_original_type_and_auto_captured"),
        ("teams", "0016_agenttoken_user"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(model_name="fact", name="owner", field=_owner_field()),
        migrations.AddField(model_name="memory", name="owner", field=_owner_field()),
        migrations.RunSQL(PERSONAL_FUNCTIONS, reverse_sql=PERSONAL_FUNCTIONS_REVERSE),
        enable_personal_rows("memories_memory", name_column="key"),
        enable_personal_rows("memories_fact", name_column="entity"),
    ]
