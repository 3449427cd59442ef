"""Belief revision (unsupersede, restored_from) and quality signals (access counts,
votes, annotations). The new team-scoped table gets row-level security at once."""

import uuid

import django.db.models.deletion
from django.db import migrations, models

from teams.rls import enable_team_isolation


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0002_row_level_security"),
        ("teams", "0002_row_level_security"),
    ]

    operations = [
        migrations.AddField(
            model_name="memory",
            name="access_count",
            field=models.PositiveBigIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="memory",
            name="downvotes",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="memory",
            name="last_accessed_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="memory",
            name="restored_from",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to="memories.memory",
            ),
        ),
        migrations.AddField(
            model_name="memory",
            name="upvotes",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AlterField(
            model_name="memory",
            name="supersede_kind",
            field=models.CharField(
                blank=True,
                choices=[("hard", "Hard"), ("soft", "Soft"), ("unsupersede", "Unsupersede")],
                default="",
                max_length=16,
            ),
        ),
        migrations.CreateModel(
            name="Annotation",
            fields=[
                (
                    "id",
                    models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False),
                ),
                ("note", models.TextField()),
                ("created_by", models.CharField(blank=True, default="", max_length=200)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "memory",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="annotations",
                        to="memories.memory",
                    ),
                ),
                (
                    "team",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="teams.team"
                    ),
                ),
            ],
            options={
                "indexes": [
                    models.Index(
                        fields=["team", "memory", "-created_at"], name="annotation_team_memory_recent"
                    )
                ],
                "constraints": [
                    models.CheckConstraint(
                        condition=models.Q(("note", ""), _negated=True), name="annotation_note_not_empty"
                    )
                ],
            },
        ),
        enable_team_isolation("memories_annotation"),
    ]
