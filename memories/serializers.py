from __future__ import annotations

from typing import Any

from rest_framework import serializers

from memories.models import MAX_CONTENT_BYTES, Memory
from memories.services import MAX_REASON_LENGTH
from memories.types import ACCEPTED_TYPE_NAMES, resolve_type
from teams.serializers import StrictInputSerializer
from teams.validators import KEY_PATTERN


class MemoryCreateInputSerializer(StrictInputSerializer):
    key = serializers.RegexField(KEY_PATTERN, max_length=200)
    # The byte limit is checked by the service; this bound only stops absurd input early.
    content = serializers.CharField(max_length=MAX_CONTENT_BYTES, trim_whitespace=False)
    type = serializers.CharField(
        required=False,
        allow_null=True,
        allow_blank=True,
        max_length=32,
        help_text=f"One of: {', '.join(ACCEPTED_TYPE_NAMES)}. Aliases resolve to the six "
        "canonical types. Default: context.",
    )
    supersede_reason = serializers.CharField(
        required=False, allow_null=True, allow_blank=True, max_length=MAX_REASON_LENGTH
    )
    project = serializers.CharField(required=False, allow_blank=True, max_length=200, default="")
    metadata = serializers.DictField(required=False, default=dict)


class MemoryListQuerySerializer(serializers.Serializer):
    type = serializers.CharField(required=False, max_length=32)
    project = serializers.CharField(required=False, allow_blank=True, max_length=200)

    def validate_type(self, value: str) -> str:
        resolved = resolve_type(value)
        if resolved is None:
            raise serializers.ValidationError(f"unknown type; use one of: {', '.join(ACCEPTED_TYPE_NAMES)}")
        return resolved.value


class MemoryOutputSerializer(serializers.ModelSerializer):
    supersedes_id = serializers.UUIDField(allow_null=True, read_only=True)
    state = serializers.CharField(read_only=True)

    class Meta:
        model = Memory
        fields = [
            "id",
            "key",
            "content",
            "type",
            "project",
            "metadata",
            "is_active",
            "state",
            "supersedes_id",
            "supersede_reason",
            "supersede_kind",
            "updated_by",
            "created_at",
            "updated_at",
            "deleted_at",
            "index_state",
        ]
        read_only_fields = fields


class TypeHintSerializer(serializers.Serializer):
    suggested_type = serializers.CharField()
    reason = serializers.CharField()


class RedactionSerializer(serializers.Serializer):
    kind = serializers.CharField()
    count = serializers.IntegerField()


class MemorySavedOutputSerializer(MemoryOutputSerializer):
    hint = TypeHintSerializer(allow_null=True, read_only=True)
    redactions = RedactionSerializer(many=True, read_only=True)

    class Meta(MemoryOutputSerializer.Meta):
        fields = [*MemoryOutputSerializer.Meta.fields, "hint", "redactions"]
        read_only_fields = fields


class HistoryEventSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["created", "hard", "soft", "deleted"])
    reason = serializers.CharField()
    by = serializers.CharField()
    at = serializers.DateTimeField()
    memory = MemoryOutputSerializer()


class MemoryHistoryOutputSerializer(serializers.Serializer):
    key = serializers.CharField()
    history = HistoryEventSerializer(many=True)


class ConflictErrorSerializer(serializers.Serializer):
    error = serializers.CharField()
    detail = serializers.CharField()
    current = MemoryOutputSerializer()


class ErrorSerializer(serializers.Serializer):
    error = serializers.CharField()
    detail = serializers.CharField()
    fields = serializers.DictField(required=False)


def saved_payload(result: Any) -> dict[str, Any]:
    memory = result.memory
    memory.hint = result.hint.as_dict() if result.hint else None
    memory.redactions = result.redactions
    return MemorySavedOutputSerializer(memory).data
