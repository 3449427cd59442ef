"""The anchor job in beat's schedule (docs/freshness.md, "Anchors"), created
once by name like 0004's jobs: an operator's later change in the admin stays."""

from django.db import migrations

# (name, task, every, period)
ANCHOR_JOB = ("Check url and api anchors", "freshness.check_anchors", 1, "hours")


def create_job(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    name, task, every, period = ANCHOR_JOB
    interval, _ = IntervalSchedule.objects.get_or_create(every=every, period=period)
    PeriodicTask.objects.get_or_create(name=name, defaults={"task": task, "interval": interval})


def remove_job(apps, schema_editor):
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTask.objects.filter(name=ANCHOR_JOB[0]).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("freshness", "0005_anchor_checks_and_drafts"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(create_job, remove_job)]
