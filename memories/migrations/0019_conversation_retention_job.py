"""The conversation retention job in beat's schedule (docs/conversations.md,
"Retention"), created once by name like freshness.0004's jobs: an operator's later
change in the admin stays."""

from django.db import migrations

# (name, task, every, period)
RETENTION_JOB = ("Delete expired conversations", "memories.delete_expired_conversations", 1, "hours")


def create_job(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    name, task, every, period = RETENTION_JOB
    interval, _ = IntervalSchedule.objects.get_or_create(every=every, period=period)
    PeriodicTask.objects.get_or_create(name=name, defaults={"task": task, "interval": interval})


def remove_job(apps, schema_editor):
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTask.objects.filter(name=RETENTION_JOB[0]).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0018_conversations"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(create_job, remove_job)]
