"""Freshness: when each version was last confirmed (existing versions: at
their creation), who confirmed it, its anchor and the flags freshness sets; the new
team-scoped Confirmation table gets row-level security at once."""

import uuid

import django.db.models.deletion
import django.db.models.functions.datetime
from django.db import migrations, models

import memories.models
from teams.rls import enable_team_isolation

# Every existing version was last confirmed when it was made. The owner role that runs
# migrations is bound by FORCE ROW LEVEL SECURITY: the backfill runs as the operator
# role (BYPASSRLS), and the role is reset before the schema changes that follow.
BACKFILL_CONFIRMED_AT = """
SET LOCAL ROLE memoryhub_operator;
UPDATE memories_memory SET last_confirmed_at = created_at;
RESET ROLE;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0006_index_retries"),
        ("teams", "0009_team_freshness_windows"),
    ]

    operations = [
        migrations.CreateModel(
            name="Confirmation",
            fields=[
                (
                    "id",
                    models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False),
                ),
                ("confirmed_by", models.CharField(blank=True, default="", max_length=200)),
                ("note", models.TextField(blank=True, default="")),
                ("confirmed_at", models.DateTimeField(auto_now_add=True)),
            ],
        ),
        migrations.AddField(
            model_name="memory",
            name="anchor",
            field=models.JSONField(blank=True, default=None, null=True),
        ),
        migrations.AddField(
            model_name="memory",
            name="anchor_broken_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="memory",
            name="confirmed_by_count",
            field=models.PositiveIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name="memory",
            name="contradicted_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="memory",
            name="last_confirmed_at",
            field=memories.models.ConfirmedAtField(db_default=django.db.models.functions.datetime.Now()),
        ),
        migrations.RunSQL(BACKFILL_CONFIRMED_AT, reverse_sql=migrations.RunSQL.noop),
        migrations.AddIndex(
            model_name="memory",
            index=models.Index(
                condition=models.Q(("is_active", True)),
                fields=["team", "last_confirmed_at"],
                name="memory_team_active_confirmed",
            ),
        ),
        migrations.AddField(
            model_name="confirmation",
            name="memory",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="confirmations",
                to="memories.memory",
            ),
        ),
        migrations.AddField(
            model_name="confirmation",
            name="team",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE, related_name="+", to="teams.team"
            ),
        ),
        migrations.AddIndex(
            model_name="confirmation",
            index=models.Index(fields=["team", "memory", "-confirmed_at"], name="confirmation_team_memory"),
        ),
        enable_team_isolation("memories_confirmation"),
    ]
