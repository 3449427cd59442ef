"""Agent sessions move here from teams: `teams_agentsession`
(made by teams 0003) is renamed with its rows and policy."""

import uuid

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models

from teams.rls import adopt_team_table


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("teams", "0004_team_dedup_threshold"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="AgentSession",
                    fields=[
                        (
                            "id",
                            models.UUIDField(
                                default=uuid.uuid4, editable=False, primary_key=True, serialize=False
                            ),
                        ),
                        ("agent", models.CharField(max_length=100)),
                        ("source", models.CharField(blank=True, default="", max_length=64)),
                        ("project", models.CharField(blank=True, default="", max_length=200)),
                        ("cwd", models.CharField(blank=True, default="", max_length=1024)),
                        ("pid", models.PositiveIntegerField(blank=True, null=True)),
                        ("host", models.CharField(blank=True, default="", max_length=255)),
                        ("current_task", models.CharField(blank=True, default="", max_length=1000)),
                        ("started_at", models.DateTimeField(default=django.utils.timezone.now)),
                        ("last_heartbeat_at", models.DateTimeField(default=django.utils.timezone.now)),
                        ("ended_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "end_reason",
                            models.CharField(
                                blank=True,
                                choices=[("ended", "Ended"), ("expired", "Expired")],
                                default="",
                                max_length=8,
                            ),
                        ),
                        (
                            "team",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="agent_sessions",
                                to="teams.team",
                            ),
                        ),
                        (
                            "token",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="sessions",
                                to="teams.agenttoken",
                            ),
                        ),
                    ],
                    options={
                        "indexes": [
                            models.Index(
                                condition=models.Q(("ended_at__isnull", True)),
                                fields=["team", "project", "-started_at"],
                                name="session_team_live_project",
                            ),
                            models.Index(
                                condition=models.Q(("ended_at__isnull", True)),
                                fields=["team", "-started_at"],
                                name="session_team_live",
                            ),
                        ],
                        "constraints": [
                            models.CheckConstraint(
                                condition=models.Q(
                                    models.Q(("end_reason", ""), ("ended_at__isnull", True)),
                                    models.Q(
                                        ("end_reason__in", ["ended", "expired"]), ("ended_at__isnull", False)
                                    ),
                                    _connector="OR",
                                ),
                                name="session_end_has_reason",
                            )
                        ],
                    },
                ),
            ],
        ),
        adopt_team_table("teams_agentsession", app_label="agents", model_name="AgentSession"),
    ]
