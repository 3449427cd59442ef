"""MemoryHub's beat jobs in django-celery-beat's schedule (docs/indexing-and-workers.md,
"Beat: the schedule and job runs").

Created once, by name: an operator's later changes in the admin (Periodic tasks) stay,
and a job an operator deleted is not brought back by a later deploy."""

from django.db import migrations

# (name, task, every, period)
DEFAULT_JOBS = [
    ("Re-enqueue memories left unindexed", "search.reconcile_index_states", 60, "seconds"),
    ("Expire agent sessions without a heartbeat", "agents.expire_sessions", 5, "minutes"),
    ("Mark entries due for confirmation", "freshness.mark_due", 1, "hours"),
    ("Propose archiving old unused entries", "freshness.propose_prunes", 1, "days"),
]


def create_jobs(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    for name, task, every, period in DEFAULT_JOBS:
        interval, _ = IntervalSchedule.objects.get_or_create(every=every, period=period)
        PeriodicTask.objects.get_or_create(name=name, defaults={"task": task, "interval": interval})


def remove_jobs(apps, schema_editor):
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTask.objects.filter(name__in=[name for name, *_ in DEFAULT_JOBS]).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("freshness", "0003_job_runs"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(create_jobs, remove_jobs)]
