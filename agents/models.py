from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q
from django.utils import timezone

from teams.models import AgentToken, Team


class AgentSession(models.Model):
    """One running agent process (a Claude Code window, a CI job...) that booted
    against the team. Live while `ended_at` is null and a heartbeat came within the
    TTL (MEMORYHUB_SESSION_TTL_SECONDS); a boot ends the team's sessions that missed
    it. Clients send the id back as `X-MemoryHub-Session` to keep it alive."""

    class EndReason(models.TextChoices):
        ENDED = "ended"  # the client said goodbye (DELETE)
        EXPIRED = "expired"  # no heartbeat within the TTL, found by a later boot

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="agent_sessions")
    # The token that booted it (kept if the token is later deleted, by name).
    token = models.ForeignKey(
        AgentToken, null=True, blank=True, on_delete=models.SET_NULL, related_name="sessions"
    )
    agent = models.CharField(max_length=100)
    source = models.CharField(max_length=64, blank=True, default="")
    project = models.CharField(max_length=200, blank=True, default="")
    cwd = models.CharField(max_length=1024, blank=True, default="")
    pid = models.PositiveIntegerField(null=True, blank=True)
    host = models.CharField(max_length=255, blank=True, default="")
    current_task = models.CharField(max_length=1000, blank=True, default="")
    started_at = models.DateTimeField(default=timezone.now)
    last_heartbeat_at = models.DateTimeField(default=timezone.now)
    ended_at = models.DateTimeField(null=True, blank=True)
    end_reason = models.CharField(max_length=8, choices=EndReason.choices, blank=True, default="")

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(ended_at__isnull=True, end_reason="")
                | Q(ended_at__isnull=False, end_reason__in=["ended", "expired"]),
                name="session_end_has_reason",
            )
        ]
        indexes = [
            # Live sessions of a team (and of one project), newest first: the list and
            # the boot's "who else is here"; the sweep reads the same rows.
            models.Index(
                fields=["team", "project", "-started_at"],
                condition=Q(ended_at__isnull=True),
                name="session_team_live_project",
            ),
            models.Index(
                fields=["team", "-started_at"],
                condition=Q(ended_at__isnull=True),
                name="session_team_live",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.agent} {self.project or '-'} ({self.id})"
