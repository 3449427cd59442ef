from __future__ import annotations

import hashlib
import uuid

from django.db import models
from django.db.models import Q

from memories.types import DEFAULT_TYPE, MemoryType
from teams.models import Team
from teams.validators import validate_key

MAX_CONTENT_BYTES = 64 * 1024


class SupersedeKind(models.TextChoices):
    HARD = "hard"
    SOFT = "soft"


class IndexState(models.TextChoices):
    PENDING = "pending"
    INDEXED = "indexed"
    FAILED = "failed"


class MemoryQuerySet(models.QuerySet["Memory"]):
    def for_team(self, team_id: int) -> MemoryQuerySet:
        return self.filter(team_id=team_id)

    def active(self) -> MemoryQuerySet:
        return self.filter(is_active=True)


class Memory(models.Model):
    """One version of what a team knows under a key.

    At most one version per (team, key) is active. A change never overwrites: the old
    row is marked inactive and the new row points at it through `supersedes`. A delete
    marks the active row inactive and sets `deleted_at`, so a superseded row and a
    deleted row are told apart without guessing.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memories")
    key = models.CharField(max_length=200, validators=[validate_key])
    content = models.TextField()
    type = models.CharField(max_length=16, choices=MemoryType.choices, default=DEFAULT_TYPE)
    project = models.CharField(max_length=200, blank=True, default="")
    metadata = models.JSONField(default=dict, blank=True)
    is_active = models.BooleanField(default=True)
    deleted_at = models.DateTimeField(null=True, blank=True)
    deleted_by = models.CharField(max_length=200, blank=True, default="")
    supersedes = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="successors",
    )
    supersede_reason = models.TextField(blank=True, default="")
    supersede_kind = models.CharField(max_length=8, choices=SupersedeKind.choices, blank=True, default="")
    updated_by = models.CharField(max_length=200, blank=True, default="")
    content_hash = models.CharField(max_length=64, editable=False)
    index_state = models.CharField(max_length=16, choices=IndexState.choices, default=IndexState.PENDING)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = MemoryQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["team", "key"],
                condition=Q(is_active=True),
                name="one_active_memory_per_team_key",
            ),
            models.CheckConstraint(
                condition=~(Q(is_active=True) & Q(deleted_at__isnull=False)),
                name="deleted_memory_is_inactive",
            ),
            models.CheckConstraint(condition=Q(type__in=MemoryType.values), name="memory_type_is_canonical"),
        ]
        indexes = [
            models.Index(fields=["team", "key", "-created_at"], name="memory_team_key_recent"),
            models.Index(
                fields=["team", "type", "-created_at"],
                condition=Q(is_active=True),
                name="memory_team_active_type",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.key} ({self.type})"

    @staticmethod
    def hash_content(content: str) -> str:
        return hashlib.sha256(content.encode()).hexdigest()

    @property
    def state(self) -> str:
        if self.deleted_at is not None:
            return "deleted"
        return "active" if self.is_active else "superseded"
