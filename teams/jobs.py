"""The record of each beat job's runs (JobRun), kept short: the newest KEEP_RUNS per job.
Every app's jobs record through `recorded_run` (docs/indexing-and-workers.md, "Beat: the
schedule and job runs")."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.utils import timezone

from teams.models import JobRun

KEEP_RUNS = 200


@contextmanager
def recorded_run(job: str) -> Iterator[dict[str, Any]]:
    """Record a run of `job`: the block fills the dict it is given with its counts. A
    run that raises is recorded as failed, with the exception's type (never its message:
    messages can carry user text), and re-raised. Call it outside any transaction: the
    start is on record while the run goes on."""
    run = JobRun.objects.create(job=job, started_at=timezone.now())
    outcome: dict[str, Any] = {}
    try:
        yield outcome
    except Exception as exc:
        run.succeeded, run.error = False, f"{type(exc).__name__}"[:500]
        raise
    else:
        run.succeeded = True
    finally:
        run.finished_at, run.outcome = timezone.now(), outcome
        run.save(update_fields=["finished_at", "succeeded", "outcome", "error"])
        _forget_old_runs(job)


def _forget_old_runs(job: str) -> None:
    """At most KEEP_RUNS rows per job: one bounded DELETE per run."""
    cutoff = (
        JobRun.objects.filter(job=job).order_by("-started_at", "-id").values_list("started_at", flat=True)
    )
    oldest_kept = cutoff[KEEP_RUNS - 1 : KEEP_RUNS].first()
    if oldest_kept is not None:
        JobRun.objects.filter(job=job, started_at__lt=oldest_kept).delete()
