"""Nudges, a team-scoped table under row-level security from the start."""

import uuid

import django.db.models.deletion
from django.db import migrations, models

from teams.rls import enable_team_isolation


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("memories", "0007_freshness"),
        ("teams", "0009_team_freshness_windows"),
    ]

    operations = [
        migrations.CreateModel(
            name="Nudge",
            fields=[
                (
                    "id",
                    models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False),
                ),
                (
                    "kind",
                    models.CharField(
                        choices=[
                            ("due", "Due"),
                            ("anchor_broken", "Anchor Broken"),
                            ("contradiction", "Contradiction"),
                            ("prune", "Prune"),
                        ],
                        max_length=16,
                    ),
                ),
                ("message", models.TextField()),
                ("details", models.JSONField(blank=True, default=dict)),
                (
                    "state",
                    models.CharField(
                        choices=[("open", "Open"), ("resolved", "Resolved"), ("dismissed", "Dismissed")],
                        default="open",
                        max_length=16,
                    ),
                ),
                (
                    "resolution",
                    models.CharField(
                        blank=True,
                        choices=[
                            ("confirm", "Confirm"),
                            ("dismiss", "Dismiss"),
                            ("archive", "Archive"),
                            ("supersede", "Supersede"),
                        ],
                        default="",
                        max_length=16,
                    ),
                ),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("resolved_at", models.DateTimeField(blank=True, null=True)),
                ("resolved_by", models.CharField(blank=True, default="", max_length=200)),
                (
                    "memory",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="nudges",
                        to="memories.memory",
                    ),
                ),
                (
                    "other_memory",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
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
                        condition=models.Q(("state", "open")),
                        fields=["team", "-created_at"],
                        name="nudge_team_open_recent",
                    ),
                    models.Index(fields=["team", "memory"], name="nudge_team_memory"),
                ],
                "constraints": [
                    models.UniqueConstraint(
                        condition=models.Q(("state", "open")),
                        fields=("team", "kind", "memory", "other_memory"),
                        name="one_open_nudge_per_kind_and_entries",
                        nulls_distinct=False,
                    ),
                    models.CheckConstraint(
                        condition=models.Q(
                            models.Q(("resolution", ""), ("resolved_at__isnull", True), ("state", "open")),
                            models.Q(
                                models.Q(("state", "open"), _negated=True), ("resolved_at__isnull", False)
                            ),
                            _connector="OR",
                        ),
                        name="nudge_resolved_has_time",
                    ),
                    models.CheckConstraint(
                        condition=models.Q(
                            models.Q(("kind", "contradiction"), ("other_memory__isnull", False)),
                            models.Q(
                                models.Q(("kind", "contradiction"), _negated=True),
                                ("other_memory__isnull", True),
                            ),
                            _connector="OR",
                        ),
                        name="nudge_contradiction_links_two",
                    ),
                ],
            },
        ),
        enable_team_isolation("freshness_nudge"),
    ]
