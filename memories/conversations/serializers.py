"""What the doors answer about conversations (REST and MCP render the same)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from memories.conversations.models import Conversation, ConversationLine


class ConversationOutputSerializer(serializers.Serializer[Conversation]):
    id = serializers.UUIDField()
    session = serializers.CharField(help_text="The agent session it came from, if known.")
    # The API's field is named `source` (see search.api.SearchResultSerializer on the stubs).
    source = serializers.CharField(help_text="hook, sdk or api.")  # type: ignore[assignment]
    title = serializers.CharField()
    started_at = serializers.DateTimeField(allow_null=True)
    ended_at = serializers.DateTimeField(allow_null=True)
    created_by = serializers.CharField(help_text="The token's name (or the person) that stored it.")
    created_at = serializers.DateTimeField(help_text="When it was stored: its retention counts from here.")
    line_count = serializers.IntegerField()
    redactions = serializers.DictField(
        child=serializers.IntegerField(), help_text="What scrubbing redacted before it was stored, by kind."
    )


class ConversationLineOutputSerializer(serializers.Serializer[ConversationLine]):
    number = serializers.IntegerField(help_text="The line's number, from 1.")
    role = serializers.CharField()
    text = serializers.CharField()


class ConversationDetailOutputSerializer(ConversationOutputSerializer):
    lines = ConversationLineOutputSerializer(many=True, help_text="The lines asked for, in order.")
    from_line = serializers.IntegerField(help_text="The first line given.")
    to_line = serializers.IntegerField(help_text="The last line given (0 when none).")
    has_more = serializers.BooleanField(help_text="Lines follow `to_line`.")


def conversation_payload(conversation: Conversation) -> dict[str, Any]:
    return dict(ConversationOutputSerializer(conversation).data)


def detail_payload(conversation: Conversation, lines: list[ConversationLine], first: int) -> dict[str, Any]:
    to_line = lines[-1].number if lines else 0
    return {
        **conversation_payload(conversation),
        "lines": [{"number": line.number, "role": line.role, "text": line.text} for line in lines],
        "from_line": first,
        "to_line": to_line,
        "has_more": to_line < conversation.line_count and bool(lines),
    }
