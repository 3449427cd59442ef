"""The memories API's output serializers: what every door (REST, MCP) answers about
entries, versions, history, notes and saves. What the doors accept is in
memories.inputs."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, cast

from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.api_errors import ErrorSerializer
from core.built_fields import FieldsBuiltOnce, representation
from memories import selectors
from memories.anchors import ANCHOR_TYPES
from memories.entry_read import NOTES_ATTRIBUTE
from memories.freshness import Freshness, FreshnessWindows, freshness_of
from memories.inputs import AnchorExpectField
from memories.models import Annotation, Memory, MemoryState, SupersedeKind
from memories.personal import entry_scope
from memories.types import MemoryType
from memories.writes import SaveResult
from teams.models import Team


class AnchorSerializer(serializers.Serializer):  # type: ignore[type-arg]
    type = serializers.ChoiceField(choices=list(ANCHOR_TYPES))
    value = serializers.CharField()
    expect = AnchorExpectField(required=False, help_text="An HTTP status or a substring; absent when none.")


class SupersededBySerializer(serializers.Serializer):
    """Where the truth moved to: the version that replaced this one."""

    id = serializers.UUIDField()
    key = serializers.CharField()
    reason = serializers.CharField(allow_blank=True)
    kind = serializers.CharField(help_text=f"How it was replaced: {', '.join(SupersedeKind.values)}.")
    is_active = serializers.BooleanField(help_text="False when it was itself replaced or deleted since.")


class SkillTriggerSerializer(serializers.Serializer):
    name = serializers.CharField()
    keywords = serializers.ListField(child=serializers.CharField(), help_text="Stored lowercase.")
    projects = serializers.ListField(child=serializers.CharField())
    always_on = serializers.BooleanField()


class MemoryOutputSerializer(FieldsBuiltOnce, serializers.ModelSerializer):
    """One version. `superseded_by` comes from the context ("successors": {id: payload},
    see selectors.successors_of); it is null for active and deleted versions."""

    supersedes_id = serializers.UUIDField(allow_null=True, read_only=True)
    restored_from_id = serializers.UUIDField(
        allow_null=True, read_only=True, help_text="On an unsupersede: the version whose content it restored."
    )
    state = serializers.ChoiceField(choices=MemoryState.choices, read_only=True)
    metadata = serializers.DictField(read_only=True)
    # Declared so that the schema says what the column holds: empty unless superseded.
    supersede_kind = serializers.ChoiceField(choices=["", *SupersedeKind.values], read_only=True)
    superseded_by = serializers.SerializerMethodField()
    rating = serializers.IntegerField(read_only=True, help_text="Net score: upvotes - downvotes.")
    skill_trigger = SkillTriggerSerializer(
        allow_null=True, read_only=True, help_text="Set when the entry is a skill."
    )
    anchor = AnchorSerializer(
        allow_null=True, read_only=True, help_text="What the entry can be checked against."
    )
    last_confirmed_at = serializers.DateTimeField(
        read_only=True, help_text="When the version was made, or last confirmed as still true since."
    )
    confirmed_by_count = serializers.IntegerField(
        read_only=True, help_text="How many distinct agents or people confirmed this version."
    )
    pinned = serializers.BooleanField(read_only=True, help_text="Always injected, right after identity.")
    original_type = serializers.CharField(
        read_only=True,
        help_text='The alias `type` was given as (e.g. "meeting"); empty for a canonical type.',
    )
    auto_captured = serializers.BooleanField(
        read_only=True,
        help_text="Captured from a session (an accepted or merged draft), not saved on purpose.",
    )
    freshness = serializers.SerializerMethodField()
    scope = serializers.SerializerMethodField(
        help_text="`team`, `project:<name>`, or `user:<username>` for a personal entry "
        "(its key starts with `@<username>`; only that person sees it)."
    )

    class Meta:
        model = Memory
        fields = [
            "id",
            "key",
            "content",
            "type",
            "project",
            "scope",
            "metadata",
            "is_active",
            "state",
            "supersedes_id",
            "supersede_reason",
            "supersede_kind",
            "superseded_by",
            "restored_from_id",
            "updated_by",
            "created_at",
            "updated_at",
            "deleted_at",
            "archived_at",
            "archived_by",
            "index_state",
            "access_count",
            "last_accessed_at",
            "upvotes",
            "downvotes",
            "rating",
            "skill_trigger",
            "anchor",
            "pinned",
            "original_type",
            "auto_captured",
            "last_confirmed_at",
            "confirmed_by_count",
            "freshness",
        ]
        read_only_fields = fields

    def get_scope(self, memory: Memory) -> str:
        return entry_scope(name=memory.key, project=memory.project)

    @extend_schema_field(SupersededBySerializer(allow_null=True))
    def get_superseded_by(self, memory: Memory) -> dict[str, Any] | None:
        return self.context.get("successors", {}).get(memory.id)

    @extend_schema_field(
        serializers.ChoiceField(
            choices=Freshness.choices,
            allow_null=True,
            help_text="contradicted, anchor_broken, due (unconfirmed longer than the team's window for "
            "its type) or fresh; null for a superseded or deleted version.",
        )
    )
    def get_freshness(self, memory: Memory) -> str | None:
        if not memory.is_active:
            return None
        # The team's windows, read once per response (the context is shared by a list's rows).
        context = cast(dict[str, Any], self.context)  # DRF's context is the root's plain dict
        windows: dict[int, FreshnessWindows] = context.setdefault("_freshness_windows", {})
        if memory.team_id not in windows:
            windows[memory.team_id] = FreshnessWindows.for_team(memory.team)
        return freshness_of(memory, windows[memory.team_id], timezone.now())


class AnnotationOutputSerializer(FieldsBuiltOnce, serializers.ModelSerializer):
    memory_id = serializers.UUIDField(read_only=True, help_text="The version the note was written on.")

    class Meta:
        model = Annotation
        fields = ["id", "memory_id", "note", "created_by", "created_at"]
        read_only_fields = fields


class MemoryDetailOutputSerializer(MemoryOutputSerializer):
    """One version with the notes of its key (context "annotations": {id: [Annotation]})."""

    annotations = serializers.SerializerMethodField(
        help_text="The newest notes written on any version of this key, newest first."
    )

    class Meta(MemoryOutputSerializer.Meta):
        fields = [*MemoryOutputSerializer.Meta.fields, "annotations"]
        read_only_fields = fields

    @extend_schema_field(AnnotationOutputSerializer(many=True))
    def get_annotations(self, memory: Memory) -> list[dict[str, Any]]:
        notes = self.context.get("annotations", {}).get(memory.id, [])
        # drf-stubs type many=True's .data as one entry's (typeddjango/djangorestframework-stubs#827).
        return AnnotationOutputSerializer(notes, many=True).data  # type: ignore[return-value]


class TypeHintSerializer(serializers.Serializer):
    suggested_type = serializers.ChoiceField(choices=MemoryType.choices)
    reason = serializers.CharField()


class RedactionSerializer(serializers.Serializer):
    kind = serializers.CharField()
    count = serializers.IntegerField()


MATCHED_BY_HELP = "content_hash: the same text; embedding: a cosine similarity of at least the threshold."


class ReplacedDuplicateSerializer(serializers.Serializer):
    """The entry of another key that a longer text replaced as its duplicate."""

    id = serializers.UUIDField()
    key = serializers.CharField()
    similarity = serializers.FloatField()
    matched_by = serializers.ChoiceField(choices=["content_hash", "embedding"], help_text=MATCHED_BY_HELP)


class MemorySavedOutputSerializer(MemoryOutputSerializer):
    hint = TypeHintSerializer(allow_null=True, read_only=True)
    vault_hint = serializers.CharField(
        allow_null=True,
        read_only=True,
        help_text="Set when the text looks like an operational value (a counter, a timestamp, a "
        "progress figure) that belongs in the vault. Saved all the same.",
    )
    redactions = RedactionSerializer(many=True, read_only=True)
    replaced_duplicate = ReplacedDuplicateSerializer(
        allow_null=True,
        read_only=True,
        help_text="Set when the text was a longer version of another key's active entry: that entry "
        "was superseded by this one (soft, see `supersedes_id` and `supersede_reason`).",
    )

    class Meta(MemoryOutputSerializer.Meta):
        fields = [
            *MemoryOutputSerializer.Meta.fields,
            "hint",
            "vault_hint",
            "redactions",
            "replaced_duplicate",
        ]
        read_only_fields = fields


class MemoryDuplicateOutputSerializer(serializers.Serializer):
    """200 to a save: nothing was written, an active entry already holds the text."""

    saved = serializers.BooleanField(help_text="Always false: nothing was written.")
    detail = serializers.CharField()
    duplicate_of = MemoryOutputSerializer(help_text="The active entry that already holds the text.")
    similarity = serializers.FloatField(
        help_text="Cosine similarity, best over pairs of chunks; 1 for the same text."
    )
    matched_by = serializers.ChoiceField(choices=["content_hash", "embedding"], help_text=MATCHED_BY_HELP)
    threshold = serializers.FloatField(help_text="The team's dedup_threshold.")
    redactions = RedactionSerializer(many=True)


class HistoryEventSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(
        choices=["created", "hard", "soft", "unsupersede", "deleted", "archived", "confirmed"]
    )
    reason = serializers.CharField(
        help_text="The supersede reason; for `confirmed`, the confirmation's note."
    )
    by = serializers.CharField()
    at = serializers.DateTimeField()
    memory = MemoryOutputSerializer()


class MemoryHistoryOutputSerializer(serializers.Serializer):
    key = serializers.CharField()
    history = HistoryEventSerializer(many=True)
    next = serializers.URLField(allow_null=True, help_text="The next (older) page, or null.")
    previous = serializers.URLField(allow_null=True, help_text="The previous (newer) page, or null.")


class AnnotationCreatedOutputSerializer(AnnotationOutputSerializer):
    redactions = RedactionSerializer(many=True, read_only=True)

    class Meta(AnnotationOutputSerializer.Meta):
        fields = [*AnnotationOutputSerializer.Meta.fields, "redactions"]
        read_only_fields = fields


class NoPreviousVersionErrorSerializer(ErrorSerializer):
    """409: the active entry replaced nothing, shown in `current`."""

    current = MemoryOutputSerializer()


class ConflictErrorSerializer(ErrorSerializer):
    """409: the key already has an active entry (`conflict`), another active entry
    carries the skill's name (`skill_exists`), or the key moved on from the version the
    writer expected (`stale_version`): that entry is in `current`. A team at its quota
    (`quota_exceeded`) gets `quota` and `limit` instead."""

    current = MemoryOutputSerializer(
        allow_null=True, required=False, help_text="The entry in the way; null when the key has none."
    )
    quota = serializers.CharField(required=False, help_text="With quota_exceeded: which quota.")
    limit = serializers.IntegerField(required=False, help_text="With quota_exceeded: the quota.")


class MemoryReadOutputSerializer(MemoryDetailOutputSerializer):
    """A read of one entry: its detail with the slice of lines asked for (`line_slice`)."""

    from_line = serializers.IntegerField(help_text="The first line of `content`, from 1.")
    to_line = serializers.IntegerField(help_text="The last line of `content` (0 for an empty text).")
    total_lines = serializers.IntegerField(help_text="How many lines the whole text has.")
    has_more = serializers.BooleanField(help_text="Lines follow `to_line`: read on from `to_line` + 1.")

    class Meta(MemoryDetailOutputSerializer.Meta):
        fields = [
            *MemoryDetailOutputSerializer.Meta.fields,
            "from_line",
            "to_line",
            "total_lines",
            "has_more",
        ]
        read_only_fields = fields


def detail_payload(*, team: Team, memory: Memory, as_of: datetime | None = None) -> dict[str, Any]:
    """One version with where the truth moved to and the notes of its key (as they were
    at `as_of`), as every door shows an entry."""
    memory.team = team  # the row the caller holds: the serializer reads the team's windows from it
    replaced = [] if memory.is_active else [memory.id]
    context = {
        "successors": selectors.successors_of(team_id=team.id, memory_ids=replaced),
        "annotations": _notes_of(team=team, memory=memory, as_of=as_of),
    }
    return representation(MemoryDetailOutputSerializer, memory, context)


def _notes_of(*, team: Team, memory: Memory, as_of: datetime | None) -> dict[uuid.UUID, list[Annotation]]:
    """The notes to show with `memory`: those read with it (memories.entry_read), else asked for."""
    notes: list[Annotation] | None = getattr(memory, NOTES_ATTRIBUTE, None)
    if notes is not None and as_of is None:
        return {memory.id: notes}
    return selectors.annotations_for(team.id, [memory.id], as_of=as_of)


def line_slice(body: dict[str, Any], *, from_line: int, count: int | None) -> dict[str, Any]:
    """Lines `from_line`..(`from_line` + `count` - 1) of an entry's content, 1-based, and
    where they sit in the whole, so an agent can page through a long text (REST's GET and
    MCP's memory_get alike)."""
    lines = body["content"].splitlines(keepends=True)
    total = len(lines)
    if from_line > max(total, 1):
        raise serializers.ValidationError({"from_line": [f"the content has {total} lines"]})
    end = total if count is None else min(total, from_line - 1 + count)
    return {
        **body,
        "content": "".join(lines[from_line - 1 : end]),
        "from_line": from_line,
        "to_line": end,
        "total_lines": total,
        "has_more": end < total,
    }


def entry_payload(memory: Memory) -> dict[str, Any]:
    """One version, as every door shows it (no successor, no notes)."""
    return representation(MemoryOutputSerializer, memory)


def memory_error_extra(name: str, value: Any) -> Any:
    """An error's extra as every door shows it: an entry named in it (`current`) as
    MemoryOutputSerializer renders it (core.api_errors' `serialize_error_extra`)."""
    return entry_payload(value) if isinstance(value, Memory) else value


def saved_payload(result: SaveResult) -> dict[str, Any]:
    memory = result.memory
    memory.hint = result.hint.as_dict() if result.hint else None  # type: ignore[attr-defined]
    memory.vault_hint = result.vault_hint  # type: ignore[attr-defined]
    memory.redactions = result.redactions  # type: ignore[attr-defined]
    duplicate = result.duplicate
    memory.replaced_duplicate = (  # type: ignore[attr-defined]
        {
            "id": duplicate.memory.id,
            "key": duplicate.memory.key,
            "similarity": duplicate.similarity,
            "matched_by": duplicate.matched_by,
        }
        if duplicate is not None
        else None
    )
    return representation(MemorySavedOutputSerializer, memory)


def duplicate_payload(result: SaveResult) -> dict[str, Any]:
    """The answer to a save refused as a duplicate (result.saved is False)."""
    duplicate = result.duplicate
    assert duplicate is not None  # noqa: S101 (the caller checked result.saved)
    holder = duplicate.memory.key
    how = (
        "the same text"
        if duplicate.matched_by == "content_hash"
        else f"a similarity of {duplicate.similarity:.3f} (threshold {duplicate.threshold:g})"
    )
    detail = (
        f"not saved: the active entry '{holder}' already holds this ({how}) and the new text is not "
        f"longer. Supersede '{holder}' to change it, or send allow_duplicate: true to save it anyway."
    )
    return MemoryDuplicateOutputSerializer(
        {
            "saved": False,
            "detail": detail,
            "duplicate_of": duplicate.memory,
            "similarity": duplicate.similarity,
            "matched_by": duplicate.matched_by,
            "threshold": duplicate.threshold,
            "redactions": result.redactions,
        }
    ).data


# ----- the batch save (POST memories/batch/) -----

BATCH_STATUSES = ["created", "superseded", "unchanged", "duplicate", "error"]


class BatchDuplicateSerializer(ReplacedDuplicateSerializer):
    """The active entry of another key that holds the text (`duplicate`), or that a
    longer text replaced (`replaced_duplicate`)."""


class MemoryBatchResultSerializer(serializers.Serializer):
    index = serializers.IntegerField(help_text="The entry's place in `entries`, from 0.")
    key = serializers.CharField(help_text="The entry's key as sent (empty when it sent none).")
    status = serializers.ChoiceField(
        choices=BATCH_STATUSES,
        help_text="created: a new key (or a longer duplicate that replaced another key's entry, see "
        "`replaced_duplicate`); superseded: a new version of the key; unchanged: the key's active entry "
        "already holds exactly this, nothing written; duplicate: another active entry holds the text, "
        "nothing written (`duplicate_of`); error: refused, nothing written (`error`).",
    )
    id = serializers.UUIDField(
        required=False,
        help_text="created/superseded: the new version; unchanged: the active entry; duplicate: the "
        "entry that holds the text.",
    )
    duplicate_of = BatchDuplicateSerializer(required=False)
    replaced_duplicate = BatchDuplicateSerializer(required=False)
    redactions = RedactionSerializer(many=True, required=False)
    error = ErrorSerializer(required=False, help_text="The one error shape, as a single save answers it.")


class MemoryBatchOutputSerializer(serializers.Serializer):
    results = MemoryBatchResultSerializer(many=True, help_text="One per entry, in the order of `entries`.")
    counts = serializers.DictField(child=serializers.IntegerField(), help_text="Entries per status.")


def batch_result_payload(outcome: Any, error_body: dict[str, Any] | None) -> dict[str, Any]:
    """One entry's outcome (memories.writes.BatchOutcome) as MemoryBatchResultSerializer
    shows it; `error_body` is its error in the one error shape."""
    body: dict[str, Any] = {"index": outcome.index, "key": outcome.key, "status": outcome.status}
    result: SaveResult | None = outcome.result
    if error_body is not None:
        body["error"] = error_body
    if result is None:
        return body
    body["id"] = str(result.memory.id)
    duplicate = result.duplicate
    if duplicate is not None:
        reference = {
            "id": str(duplicate.memory.id),
            "key": duplicate.memory.key,
            "similarity": duplicate.similarity,
            "matched_by": duplicate.matched_by,
        }
        body["duplicate_of" if outcome.status == "duplicate" else "replaced_duplicate"] = reference
    if result.redactions:
        body["redactions"] = result.redactions
    return body
