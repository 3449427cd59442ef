from __future__ import annotations

import hashlib
import uuid

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q
from django.utils import timezone

from teams.validators import validate_key, validate_team_slug


class Team(models.Model):
    """The tenant. Its own table is not team-scoped; every table below it is."""

    slug = models.CharField(max_length=63, unique=True, validators=[validate_team_slug])
    name = models.CharField(max_length=200)
    injection_max_entries = models.PositiveIntegerField(default=50)
    injection_max_tokens = models.PositiveIntegerField(default=2000)
    decay_half_life_days = models.FloatField(default=30.0)
    hybrid_vector_weight = models.FloatField(default=0.7)
    hybrid_keyword_weight = models.FloatField(default=0.3)
    embedding_profile = models.CharField(max_length=64, default="local")
    # Saving a new key whose content has at least this cosine similarity with an active
    # entry of the team is a duplicate (memories.services.save_memory). 1.0: exact only.
    dedup_threshold = models.FloatField(default=0.92)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(slug__regex=r"^[a-z0-9][a-z0-9-]{0,62}$"), name="team_slug_format"
            ),
            models.CheckConstraint(
                condition=Q(dedup_threshold__gt=0) & Q(dedup_threshold__lte=1),
                name="team_dedup_threshold_range",
            ),
        ]

    def __str__(self) -> str:
        return self.slug


class Membership(models.Model):
    class Role(models.TextChoices):
        OWNER = "owner"
        ADMIN = "admin"
        MEMBER = "member"
        VIEWER = "viewer"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "user"], name="membership_once")]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"


class AgentToken(models.Model):
    """An agent's credential. Only the SHA-256 of the token is stored: tokens are
    256-bit random values, so a fast hash is enough and lookups stay indexed."""

    class Scope(models.TextChoices):
        READ = "read"
        WRITE = "write"
        ADMIN = "admin"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="tokens")
    name = models.CharField(max_length=100)
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    prefix = models.CharField(max_length=16, editable=False)
    scopes = ArrayField(models.CharField(max_length=16, choices=Scope.choices))
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["team", "name"],
                condition=Q(revoked_at__isnull=True),
                name="token_name_unique_while_live",
            )
        ]
        indexes = [models.Index(fields=["team", "created_at"])]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @staticmethod
    def hash_token(raw: str) -> str:
        return hashlib.sha256(raw.encode()).hexdigest()

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None

    def grants(self, scope: str) -> bool:
        # admin implies write and read; write implies read.
        order = [self.Scope.READ, self.Scope.WRITE, self.Scope.ADMIN]
        needed = order.index(self.Scope(scope))
        return any(order.index(self.Scope(s)) >= needed for s in self.scopes)


class VaultEntry(models.Model):
    """A team's configuration value or secret, kept apart from memory.

    Secret values live only in `ciphertext` (Fernet); `value` is empty for them.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="vault_entries")
    key = models.CharField(max_length=200, validators=[validate_key])
    value = models.TextField(blank=True, default="")
    ciphertext = models.TextField(blank=True, default="")
    is_secret = models.BooleanField(default=False)
    updated_by = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "key"], name="vault_key_once_per_team"),
            models.CheckConstraint(
                condition=Q(is_secret=False, ciphertext="") | Q(is_secret=True, value=""),
                name="vault_secret_never_in_plain_column",
            ),
        ]
        verbose_name_plural = "vault entries"

    def __str__(self) -> str:
        return f"{self.team_id}:{self.key}"


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
