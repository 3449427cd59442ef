"""What the doors accept for the memory resource, and how it becomes a service's
arguments: the input serializers (REST bodies and queries, MCP arguments, and through
them the JSON schemas of both), and one mapping per use case (`save_arguments`,
`list_arguments`) that REST, MCP and the dashboard all go through.

Help texts are the fields' documentation at both doors (the OpenAPI schema and each
MCP tool's input schema, core.json_schema): short, and written for a model as much as
for a person."""

from __future__ import annotations

import datetime as dt
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from django.utils.dateparse import parse_datetime
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.built_fields import FieldsBuiltOnce
from memories.anchors import ANCHOR_TYPES, MAX_ANCHOR_VALUE_CHARS, MAX_EXPECT_CHARS
from memories.metadata_extraction import parse_filter_param
from memories.models import MAX_CONTENT_BYTES, MAX_NOTE_LENGTH
from memories.skills import (
    MAX_KEYWORD_CHARS,
    MAX_KEYWORDS,
    MAX_PROJECT_CHARS,
    MAX_PROJECTS,
    SKILL_NAME_PATTERN,
)
from memories.types import resolve_type, unknown_type_message
from memories.writes import MAX_BATCH_ENTRIES, MAX_REASON_LENGTH, UNSET, Unset
from teams.serializers import StrictBooleanField, StrictCharField, StrictInputSerializer, StrictRegexField
from teams.validators import KEY_PATTERN

MAX_KEY_CHARS = 200
TYPE_HELP = "identity, lesson, decision, context, reference or historical (aliases resolve)"
KEY_HELP = "The memory's key (letters, digits and . _ : @ -)."


def key_field(help_text: str = KEY_HELP, **options: Any) -> StrictRegexField:
    return StrictRegexField(KEY_PATTERN, max_length=MAX_KEY_CHARS, help_text=help_text, **options)


class StrictUUIDField(serializers.UUIDField):
    """A UUID sent as a JSON string (not a number)."""

    def to_internal_value(self, data: Any) -> uuid.UUID:
        if not isinstance(data, str):
            self.fail("invalid", value=data)
        return super().to_internal_value(data)


# A "+" sent unencoded in a query string arrives as a space: "...T12:00:00 02:00".
_PLUS_AS_SPACE = re.compile(r"^(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?) (\d{2}(?::?\d{2})?)$")
MAX_DATETIME_CHARS = 64


@extend_schema_field({"type": "string", "format": "date-time", "maxLength": MAX_DATETIME_CHARS})
class AwareDateTimeField(serializers.DateTimeField):
    """An ISO 8601 date and time that names its time zone (Z or an offset): a point in
    time, never a wall-clock time in some zone the server would have to guess."""

    default_error_messages = {
        "invalid": "an ISO 8601 date and time with a time zone, e.g. 2026-01-31T12:00:00Z",
        "naive": "give a time zone (Z or an offset such as +02:00)",
        "overflow": "date and time out of range",
    }

    def to_internal_value(self, value: Any) -> dt.datetime:
        if not isinstance(value, str) or len(value) > MAX_DATETIME_CHARS or "\x00" in value:
            self.fail("invalid")
        text = _PLUS_AS_SPACE.sub(r"\1+\2", value.strip())
        try:
            parsed = parse_datetime(text)
        except ValueError:
            parsed = None
        if parsed is None:
            self.fail("invalid")
        if parsed.tzinfo is None or parsed.utcoffset() is None:
            self.fail("naive")
        try:
            return parsed.astimezone(dt.UTC)
        except OverflowError:
            self.fail("overflow")


AS_OF_HELP = "The version active at this time (ISO 8601 with a time zone; in a URL, '+' as %2B)."


# ----- save -----


class SkillTriggerInputSerializer(StrictInputSerializer):
    """Makes the memory a skill. Unknown fields are rejected."""

    name = StrictRegexField(
        SKILL_NAME_PATTERN, max_length=63, help_text="Unique among the team's active entries."
    )
    keywords = serializers.ListField(
        child=StrictCharField(max_length=MAX_KEYWORD_CHARS),
        max_length=MAX_KEYWORDS,
        default=list,
        help_text="A search whose query holds one brings the skill first.",
    )
    projects = serializers.ListField(
        child=StrictCharField(max_length=MAX_PROJECT_CHARS),
        max_length=MAX_PROJECTS,
        default=list,
        help_text="Fire only in these projects; empty: everywhere.",
    )
    always_on = StrictBooleanField(default=False, help_text="In every injection block.")


@extend_schema_field(
    {
        "oneOf": [
            {"type": "integer", "minimum": 100, "maximum": 599},
            {"type": "string", "maxLength": MAX_EXPECT_CHARS},
        ]
    }
)
class AnchorExpectField(serializers.Field):  # type: ignore[type-arg]
    """An HTTP status (an integer, 100-599) or a substring of the answer's body."""

    def to_internal_value(self, data: Any) -> int | str:
        if isinstance(data, bool) or not isinstance(data, int | str):
            raise serializers.ValidationError("an HTTP status (100-599) or a substring")
        if isinstance(data, int) and not 100 <= data <= 599:
            raise serializers.ValidationError("an HTTP status is from 100 to 599")
        if isinstance(data, str) and not 1 <= len(data) <= MAX_EXPECT_CHARS:
            raise serializers.ValidationError(f"a substring of 1 to {MAX_EXPECT_CHARS} characters")
        return data

    def to_representation(self, value: Any) -> Any:
        return value


class AnchorInputSerializer(StrictInputSerializer):
    """What the entry can be checked against (memories.anchors). Unknown fields are rejected."""

    type = serializers.ChoiceField(choices=list(ANCHOR_TYPES))
    value = StrictCharField(
        max_length=MAX_ANCHOR_VALUE_CHARS,
        help_text="url, api: an http(s) URL without credentials; file: a path in the worktree.",
    )
    expect = AnchorExpectField(
        required=False, allow_null=True, help_text="A good answer: an HTTP status or a body substring."
    )


class MemoryCreateInputSerializer(StrictInputSerializer):
    """Save a memory: a new key, or a new version of a key when `supersede_reason` is
    given. Unknown fields are rejected."""

    key = key_field()
    # The byte limit is checked by the service; this bound only stops absurd input early.
    content = StrictCharField(
        max_length=MAX_CONTENT_BYTES,
        trim_whitespace=False,
        help_text="The text to remember (credentials are redacted).",
    )
    type = StrictCharField(
        required=False,
        allow_null=True,
        allow_blank=True,
        max_length=32,
        help_text=f"{TYPE_HELP}; default context.",
    )
    supersede_reason = StrictCharField(
        required=False,
        allow_null=True,
        allow_blank=True,
        max_length=MAX_REASON_LENGTH,
        help_text="Why this replaces the key's active entry (needed when it has one).",
    )
    project = StrictCharField(
        required=False,
        allow_blank=True,
        max_length=200,
        help_text="The project it belongs to; empty: team-wide.",
    )
    metadata = serializers.DictField(required=False, help_text='Free-form JSON, e.g. {"tags": ["ci"]}.')
    skill_trigger = SkillTriggerInputSerializer(
        required=False,
        allow_null=True,
        help_text="Makes the entry a skill. Left out on a supersede: carried over; null: none.",
    )
    allow_duplicate = StrictBooleanField(
        default=False, help_text="Save even when an active entry already holds the same text."
    )
    expected_version = StrictUUIDField(
        required=False,
        allow_null=True,
        help_text="The active version this write is based on; another: stale_version.",
    )
    anchor = AnchorInputSerializer(
        required=False,
        allow_null=True,
        help_text="What the entry can be checked against. Left out on a supersede: carried over; null: none.",
    )
    pinned = StrictBooleanField(
        required=False,
        allow_null=True,
        help_text="Pin it: always injected, right after identity. Left out: not pinned (see inherit_pinned).",
    )
    inherit_pinned = StrictBooleanField(
        default=False,
        help_text="On a supersede with `pinned` left out: keep the replaced entry's pin.",
    )

    def to_arguments(self) -> SaveArguments:
        return save_arguments(self.validated_data)


class KeylessSaveInputSerializer(MemoryCreateInputSerializer):
    """A save whose key may be left out: one is derived from the text (memories.keys)."""

    key = key_field("Left out: derived from the text (the same text, the same key).", required=False)


@dataclass(frozen=True)
class SaveArguments:
    """save_memory's arguments but the team and the writer (and a batch entry's but its
    place). `key` None: derived from the text (memories.use_cases.save_entry)."""

    key: str | None
    content: str
    type_name: str | None = None
    supersede_reason: str | None = None
    project: str | None = None
    metadata: dict[str, Any] | None = None
    skill_trigger: dict[str, Any] | Unset | None = UNSET
    allow_duplicate: bool = False
    expected_version: uuid.UUID | None = None
    anchor: dict[str, Any] | Unset | None = UNSET
    pinned: bool | None = None
    inherit_pinned: bool = False

    def as_kwargs(self) -> dict[str, Any]:
        return {field.name: getattr(self, field.name) for field in fields(self)}


def save_arguments(data: Mapping[str, Any]) -> SaveArguments:
    """A save in the API's words (the fields of MemoryCreateInputSerializer, validated)
    as the service's arguments. A field left out keeps the service's default (UNSET:
    a supersede carries the skill trigger and anchor over)."""
    return SaveArguments(
        key=data.get("key"),
        content=data["content"],
        type_name=data.get("type"),
        supersede_reason=data.get("supersede_reason"),
        project=data.get("project"),
        metadata=data.get("metadata"),
        skill_trigger=data.get("skill_trigger", UNSET),
        allow_duplicate=data.get("allow_duplicate", False),
        expected_version=data.get("expected_version"),
        anchor=data.get("anchor", UNSET),
        pinned=data.get("pinned"),
        inherit_pinned=data.get("inherit_pinned", False),
    )


# ----- reads -----


# A long text is read a slice of lines at a time (memories.serializers.line_slice).
MAX_LINES = 100_000  # far past any 64 KiB text
FROM_LINE_HELP = "The first line to return, from 1."
LINES_HELP = "How many lines (default: to the end)."


class MemoryRetrieveQuerySerializer(FieldsBuiltOnce, serializers.Serializer):  # type: ignore[type-arg]
    as_of = AwareDateTimeField(required=False, help_text=AS_OF_HELP)
    from_line = serializers.IntegerField(
        min_value=1, max_value=MAX_LINES, default=1, help_text=FROM_LINE_HELP
    )
    lines = serializers.IntegerField(min_value=1, max_value=MAX_LINES, required=False, help_text=LINES_HELP)


TOPICS_LIST_HELP = (
    "Comma-separated; entries about any one of these topics (the names extraction found, "
    "lowercase, e.g. `postgres,project alpha`)."
)


class MemoryListQuerySerializer(serializers.Serializer):  # type: ignore[type-arg]
    type = serializers.CharField(required=False, max_length=32, help_text=f"Only this type: {TYPE_HELP}.")
    project = serializers.CharField(
        required=False, allow_blank=True, max_length=200, help_text="Only this project."
    )
    as_of = AwareDateTimeField(required=False, help_text="The versions active at this time (ISO 8601).")
    tags = serializers.CharField(
        required=False, max_length=1000, help_text="Comma-separated; entries with every tag."
    )
    people = serializers.CharField(
        required=False, max_length=1000, help_text="Comma-separated; entries mentioning everyone."
    )
    topics = serializers.CharField(required=False, max_length=1000, help_text=TOPICS_LIST_HELP)
    include_archived = serializers.BooleanField(
        default=False, help_text="Archived entries too; ignored with `as_of`."
    )

    def validate_type(self, value: str) -> str:
        resolved = resolve_type(value)
        if resolved is None:
            raise serializers.ValidationError(unknown_type_message(value))
        return resolved.value

    def to_arguments(self) -> dict[str, Any]:
        return list_arguments(self.validated_data)


def list_arguments(data: Mapping[str, Any]) -> dict[str, Any]:
    """A list query in the API's words as memories.selectors.list_memories' arguments
    (but the team)."""
    return {
        "memory_type": data.get("type"),
        "project": data.get("project"),
        "as_of": data.get("as_of"),
        "tags": parse_filter_param(data.get("tags")),
        "people": parse_filter_param(data.get("people")),
        "topics": parse_filter_param(data.get("topics")),
        "include_archived": data.get("include_archived", False),
    }


# ----- changes of an entry without a new text -----


class UnsupersedeInputSerializer(StrictInputSerializer):
    reason = StrictCharField(
        max_length=MAX_REASON_LENGTH, help_text="Why the previous version is right after all."
    )


class ArchiveInputSerializer(StrictInputSerializer):
    expected_version = StrictUUIDField(
        required=False,
        help_text="Archive only this version: 409 `stale_version` when the key's active entry is another.",
    )


class ConfirmInputSerializer(StrictInputSerializer):
    note = StrictCharField(
        required=False,
        allow_blank=True,
        max_length=MAX_NOTE_LENGTH,
        help_text="How it was checked (credentials are redacted).",
    )


class RateInputSerializer(StrictInputSerializer):
    direction = serializers.ChoiceField(choices=["up", "down"], help_text="up: it helped; down: it misled.")


class AnnotationInputSerializer(StrictInputSerializer):
    note = StrictCharField(max_length=MAX_NOTE_LENGTH, help_text="The note (credentials are redacted).")


# ----- the batch save -----


def batch_entries_field(
    entry: type[serializers.Serializer[Any]], *, max_entries: int
) -> serializers.ListField:
    """Up to `max_entries` saves, each parsed on its own by `entry` (so a bad one is an
    `error` outcome of its own, not a refusal of the batch), and documented as `entry`."""

    @extend_schema_field(entry(many=True))
    class BatchEntriesField(serializers.ListField):
        pass

    return BatchEntriesField(
        child=serializers.JSONField(allow_null=True),
        allow_empty=False,
        max_length=max_entries,
        help_text="The saves, each with the fields of a single save.",
    )


class MemoryBatchInputSerializer(StrictInputSerializer):
    """Up to 500 saves in one request. Unknown fields are rejected."""

    entries = batch_entries_field(MemoryCreateInputSerializer, max_entries=MAX_BATCH_ENTRIES)
