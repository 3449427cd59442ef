"""Nudges: what freshness asks people and agents to look at (issue 12).

A nudge concerns one entry (a `due` or `anchor_broken` entry, a `prune` proposal) or
two (a `contradiction` links the new entry and the one it disagrees with). It says what
to do in `message`, waits `open`, and ends `resolved` (by confirming, superseding or
archiving) or `dismissed`. Jobs are idempotent through the database: at most one open
nudge per (team, kind, entry, other entry).
"""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q

from memories.models import Memory
from teams.models import Team

MAX_MESSAGE_CHARS = 2000


class NudgeKind(models.TextChoices):
    DUE = "due"
    ANCHOR_BROKEN = "anchor_broken"
    CONTRADICTION = "contradiction"
    PRUNE = "prune"


class NudgeState(models.TextChoices):
    OPEN = "open"
    RESOLVED = "resolved"
    DISMISSED = "dismissed"


class NudgeAction(models.TextChoices):
    """How a nudge is resolved (freshness.services.resolve_nudge)."""

    CONFIRM = "confirm"
    DISMISS = "dismiss"
    ARCHIVE = "archive"
    SUPERSEDE = "supersede"
    # A contradiction that is none: both entries are confirmed, and the pair is never
    # raised again (freshness.services.raise_contradictions checks resolved nudges).
    COMPATIBLE = "compatible"


class Nudge(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=16, choices=NudgeKind.choices)
    # The entry the nudge is about (the version that was active when it was made).
    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="nudges")
    # A contradiction's other entry: the one the new entry disagrees with.
    other_memory = models.ForeignKey(
        Memory, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    message = models.TextField()
    # What the job found, for the reader and for the resolution flows (e.g. the days
    # since the last confirmation, an anchor check's status). Small, job-written.
    details = models.JSONField(default=dict, blank=True)
    state = models.CharField(max_length=16, choices=NudgeState.choices, default=NudgeState.OPEN)
    resolution = models.CharField(max_length=16, choices=NudgeAction.choices, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.CharField(max_length=200, blank=True, default="")

    class Meta:
        constraints = [
            # Jobs re-run: a second run finds the open nudge instead of making another.
            # NULLS NOT DISTINCT: nudges about one entry (other_memory null) count too.
            models.UniqueConstraint(
                fields=["team", "kind", "memory", "other_memory"],
                condition=Q(state="open"),
                nulls_distinct=False,
                name="one_open_nudge_per_kind_and_entries",
            ),
            models.CheckConstraint(
                condition=Q(state="open", resolved_at__isnull=True, resolution="")
                | (~Q(state="open") & Q(resolved_at__isnull=False)),
                name="nudge_resolved_has_time",
            ),
            models.CheckConstraint(
                condition=Q(kind="contradiction", other_memory__isnull=False)
                | (~Q(kind="contradiction") & Q(other_memory__isnull=True)),
                name="nudge_contradiction_links_two",
            ),
        ]
        indexes = [
            models.Index(
                fields=["team", "-created_at"], condition=Q(state="open"), name="nudge_team_open_recent"
            ),
            models.Index(fields=["team", "memory"], name="nudge_team_memory"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} nudge on {self.memory_id} ({self.state})"


class JobRun(models.Model):
    """One run of a beat job (freshness.jobs.recorded_run): when, whether it finished,
    and its counts (checked, flagged, errors...), so operators see in the admin what the
    jobs did. Not team-scoped: a run spans teams and records only counts."""

    job = models.CharField(max_length=100)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    succeeded = models.BooleanField(null=True, blank=True)
    outcome = models.JSONField(default=dict, blank=True)
    error = models.CharField(max_length=500, blank=True, default="")

    class Meta:
        indexes = [models.Index(fields=["job", "-started_at"], name="jobrun_job_recent")]

    def __str__(self) -> str:
        return f"{self.job} at {self.started_at:%Y-%m-%d %H:%M:%S}"
