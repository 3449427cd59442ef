from __future__ import annotations

import datetime
import hashlib

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from teams.validators import (
    MAX_FRESHNESS_DAYS,
    MAX_HALF_LIFE_DAYS,
    MAX_INJECTION_ENTRIES,
    MAX_INJECTION_TOKENS,
    MAX_RETENTION_DAYS,
    MIN_INJECTION_TOKENS,
    validate_dedup_threshold,
    validate_key,
    validate_team_slug,
)

_FRESHNESS_LIMITS = [MinValueValidator(1), MaxValueValidator(MAX_FRESHNESS_DAYS)]


class Team(models.Model):
    """The tenant. Its own table is not team-scoped; every table below it is."""

    slug = models.CharField(max_length=63, unique=True, validators=[validate_team_slug])
    name = models.CharField(max_length=200)
    # The limits below are the settings page's (teams.team_settings); the injection and
    # search code clamp to the same hard limits whatever a row holds.
    injection_max_entries = models.PositiveIntegerField(
        default=50, validators=[MaxValueValidator(MAX_INJECTION_ENTRIES)]
    )
    injection_max_tokens = models.PositiveIntegerField(
        default=2000,
        validators=[MinValueValidator(MIN_INJECTION_TOKENS), MaxValueValidator(MAX_INJECTION_TOKENS)],
    )
    decay_half_life_days = models.FloatField(
        default=30.0, validators=[MinValueValidator(0.0), MaxValueValidator(MAX_HALF_LIFE_DAYS)]
    )
    hybrid_vector_weight = models.FloatField(
        default=0.7, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)]
    )
    hybrid_keyword_weight = models.FloatField(
        default=0.3, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)]
    )
    embedding_profile = models.CharField(max_length=64, default="local")
    # Saving a new key whose content has at least this cosine similarity with an active
    # entry of the team is a duplicate (memories.writes.save_memory). 1.0: exact only.
    dedup_threshold = models.FloatField(default=0.92, validators=[validate_dedup_threshold])
    # Freshness windows (memories.freshness): an active entry unconfirmed for longer than
    # its type's window is `due` and gets a nudge. Null: never due. An entry confirmed by
    # two or more distinct actors gets at least `freshness_confirmed_days`. db_default
    # too: rows inserted by raw SQL (upgrade tests, the bench) get them.
    freshness_context_days = models.PositiveIntegerField(
        null=True, blank=True, default=30, db_default=30, validators=_FRESHNESS_LIMITS
    )
    freshness_decision_days = models.PositiveIntegerField(
        null=True, blank=True, default=30, db_default=30, validators=_FRESHNESS_LIMITS
    )
    freshness_lesson_days = models.PositiveIntegerField(
        null=True, blank=True, default=90, db_default=90, validators=_FRESHNESS_LIMITS
    )
    freshness_reference_days = models.PositiveIntegerField(
        null=True, blank=True, default=90, db_default=90, validators=_FRESHNESS_LIMITS
    )
    freshness_historical_days = models.PositiveIntegerField(
        null=True, blank=True, default=None, validators=_FRESHNESS_LIMITS
    )
    freshness_identity_days = models.PositiveIntegerField(
        null=True, blank=True, default=None, validators=_FRESHNESS_LIMITS
    )
    freshness_confirmed_days = models.PositiveIntegerField(
        null=True, blank=True, default=90, db_default=90, validators=_FRESHNESS_LIMITS
    )
    # Captured learnings (the client's capture hooks) become lesson entries at once
    # instead of pending drafts, when the capture would have been a draft with no
    # conflict (freshness.drafts.extract). Off: every capture waits for a person.
    capture_to_memory = models.BooleanField(default=False, db_default=False)
    # Windows by scope (memories.scopes): an entry's confirmation window and search decay
    # half-life are capped by its scope's. Null: no cap (project: the team's window).
    scope_window_team_days = models.PositiveIntegerField(
        null=True, blank=True, default=90, db_default=90, validators=_FRESHNESS_LIMITS
    )
    scope_window_project_days = models.PositiveIntegerField(
        null=True, blank=True, default=None, validators=_FRESHNESS_LIMITS
    )
    scope_window_user_days = models.PositiveIntegerField(
        null=True, blank=True, default=30, db_default=30, validators=_FRESHNESS_LIMITS
    )
    # Conversations (memories.conversations) older than this are deleted by the
    # retention job (docs/conversations.md, "Retention").
    conversation_retention_days = models.PositiveIntegerField(
        default=30, db_default=30, validators=[MinValueValidator(1), MaxValueValidator(MAX_RETENTION_DAYS)]
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # Moved by database triggers (teams.0015) on every change of the team's tokens
    # (revoke, expiry, scopes, delete) and vault entries: what a process's caches of them
    # (teams.token_cache, teams.vault_matcher) compare with the team's row, read anyway.
    token_version = models.BigIntegerField(default=0, db_default=0, editable=False)
    vault_version = models.BigIntegerField(default=0, db_default=0, editable=False)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(slug__regex=r"^[a-z0-9][a-z0-9-]{0,62}$"), name="team_slug_format"
            ),
            models.CheckConstraint(
                condition=Q(dedup_threshold__gt=0) & Q(dedup_threshold__lte=1),
                name="team_dedup_threshold_range",
            ),
            # A window of 0 days would make every entry due at once: null means "never".
            models.CheckConstraint(
                condition=Q(freshness_context_days__gt=0)
                & Q(freshness_decision_days__gt=0)
                & Q(freshness_lesson_days__gt=0)
                & Q(freshness_reference_days__gt=0)
                & Q(freshness_historical_days__gt=0)
                & Q(freshness_identity_days__gt=0)
                & Q(freshness_confirmed_days__gt=0),
                name="team_freshness_windows_positive",
            ),
            models.CheckConstraint(
                condition=Q(scope_window_team_days__gt=0)
                & Q(scope_window_project_days__gt=0)
                & Q(scope_window_user_days__gt=0),
                name="team_scope_windows_positive",
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

    # No index on the team alone: one of this table's indexes starts with the team
    # (docs/tenancy.md, "Indexes per team").
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships", db_index=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "user"], name="membership_once")]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"


def personal_owner_field() -> models.ForeignKey:  # type: ignore[type-arg]
    """The owner of a personal row (docs/tenancy.md, "Personal entries"): set by the
    database, never by a form; row-level security shows the row to that person only."""
    return models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        editable=False,
        on_delete=models.CASCADE,
        related_name="+",
    )


class AgentToken(models.Model):
    """An agent's credential. Only the SHA-256 of the token is stored: tokens are
    256-bit random values, so a fast hash is enough and lookups stay indexed."""

    class Scope(models.TextChoices):
        READ = "read"
        WRITE = "write"
        ADMIN = "admin"

    # No index on the team alone: one of this table's indexes starts with the team
    # (docs/tenancy.md, "Indexes per team").
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="tokens", db_index=False)
    name = models.CharField(max_length=100)
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    prefix = models.CharField(max_length=16, editable=False)
    scopes = ArrayField(models.CharField(max_length=16, choices=Scope.choices))
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    # Null: never expires. Past it, the token answers 401 like a revoked one.
    expires_at = models.DateTimeField(null=True, blank=True)
    # A person's token (sees the team's entries and that person's personal ones), or,
    # null, the team's (sees no personal entry): docs/tenancy.md, "Personal entries".
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="agent_tokens"
    )

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

    def is_expired(self, now: datetime.datetime) -> bool:
        return self.expires_at is not None and self.expires_at <= now

    def grants(self, scope: str) -> bool:
        # admin implies write and read; write implies read.
        order = [self.Scope.READ, self.Scope.WRITE, self.Scope.ADMIN]
        needed = order.index(self.Scope(scope))
        return any(order.index(self.Scope(s)) >= needed for s in self.scopes)


class VaultEntry(models.Model):
    """A team's configuration value or secret, kept apart from memory.

    Secret values live only in `ciphertext` (Fernet); `value` is empty for them.
    """

    # No index on the team alone: one of this table's indexes starts with the team
    # (docs/tenancy.md, "Indexes per team").
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="vault_entries", db_index=False)
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


class AuditEvent(models.Model):
    """The team's audit trail: who revealed, changed or deleted a vault secret, issued
    or revoked a token, changed a membership or re-indexed, from any surface (API,
    dashboard, commands). Team admins read it; nobody edits it: no login of the web or
    the workers may UPDATE, DELETE or TRUNCATE the table (teams.0012), and it outlives its
    team, whose shutdown is its last event (docs/tenancy.md, "The audit trail")."""

    class Action(models.TextChoices):
        VAULT_REVEAL = "vault.reveal"
        VAULT_SET = "vault.set"
        VAULT_DELETE = "vault.delete"
        FACT_REVEAL = "fact.reveal"
        TOKEN_CREATE = "token.create"  # noqa: S105 (an action name)
        TOKEN_REVOKE = "token.revoke"  # noqa: S105 (an action name)
        MEMBER_ADD = "member.add"
        MEMBER_ROLE = "member.role"
        MEMBER_REMOVE = "member.remove"
        TEAM_REINDEX = "team.reindex"
        TEAM_EXPORT = "team.export"
        TEAM_IMPORT = "team.import"
        TEAM_SETTINGS = "team.settings"
        TEAM_SHUTDOWN = "team.shutdown"

    # No constraint: the events stay when their team is shut down (its id is never given
    # again), and only the operator reads them then.
    # No index on the team alone: one of this table's indexes starts with the team
    # (docs/tenancy.md, "Indexes per team").
    team = models.ForeignKey(
        Team, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+", db_index=False
    )
    actor = models.CharField(max_length=200)
    action = models.CharField(max_length=32, choices=Action.choices)
    # Long enough for a settings change listing old -> new of every field.
    target = models.CharField(max_length=1000, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["team", "-created_at"], name="auditevent_team_recent")]

    def __str__(self) -> str:
        return f"{self.actor} {self.action} {self.target}"


class JobRun(models.Model):
    """One run of a beat job (teams.jobs.recorded_run): when, whether it finished, and its
    counts (checked, flagged, errors...), so operators see in the admin what the jobs
    did. Here, on the lowest floor with tables, so that every app's jobs (search's
    reconcile, freshness's passes, agents' session sweep) record theirs directly. Not
    team-scoped: a run spans teams and records only counts."""

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
