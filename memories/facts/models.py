"""The fact table: one row per version of `(team, entity, key)`."""

from __future__ import annotations

import uuid
from datetime import datetime

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.db import models
from django.db.models import Exists, OuterRef, Q

from memories.models import CreatedAtField
from teams.models import Team, personal_owner_field
from teams.validators import validate_key

MAX_FACT_VALUE_CHARS = 4000


class Sensitivity(models.TextChoices):
    """`high`: never injected, never answered to a read-only token, masked on the
    dashboard until revealed (and the reveal audited)."""

    NORMAL = "normal"
    HIGH = "high"


class FactQuerySet(models.QuerySet["Fact"]):
    def for_team(self, team_id: int) -> FactQuerySet:
        return self.filter(team_id=team_id)

    def active(self) -> FactQuerySet:
        return self.filter(is_active=True)

    def active_at(self, when: datetime) -> FactQuerySet:
        """Versions that were the active one at `when`: created by then, not deleted by
        then, not yet replaced by then (the successor's creation ends a version, as
        for memories)."""
        replaced = self.model.objects.filter(
            team_id=OuterRef("team_id"), supersedes_id=OuterRef("pk"), created_at__lte=when
        )
        return (
            self.filter(created_at__lte=when)
            .filter(Q(deleted_at__isnull=True) | Q(deleted_at__gt=when))
            .exclude(Exists(replaced))
        )

    def visible_to(self, *, may_see_high: bool) -> FactQuerySet:
        return self if may_see_high else self.filter(sensitivity=Sensitivity.NORMAL)


class Fact(models.Model):
    """One version of a team's answer to `(entity, key)`.

    At most one version per (team, entity, key) is active. A change never overwrites:
    the old row is marked inactive and the new row points at it through `supersedes`.
    A delete marks the active row inactive and sets `deleted_at`."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # No index on the team alone (migration 0021): the indexes that serve a team's reads
    # start with the team. One that held only the team was what the planner chose for an
    # exact lookup whenever its statistics did not know the team (facts written since the
    # last ANALYZE, estimated at one row), and each lookup then read and filtered all of
    # the team's facts (docs/facts.md, "Bench").
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="facts", db_index=False)
    entity = models.CharField(max_length=200, validators=[validate_key])
    key = models.CharField(max_length=200, validators=[validate_key])
    value = models.TextField()
    # "team", "project:<name>" or "user:<username>" (memories.facts.inputs.parse_scope).
    scope = models.CharField(max_length=200, default="team")
    # The person a personal entry belongs to: set by the database from the entity's
    # `@<username>` prefix (memories.personal); row-level security shows it to them only.
    owner = personal_owner_field()
    domains = ArrayField(models.CharField(max_length=50), default=list, blank=True)
    sensitivity = models.CharField(max_length=8, choices=Sensitivity.choices, default=Sensitivity.NORMAL)
    confidence = models.FloatField(default=1.0)
    is_active = models.BooleanField(default=True)
    deleted_at = models.DateTimeField(null=True, blank=True)
    deleted_by = models.CharField(max_length=200, blank=True, default="")
    supersedes = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="successors"
    )
    supersede_reason = models.TextField(blank=True, default="")
    # Provenance: who (the token's name, or the dashboard's user), from which agent
    # session, from which accepted draft, and when (created_at).
    updated_by = models.CharField(max_length=200, blank=True, default="")
    session = models.CharField(max_length=64, blank=True, default="")
    source_draft = models.UUIDField(null=True, blank=True)
    # An imported version: what the file said of it (its team, author, session and time);
    # the version itself is the importer's (memories.facts.transfer).
    imported_from = models.JSONField(null=True, blank=True)
    created_at = CreatedAtField(db_index=True)

    objects = FactQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["team", "entity", "key"],
                condition=Q(is_active=True),
                name="fact_one_active_per_entity_key",
            ),
            models.CheckConstraint(
                condition=Q(confidence__gte=0) & Q(confidence__lte=1), name="fact_confidence_range"
            ),
            models.CheckConstraint(condition=~Q(value=""), name="fact_value_not_empty"),
        ]
        indexes = [
            models.Index(fields=["team", "entity", "key", "-created_at"], name="fact_team_entity_key"),
            GinIndex(fields=["domains"], name="fact_domains_gin"),
        ]

    def __str__(self) -> str:
        return f"{self.entity}/{self.key}"
