from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiSerializerExtension
from drf_spectacular.openapi import AutoSchema
from rest_framework import serializers

from teams.models import AuditEvent, VaultEntry
from teams.validators import KEY_PATTERN

MAX_VAULT_VALUE_LENGTH = 16 * 1024
MASK = "********"


class StrictCharField(serializers.CharField):
    """A string field that refuses numbers and booleans instead of converting them."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictRegexField(serializers.RegexField):
    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


class StrictIntegerField(serializers.IntegerField):
    """A JSON integer, not a numeric string, a float or a boolean."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictFloatField(serializers.FloatField):
    """A JSON number, not a numeric string or a boolean."""

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool) or not isinstance(data, int | float):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictInputSerializer(serializers.Serializer[Any]):
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


class StrictInputSchema(OpenApiSerializerExtension):
    """What the schema says of a strict input: no member beyond its fields
    (`additionalProperties: false`), for the API's documentation and every MCP tool."""

    target_class = StrictInputSerializer
    match_subclasses = True

    def map_serializer(self, auto_schema: AutoSchema, direction: str) -> dict[str, Any]:
        schema: dict[str, Any] = auto_schema._map_serializer(  # type: ignore[no-untyped-call]
            self.target, direction, bypass_extensions=True
        )
        schema["additionalProperties"] = False
        return schema


class VaultEntryInputSerializer(StrictInputSerializer):
    """Set a value; `is_secret` stores it encrypted and masks it everywhere but the GET
    of its key. Unknown fields are rejected."""

    value = StrictCharField(
        max_length=MAX_VAULT_VALUE_LENGTH, trim_whitespace=False, allow_blank=False, help_text="The value."
    )
    is_secret = StrictBooleanField(
        default=False, help_text="Encrypt it and redact it from every answer (8 characters at least)."
    )


class VaultEntryOutputSerializer(serializers.Serializer[VaultEntry]):
    """The listing form: a secret's value is always masked."""

    key = serializers.RegexField(KEY_PATTERN)
    # Not `get_value`: that name is Field.get_value, which reads input.
    value = serializers.SerializerMethodField(method_name="render_value")
    is_secret = serializers.BooleanField()
    updated_by = serializers.CharField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    def render_value(self, entry: VaultEntry) -> str:
        return MASK if entry.is_secret else entry.value


class VaultEntryRevealSerializer(VaultEntryOutputSerializer):
    """The explicit GET of one key: the only response that carries a secret value."""

    def render_value(self, entry: VaultEntry) -> str:
        revealed: str = self.context["revealed_value"]
        return revealed


class AuditEventOutputSerializer(serializers.Serializer[AuditEvent]):
    """One line of the team's audit trail."""

    id = serializers.IntegerField()
    actor = serializers.CharField(help_text="Who acted: a token's name (and agent session), or user:<name>.")
    action = serializers.ChoiceField(choices=AuditEvent.Action.choices)
    target = serializers.CharField(help_text="What it acted on: a vault key, a token or member name.")
    created_at = serializers.DateTimeField()
