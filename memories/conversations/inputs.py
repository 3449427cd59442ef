"""What the doors accept for conversations, and how it becomes a service's arguments
(REST and MCP go through the same serializers; their help texts document both)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from memories.conversations.exceptions import TranscriptTooLarge
from memories.conversations.models import (
    MAX_LINES,
    MAX_SESSION_CHARS,
    MAX_TITLE_CHARS,
    MAX_TRANSCRIPT_CHARS,
    ROLE_PATTERN,
    ConversationSource,
)
from memories.conversations.services import Line
from memories.inputs import AwareDateTimeField
from teams.serializers import StrictCharField, StrictInputSerializer, StrictRegexField

LINES_RANGE_HELP = "Only lines a to b, e.g. `12-40` (1-based, inclusive); `12-` to the end."


class LineInputSerializer(StrictInputSerializer):
    role = StrictRegexField(
        ROLE_PATTERN, max_length=32, help_text="Who said it: `user`, `assistant`, `tool`, `system`..."
    )
    text = StrictCharField(max_length=MAX_TRANSCRIPT_CHARS, trim_whitespace=False, help_text="What was said.")


class LinesField(serializers.ListField):
    """The lines, counted before any is parsed: past MAX_LINES is 413, not a slow 400."""

    def to_internal_value(self, data: Any) -> list[Any]:
        if isinstance(data, list) and len(data) > MAX_LINES:
            raise TranscriptTooLarge(f"a conversation holds at most {MAX_LINES} lines", field="lines")
        return super().to_internal_value(data)  # type: ignore[no-any-return]


class ConversationCreateInputSerializer(StrictInputSerializer):
    """The body of POST conversations/ (and of the MCP tool conversation_save)."""

    lines = LinesField(
        child=LineInputSerializer(),
        allow_empty=False,
        help_text=f"The transcript in order, at most {MAX_LINES} lines and {MAX_TRANSCRIPT_CHARS} characters "
        "of text; credentials and the team's vault secrets are redacted before it is stored.",
    )
    session = StrictCharField(
        required=False,
        allow_blank=True,
        max_length=MAX_SESSION_CHARS,
        help_text="The agent session's id, if known.",
    )
    title = StrictCharField(
        required=False, allow_blank=True, max_length=MAX_TITLE_CHARS, help_text="A title."
    )
    source = serializers.ChoiceField(  # type: ignore[assignment]
        choices=ConversationSource.choices,
        default=ConversationSource.API,
        help_text="What sent it: `hook` (a client hook), `sdk` (the SDK's context manager) or `api`.",
    )
    started_at = AwareDateTimeField(required=False, help_text="When the session started (ISO 8601).")
    ended_at = AwareDateTimeField(required=False, help_text="When it ended (ISO 8601).")

    def to_arguments(self) -> dict[str, Any]:
        data = self.validated_data
        return {
            "lines": [Line(role=line["role"], text=line["text"]) for line in data["lines"]],
            "session": data.get("session", ""),
            "title": data.get("title", ""),
            "source": data["source"],
            "started_at": data.get("started_at"),
            "ended_at": data.get("ended_at"),
        }


class ConversationListQuerySerializer(serializers.Serializer):  # type: ignore[type-arg]
    session = StrictCharField(
        required=False, max_length=MAX_SESSION_CHARS, help_text="Only this session's conversations."
    )


class ConversationReadQuerySerializer(serializers.Serializer):  # type: ignore[type-arg]
    lines = StrictRegexField(
        r"^[0-9]{1,6}-[0-9]{0,6}$", required=False, max_length=13, help_text=LINES_RANGE_HELP
    )

    def line_range(self) -> tuple[int, int | None]:
        text = self.validated_data.get("lines")
        if not text:
            return 1, None
        first_text, last_text = text.split("-")
        first, last = int(first_text), int(last_text) if last_text else None
        if first < 1 or (last is not None and last < first):
            raise serializers.ValidationError({"lines": ["give a-b with 1 <= a <= b"]})
        return first, last
