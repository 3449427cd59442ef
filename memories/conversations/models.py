"""The conversation tables: one row per conversation, one per line of it."""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q
from django.utils import timezone

from teams.models import Team, personal_owner_field

# The bound of a transcript, shared with the draft extractors' input
# (freshness.draft_extraction.transcript reads it from here): the characters of every
# line's text together.
MAX_TRANSCRIPT_CHARS = 256 * 1024
MAX_LINES = 5000
MAX_TITLE_CHARS = 200
MAX_SESSION_CHARS = 200
ROLE_PATTERN = r"^[a-z][a-z0-9_-]{0,31}$"
_ROLE_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-")


def is_role(value: object) -> bool:
    """ROLE_PATTERN, checked without a regex: `user`, `assistant`, `tool`, `system`..."""
    return (
        isinstance(value, str)
        and 1 <= len(value) <= 32
        and "a" <= value[0] <= "z"
        and all(character in _ROLE_CHARACTERS for character in value)
    )


class ConversationSource(models.TextChoices):
    HOOK = "hook"  # a client hook (the session-end hook) sent it
    SDK = "sdk"  # the SDK's context manager sent it
    API = "api"  # anything else over REST or MCP


class Conversation(models.Model):
    """A transcript of one session. Immutable once stored: it is created whole and
    deleted whole (by a caller, or by the retention sweep)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # No index on the team alone: one of this table's indexes starts with the team
    # (docs/tenancy.md, "Indexes per team").
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+", db_index=False)
    session = models.CharField(max_length=MAX_SESSION_CHARS, blank=True, default="")
    source = models.CharField(
        max_length=8, choices=ConversationSource.choices, default=ConversationSource.API
    )
    title = models.CharField(max_length=MAX_TITLE_CHARS, blank=True, default="")
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    created_by = models.CharField(max_length=200, blank=True, default="")
    # Now, unless an import gives the time the file says it was stored.
    created_at = models.DateTimeField(default=timezone.now)
    line_count = models.PositiveIntegerField(default=0)
    char_count = models.PositiveIntegerField(default=0)
    # What scrubbing redacted, by kind (the lines hold the markers, never the values).
    redactions = models.JSONField(default=dict, blank=True)
    # An imported conversation: what the file said of it (its team, id, author); an import
    # finds it again by that id, so importing a file twice stores it once.
    imported_from = models.JSONField(null=True, blank=True)
    # Indexing of its lines (search.conversation_index): pending until chunked.
    index_state = models.CharField(max_length=8, default="pending")
    # A person's own transcript (sent with a token issued to them): set by the database
    # from the writer (teams.rls.enable_personal_writer_rows); only they see it.
    owner = personal_owner_field()

    class Meta:
        indexes = [
            models.Index(fields=["team", "-created_at", "-id"], name="conversation_team_recent"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(ended_at__isnull=True)
                | Q(started_at__isnull=True)
                | Q(ended_at__gte=models.F("started_at")),
                name="conversation_ends_after_start",
            ),
        ]

    def __str__(self) -> str:
        return self.title or str(self.id)


class ConversationLine(models.Model):
    """Line `number` (from 1) of a conversation: who said it and what."""

    # No index on the team alone: one of this table's indexes starts with the team
    # (docs/tenancy.md, "Indexes per team").
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+", db_index=False)
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="lines")
    number = models.PositiveIntegerField()
    role = models.CharField(max_length=32)
    text = models.TextField()
    # Its conversation's owner, copied by the database: row-level security hides it as it
    # hides the conversation.
    owner = personal_owner_field()

    class Meta:
        constraints = [
            # team first: a key a shard by team can hold (docs/operations.md, "Sharding by
            # team"); it is also the index a line range is read through.
            models.UniqueConstraint(fields=["team", "conversation", "number"], name="one_line_per_number"),
        ]

    def __str__(self) -> str:
        return f"{self.conversation_id}:{self.number}"
