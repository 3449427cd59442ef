from __future__ import annotations

from typing import Any

from rest_framework import serializers

from memories.models import MAX_CONTENT_BYTES, Memory, SupersedeKind
from memories.services import MAX_REASON_LENGTH
from memories.types import ACCEPTED_TYPE_NAMES, MemoryType, resolve_type
from memoryhub.api_errors import ErrorSerializer
from teams.serializers import StrictCharField, StrictInputSerializer, StrictRegexField
from teams.validators import KEY_PATTERN


class MemoryCreateInputSerializer(StrictInputSerializer):
    """Save a memory: a new key, or a new version of a key when `supersede_reason` is
    given. Unknown fields are rejected."""

    key = StrictRegexField(KEY_PATTERN, max_length=200)
    # The byte limit is checked by the service; this bound only stops absurd input early.
    content = StrictCharField(max_length=MAX_CONTENT_BYTES, trim_whitespace=False)
    type = StrictCharField(
        required=False,
        allow_null=True,
        allow_blank=True,
        max_length=32,
        help_text=f"One of: {', '.join(ACCEPTED_TYPE_NAMES)}. Aliases resolve to the six "
        "canonical types. Default: context.",
    )
    supersede_reason = StrictCharField(
        required=False, allow_null=True, allow_blank=True, max_length=MAX_REASON_LENGTH
    )
    project = StrictCharField(required=False, allow_blank=True, max_length=200)
    metadata = serializers.DictField(required=False)


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
    state = serializers.ChoiceField(choices=["active", "superseded", "deleted"], read_only=True)
    metadata = serializers.DictField(read_only=True)
    # Declared so that the schema says what the column holds: empty unless superseded.
    supersede_kind = serializers.ChoiceField(choices=["", *SupersedeKind.values], read_only=True)

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
    suggested_type = serializers.ChoiceField(choices=MemoryType.choices)
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


class ConflictErrorSerializer(ErrorSerializer):
    """409: the key already has an active entry, shown in `current`."""

    current = MemoryOutputSerializer()


def saved_payload(result: Any) -> dict[str, Any]:
    memory = result.memory
    memory.hint = result.hint.as_dict() if result.hint else None
    memory.redactions = result.redactions
    return MemorySavedOutputSerializer(memory).data
