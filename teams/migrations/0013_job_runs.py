"""The record of beat job runs moves here from freshness (teams is below every app that
runs a job, so each records its runs directly): `freshness_jobrun` (made by freshness
0003, which runs before this migration) is renamed with its rows, sequence and index.
The table is not team-scoped (counts only): no row-level security, before or after."""

from typing import Any

from django.db import migrations, models

OLD_TABLE = "freshness_jobrun"


def adopt_table(apps: Any, schema_editor: Any) -> None:
    model = apps.get_model("teams", "JobRun")
    schema_editor.alter_db_table(model, OLD_TABLE, model._meta.db_table)


def give_back_table(apps: Any, schema_editor: Any) -> None:
    model = apps.get_model("teams", "JobRun")
    schema_editor.alter_db_table(model, model._meta.db_table, OLD_TABLE)


class Migration(migrations.Migration):
    dependencies = [
        ("teams", "0012_audit_trail_append_only"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="JobRun",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("job", models.CharField(max_length=100)),
                        ("started_at", models.DateTimeField()),
                        ("finished_at", models.DateTimeField(blank=True, null=True)),
                        ("succeeded", models.BooleanField(blank=True, null=True)),
                        ("outcome", models.JSONField(blank=True, default=dict)),
                        ("error", models.CharField(blank=True, default="", max_length=500)),
                    ],
                    options={
                        "indexes": [models.Index(fields=["job", "-started_at"], name="jobrun_job_recent")],
                    },
                ),
            ],
        ),
        migrations.RunPython(adopt_table, give_back_table),
    ]
