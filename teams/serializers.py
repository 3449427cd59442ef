from __future__ import annotations

from typing import Any

from rest_framework import serializers

from teams.models import VaultEntry
from teams.validators import KEY_PATTERN

MAX_VAULT_VALUE_LENGTH = 16 * 1024
MASK = "********"


class StrictInputSerializer(serializers.Serializer):
    """Input serializer that rejects fields it does not know, so a typo such as
    `supersede_reson` fails loudly instead of silently dropping the reason."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError(
                    {name: ["unknown field"] for name in unknown}, code="unknown_field"
                )
        return super().to_internal_value(data)


class VaultEntryInputSerializer(StrictInputSerializer):
    value = serializers.CharField(max_length=MAX_VAULT_VALUE_LENGTH, trim_whitespace=False, allow_blank=False)
    is_secret = serializers.BooleanField(default=False)


class VaultEntryOutputSerializer(serializers.Serializer):
    """The listing form: a secret's value is always masked."""

    key = serializers.RegexField(KEY_PATTERN)
    value = serializers.SerializerMethodField()
    is_secret = serializers.BooleanField()
    updated_by = serializers.CharField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    def get_value(self, entry: VaultEntry) -> str:
        return MASK if entry.is_secret else entry.value


class VaultEntryRevealSerializer(VaultEntryOutputSerializer):
    """The explicit GET of one key: the only response that carries a secret value."""

    def get_value(self, entry: VaultEntry) -> str:
        return self.context["revealed_value"]
