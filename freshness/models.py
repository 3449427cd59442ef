"""Nudges: what freshness asks people and agents to look at.

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

from memories.facts.models import Fact
from memories.models import Memory
from teams.models import Team, personal_owner_field

MAX_MESSAGE_CHARS = 2000


class NudgeKind(models.TextChoices):
    DUE = "due"
    ANCHOR_BROKEN = "anchor_broken"
    CONTRADICTION = "contradiction"
    PRUNE = "prune"
    # A conversation stated another value for an active fact (exact comparison): the
    # nudge links the fact, not a memory.
    FACT_CONTRADICTION = "fact_contradiction"


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
    # raised again (freshness.contradiction_pass.raise_contradictions checks resolved nudges).
    COMPATIBLE = "compatible"


class Nudge(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # No index on the team alone: one of this table's indexes starts with the team
    # (docs/tenancy.md, "Indexes per team").
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+", db_index=False)
    kind = models.CharField(max_length=24, choices=NudgeKind.choices)
    # The entry the nudge is about (the version that was active when it was made); none
    # for a fact_contradiction, which is about `fact`.
    memory = models.ForeignKey(Memory, null=True, blank=True, on_delete=models.CASCADE, related_name="nudges")
    # A fact_contradiction's fact: the version that was active when it was made.
    fact = models.ForeignKey(Fact, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    # A contradiction's other entry: the one the new entry disagrees with.
    other_memory = models.ForeignKey(
        Memory, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    # The owner of the personal entry or fact it is about (docs/tenancy.md, "Personal
    # entries"), copied by the database: a nudge about a personal entry is its owner's alone.
    owner = personal_owner_field()
    message = models.TextField()
    # What the job found, for the reader and for the resolution flows (e.g. the days
    # since the last confirmation, an anchor check's status). Small, job-written.
    details = models.JSONField(default=dict, blank=True)
    # A contradiction's confidence (freshness.contradictions.Verdict.confidence, 0..1):
    # injection asks agents to review only those from contradictions.INJECT_CONFIDENCE
    # up. Null for the other kinds (a due date is no guess) and for contradictions
    # raised before it was recorded.
    confidence = models.FloatField(null=True, blank=True)
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
                fields=["team", "kind", "memory", "other_memory", "fact"],
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
            models.CheckConstraint(
                condition=Q(kind="fact_contradiction", fact__isnull=False, memory__isnull=True)
                | (~Q(kind="fact_contradiction") & Q(fact__isnull=True, memory__isnull=False)),
                name="nudge_about_a_memory_or_a_fact",
            ),
        ]
        indexes = [
            models.Index(
                fields=["team", "-created_at"], condition=Q(state="open"), name="nudge_team_open_recent"
            ),
            models.Index(fields=["team", "memory"], name="nudge_team_memory"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} nudge on {self.memory_id or self.fact_id} ({self.state})"


class AnchorCheckSource(models.TextChoices):
    SERVER = "server"  # the beat job fetched a url or api anchor
    CLIENT = "client"  # a client (`memoryhub verify`, the session-start hook) reported a file anchor


class AnchorCheck(models.Model):
    """One check of an entry's anchor and what it found: the server's beat job for `url`
    and `api` anchors, a client's report for `file` anchors (the server cannot see a
    worktree). A failed check flags the entry `anchor_broken` and opens a nudge."""

    id = models.BigAutoField(primary_key=True)
    # No index on the team alone: one of this table's indexes starts with the team
    # (docs/tenancy.md, "Indexes per team").
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+", db_index=False)
    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="anchor_checks")
    source = models.CharField(max_length=8, choices=AnchorCheckSource.choices)
    checked_at = models.DateTimeField()
    ok = models.BooleanField()
    # The HTTP status of the last answer (None: no answer, or a file anchor).
    status = models.PositiveSmallIntegerField(null=True, blank=True)
    # Why a check failed, in a few words ("timeout", "blocked address", "expected text
    # missing"); never the body of the answer.
    detail = models.CharField(max_length=300, blank=True, default="")
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    # Who reported a client check (the token's or person's name).
    reported_by = models.CharField(max_length=200, blank=True, default="")

    class Meta:
        indexes = [
            models.Index(fields=["team", "memory", "-checked_at"], name="anchorcheck_team_memory"),
        ]

    def __str__(self) -> str:
        return f"anchor check of {self.memory_id}: {'ok' if self.ok else 'broken'}"


class DraftState(models.TextChoices):
    PENDING = "pending"
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    MERGED = "merged"


class DraftKind(models.TextChoices):
    MEMORY = "memory"  # type, key and content: accepted into a memory
    FACT = "fact"  # entity, fact_key and value: accepted into a fact (memories.facts)


class DraftConflict(models.TextChoices):
    NONE = ""
    DUPLICATE = "duplicate"  # an active entry already says this
    CONTRADICTION = "contradiction"  # an active entry disagrees with it


class Draft(models.Model):
    """A memory an extractor proposed from a transcript, waiting for a person: accepted
    (optionally edited) into a memory, merged into an existing entry, or rejected. Kept
    after review as the stored memory's provenance: the source session, the extractor
    and the reviewer."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    state = models.CharField(max_length=16, choices=DraftState.choices, default=DraftState.PENDING)
    kind = models.CharField(max_length=8, choices=DraftKind.choices, default=DraftKind.MEMORY)
    # A memory draft's type; "fact" for a fact draft.
    type = models.CharField(max_length=16)
    # A memory draft's key; a fact draft's `entity/key`, for lists and messages.
    key = models.CharField(max_length=200)
    # A memory draft's text; a fact draft's sentence `entity/key = value`.
    content = models.TextField()
    # A fact draft's proposal (empty for a memory draft).
    entity = models.CharField(max_length=200, blank=True, default="")
    fact_key = models.CharField(max_length=200, blank=True, default="")
    value = models.TextField(blank=True, default="")
    why = models.CharField(max_length=200, blank=True, default="")
    # The candidate's [start, end) in the scrubbed, code-free transcript it came from,
    # and a short excerpt of that text (the transcript itself is not kept).
    source_start = models.PositiveIntegerField(default=0)
    source_end = models.PositiveIntegerField(default=0)
    source_excerpt = models.TextField(blank=True, default="")
    # The conversation the transcript was kept as (memories.conversations), and the lines
    # of it that hold the excerpt when they were found; no foreign key: the conversation
    # goes with its retention, the draft stays as provenance.
    source_conversation = models.UUIDField(null=True, blank=True)
    source_first_line = models.PositiveIntegerField(null=True, blank=True)
    source_last_line = models.PositiveIntegerField(null=True, blank=True)
    # Where the transcript came from: the agent session's id or a label the caller gave.
    source_session = models.CharField(max_length=200, blank=True, default="")
    extractor = models.CharField(max_length=100)
    created_by = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    conflict = models.CharField(max_length=16, choices=DraftConflict.choices, blank=True, default="")
    conflict_memory = models.ForeignKey(
        Memory, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reviewed_at = models.DateTimeField(null=True, blank=True)
    reviewed_by = models.CharField(max_length=200, blank=True, default="")
    # The version an accepted or merged draft became.
    memory = models.ForeignKey(
        Memory, null=True, blank=True, on_delete=models.SET_NULL, related_name="drafts"
    )
    # The fact version an accepted fact draft became.
    fact = models.ForeignKey(Fact, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # One learning however often extracted (freshness.drafts.learning_fingerprint): a
    # later extraction of it, from another session, corroborates this pending draft.
    fingerprint = models.CharField(max_length=64, blank=True, default="")
    corroborated = models.PositiveIntegerField(default=0)
    last_corroborated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(state="pending", reviewed_at__isnull=True)
                | (~Q(state="pending") & Q(reviewed_at__isnull=False)),
                name="draft_reviewed_has_time",
            ),
            models.CheckConstraint(
                condition=Q(kind="memory")
                | (Q(kind="fact") & ~Q(entity="") & ~Q(fact_key="") & ~Q(value="")),
                name="draft_fact_has_entity_key_value",
            ),
        ]
        indexes = [
            models.Index(
                fields=["team", "-created_at"], condition=Q(state="pending"), name="draft_team_pending_recent"
            ),
            models.Index(
                fields=["team", "fingerprint"], condition=Q(state="pending"), name="draft_team_pending_print"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.state} draft {self.key}"
