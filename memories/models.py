from __future__ import annotations

import hashlib
import uuid
from datetime import datetime
from typing import Any

from django.contrib.postgres.indexes import GinIndex
from django.db import models
from django.db.models import Exists, F, OuterRef, Q
from django.db.models.expressions import DatabaseDefault
from django.db.models.fields.json import KT
from django.db.models.functions import Now

from memories.types import DEFAULT_TYPE, MemoryType
from teams.models import Team, personal_owner_field
from teams.validators import validate_key

MAX_CONTENT_BYTES = 64 * 1024


class CreatedAtField(models.DateTimeField):  # type: ignore[type-arg]
    """When a row was made: now on insert (auto_now_add), unless the row was given a time.
    Only an import gives one (memories.writes.importing): an imported version, note or
    confirmation keeps the time it was made, which drives decay and orders history."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("auto_now_add", True)
        super().__init__(*args, **kwargs)

    def pre_save(self, model_instance: models.Model, add: bool) -> Any:
        given = getattr(model_instance, self.attname)
        if add and given is not None:
            return given
        return super().pre_save(model_instance, add)


class ConfirmedAtField(models.DateTimeField):  # type: ignore[type-arg]
    """When a version was last confirmed as still true. A new row starts confirmed at
    its creation: on insert, a row given no value takes its own `created_at`, which
    auto_now_add has just set (this field is declared after it, and Django prepares an
    INSERT's values in field order). Rows inserted by raw SQL get the column's default."""

    def pre_save(self, model_instance: models.Model, add: bool) -> Any:
        value = getattr(model_instance, self.attname)
        if add and (value is None or isinstance(value, DatabaseDefault)):
            value = model_instance.created_at  # type: ignore[attr-defined]
            setattr(model_instance, self.attname, value)
        return super().pre_save(model_instance, add)


class SupersedeKind(models.TextChoices):
    HARD = "hard"
    SOFT = "soft"
    # A new row that restores the content of the version the active one replaced
    # (services.unsupersede_memory): history is appended to, never rewritten.
    UNSUPERSEDE = "unsupersede"


class IndexState(models.TextChoices):
    PENDING = "pending"
    INDEXED = "indexed"
    FAILED = "failed"


class MemoryState(models.TextChoices):
    """Where a version stands. Supersede, delete and archive all clear is_active; only a
    delete sets deleted_at and only an archive archived_at, so the three are told apart
    without guessing. An archived version is the key's last one, put aside (by the
    prune and contradiction flows) and restorable as it is."""

    ACTIVE = "active"
    SUPERSEDED = "superseded"
    DELETED = "deleted"
    ARCHIVED = "archived"

    def condition(self) -> Q:
        """The one SQL definition of each state (filters, counts and the admin use it)."""
        return {
            MemoryState.ACTIVE: Q(is_active=True),
            MemoryState.SUPERSEDED: Q(is_active=False, deleted_at__isnull=True, archived_at__isnull=True),
            MemoryState.DELETED: Q(deleted_at__isnull=False),
            MemoryState.ARCHIVED: Q(archived_at__isnull=False),
        }[self]


class MemoryQuerySet(models.QuerySet["Memory"]):
    def for_team(self, team_id: int) -> MemoryQuerySet:
        return self.filter(team_id=team_id)

    def active(self) -> MemoryQuerySet:
        return self.in_state(MemoryState.ACTIVE)

    def in_state(self, state: str) -> MemoryQuerySet:
        """Versions in one MemoryState; any other value ("all") filters nothing."""
        if state not in MemoryState.values:
            return self
        return self.filter(MemoryState(state).condition())

    def active_at(self, when: datetime) -> MemoryQuerySet:
        """Versions that were the active one at `when`: created by then, not deleted by
        then, and not yet replaced by then. A version stops being active when its
        successor (the row whose `supersedes` is it) is created, so the end of each
        version is derived in SQL (NOT EXISTS over the successor) rather than stored."""
        replaced = self.model.objects.filter(
            team_id=OuterRef("team_id"), supersedes_id=OuterRef("pk"), created_at__lte=when
        )
        return (
            self.filter(created_at__lte=when)
            .filter(Q(deleted_at__isnull=True) | Q(deleted_at__gt=when))
            .filter(Q(archived_at__isnull=True) | Q(archived_at__gt=when))
            .exclude(Exists(replaced))
        )


class Memory(models.Model):
    """One version of what a team knows under a key.

    At most one version per (team, key) is active. A change never overwrites: the old
    row is marked inactive and the new row points at it through `supersedes`. A delete
    marks the active row inactive and sets `deleted_at`, so a superseded row and a
    deleted row are told apart without guessing.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # No index on the team alone: one of this table's indexes starts with the team
    # (docs/tenancy.md, "Indexes per team").
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memories", db_index=False)
    key = models.CharField(max_length=200, validators=[validate_key])
    content = models.TextField()
    type = models.CharField(max_length=16, choices=MemoryType.choices, default=DEFAULT_TYPE)
    project = models.CharField(max_length=200, blank=True, default="")
    metadata = models.JSONField(default=dict, blank=True)
    # The person a personal entry belongs to: set by the database from the key's
    # `@<username>` prefix (memories.personal); row-level security shows it to them only.
    owner = personal_owner_field()
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
    supersede_kind = models.CharField(max_length=16, choices=SupersedeKind.choices, blank=True, default="")
    # On an unsupersede row: the version whose content it brought back.
    restored_from = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    updated_by = models.CharField(max_length=200, blank=True, default="")
    content_hash = models.CharField(max_length=64, editable=False)
    index_state = models.CharField(max_length=16, choices=IndexState.choices, default=IndexState.PENDING)
    # Indexing bookkeeping (search.services; docs/indexing-and-workers.md, "Index retries:
    # lease, backoff, give up"). Changed only by UPDATE statements, so they never move updated_at.
    # When an index task was last handed to the broker: the reconcile job leaves the
    # entry alone for a lease after that, instead of queueing it again and again.
    index_queued_at = models.DateTimeField(null=True, blank=True)
    # Failed attempts since the last success (or manual retry); at
    # MEMORYHUB_INDEX_MAX_ATTEMPTS a `failed` entry is given up on until retried by hand.
    # (db_default too: rows inserted by raw SQL, as the bench and tests do, get it.)
    index_attempts = models.PositiveIntegerField(default=0, db_default=0)
    # The earliest the reconcile job retries a failed entry (exponential backoff).
    index_next_attempt_at = models.DateTimeField(null=True, blank=True)
    # The class of the last indexing error (never its message: it may name the
    # provider's internal URL).
    index_last_error = models.CharField(max_length=100, blank=True, default="", db_default="")
    # Saved by a batch under a new key without the near-duplicate check, which runs once
    # the entry is indexed (search.duplicates_after_indexing; docs/write-path.md, "Near
    # duplicates after indexing (batch saves)"). Changed only by UPDATE statements.
    near_check_pending = models.BooleanField(default=False, db_default=False)
    created_at = CreatedAtField(db_index=True)
    updated_at = models.DateTimeField(auto_now=True)
    # Quality signals. Changed only by UPDATE statements (feedback.record_access,
    # feedback.rate_memory), never by Model.save(), so they never move updated_at:
    # reading or rating an entry does not change it.
    access_count = models.PositiveBigIntegerField(default=0)
    last_accessed_at = models.DateTimeField(null=True, blank=True)
    upvotes = models.PositiveIntegerField(default=0)
    downvotes = models.PositiveIntegerField(default=0)
    # A skill: {name, keywords, projects, always_on}, normalised by memories.skills. The
    # active entry carrying a name is loaded by GET skills/{name}/, fires in search when a
    # keyword is in the query, and is injected when always_on. Null: not a skill.
    skill_trigger = models.JSONField(null=True, blank=True, default=None)
    # Freshness (memories.freshness; docs/freshness.md, "Freshness state and windows"). Bookkeeping, changed
    # only by UPDATE statements (services.confirm_memory, set_freshness_flag), never by
    # Model.save(): confirming an entry or flagging it does not move updated_at.
    last_confirmed_at = ConfirmedAtField(db_default=Now())
    # How many distinct actors confirmed this version (its Confirmation rows): two or
    # more earn the team's longer window. Kept here so that freshness is derived from the
    # row alone, in lists and in the due job's SQL.
    confirmed_by_count = models.PositiveIntegerField(default=0, db_default=0)
    # What the entry can be checked against: {type: url|file|api, value, expect?}
    # (memories.anchors). Null: nothing to check.
    anchor = models.JSONField(null=True, blank=True, default=None)
    # The flags freshness cannot derive: set when a check found the anchor broken or a
    # contradiction was detected (and its nudge opened), cleared when that is resolved.
    anchor_broken_at = models.DateTimeField(null=True, blank=True)
    contradicted_at = models.DateTimeField(null=True, blank=True)
    # Archived (services.archive_memory): the key's active version put aside, inactive
    # but neither replaced nor deleted. Out of search's default results, injection and
    # every job over active entries; in history, and back with services.restore_archived.
    archived_at = models.DateTimeField(null=True, blank=True)
    archived_by = models.CharField(max_length=200, blank=True, default="", db_default="")
    # Pinned: always injected, right after identity, within the token budget
    # (agents.injection). Set by a save; a supersede keeps it only when asked to
    # (`inherit_pinned`): a pin vouches for one text, not for whatever replaces it.
    pinned = models.BooleanField(default=False, db_default=False)
    # The type name the writer gave when it was an alias (an Open Brain client's
    # "meeting", say), kept so that a client reads back what it wrote; "" for a
    # canonical name. Carried over, like the type, by a supersede that leaves it out.
    original_type = models.CharField(max_length=32, blank=True, default="", db_default="")
    # This version was captured from a session (a draft accepted or merged by a person),
    # not saved on purpose by a writer. Per version: a correction typed by hand is not.
    auto_captured = models.BooleanField(default=False, db_default=False)

    objects = MemoryQuerySet.as_manager()

    class Meta:
        verbose_name_plural = "memories"
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
            models.CheckConstraint(
                condition=Q(archived_at__isnull=True) | Q(is_active=False, deleted_at__isnull=True),
                name="archived_memory_is_inactive_not_deleted",
            ),
            models.CheckConstraint(condition=Q(type__in=MemoryType.values), name="memory_type_is_canonical"),
            # One active skill of a name per team; superseded and deleted skills give it up.
            models.UniqueConstraint(
                F("team"),
                KT("skill_trigger__name"),
                condition=Q(is_active=True, skill_trigger__isnull=False),
                name="one_active_skill_per_team_name",
            ),
            models.CheckConstraint(
                condition=Q(skill_trigger__isnull=True) | Q(skill_trigger__has_key="name"),
                name="skill_trigger_has_name",
            ),
        ]
        indexes = [
            models.Index(fields=["team", "key", "-created_at"], name="memory_team_key_recent"),
            models.Index(
                fields=["team", "type", "-created_at"],
                condition=Q(is_active=True),
                name="memory_team_active_type",
            ),
            GinIndex(fields=["metadata"], name="memory_metadata_gin", opclasses=["jsonb_path_ops"]),
            # Injection's pinned section: a team's few pinned active entries, newest first.
            models.Index(
                fields=["team", "-created_at"],
                condition=Q(is_active=True, pinned=True),
                name="memory_team_active_pinned",
            ),
            # Exact-duplicate check of a save (services.save_memory).
            models.Index(
                fields=["team", "content_hash"],
                condition=Q(is_active=True),
                name="memory_team_active_hash",
            ),
            # The reconcile job's scan of entries whose indexing is not done, across teams.
            models.Index(
                fields=["index_next_attempt_at", "updated_at"],
                condition=Q(index_state__in=["pending", "failed"], deleted_at__isnull=True),
                name="memory_index_backlog",
            ),
            # Search's filter "no later deletion of the key" (search.retrieval.candidates):
            # a team's few deleted entries, read whole instead of a scan of its table.
            models.Index(
                fields=["team", "key", "created_at"],
                condition=Q(deleted_at__isnull=False),
                name="memory_team_deleted_key",
            ),
            # The due job's scan: a team's active entries by when they were last confirmed.
            models.Index(
                fields=["team", "last_confirmed_at"],
                condition=Q(is_active=True),
                name="memory_team_active_confirmed",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.key} ({self.type})"

    @staticmethod
    def hash_content(content: str) -> str:
        return hashlib.sha256(content.encode()).hexdigest()

    @property
    def rating(self) -> int:
        """Net score: upvotes minus downvotes."""
        return self.upvotes - self.downvotes

    @property
    def state(self) -> str:
        """This row's MemoryState, by the same rules as MemoryState.condition."""
        if self.deleted_at is not None:
            return MemoryState.DELETED
        if self.archived_at is not None:
            return MemoryState.ARCHIVED
        return MemoryState.ACTIVE if self.is_active else MemoryState.SUPERSEDED


MAX_NOTE_LENGTH = 2000


class Annotation(models.Model):
    """A persistent note on a memory, written on the version that was active then.

    Notes belong to the key's story: reads show the notes of every version of the key
    (each says which version it was written on), so a correction does not lose them."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # No index on the team alone: one of this table's indexes starts with the team
    # (docs/tenancy.md, "Indexes per team").
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+", db_index=False)
    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="annotations")
    note = models.TextField()
    created_by = models.CharField(max_length=200, blank=True, default="")
    created_at = CreatedAtField()

    class Meta:
        indexes = [
            models.Index(fields=["team", "memory", "-created_at"], name="annotation_team_memory_recent"),
        ]
        constraints = [
            models.CheckConstraint(condition=~Q(note=""), name="annotation_note_not_empty"),
        ]

    def __str__(self) -> str:
        return f"note on {self.memory_id}"


class Confirmation(models.Model):
    """Someone said a version is still true: its last_confirmed_at moved, no new version
    was made. Shown in the key's history (kind "confirmed")."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # No index on the team alone: one of this table's indexes starts with the team
    # (docs/tenancy.md, "Indexes per team").
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+", db_index=False)
    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="confirmations")
    confirmed_by = models.CharField(max_length=200, blank=True, default="")
    note = models.TextField(blank=True, default="")
    confirmed_at = CreatedAtField()

    class Meta:
        indexes = [
            models.Index(fields=["team", "memory", "-confirmed_at"], name="confirmation_team_memory"),
        ]

    def __str__(self) -> str:
        return f"confirmation of {self.memory_id} by {self.confirmed_by}"


# Facts live in their own package; their model is the app's like these.
from memories.conversations.models import Conversation, ConversationLine  # noqa: E402,F401
from memories.facts.models import Fact  # noqa: E402,F401
