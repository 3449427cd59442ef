"""What the doors accept for facts, and how it becomes a service's arguments (REST and
MCP go through the same serializers; their help texts document both)."""

from __future__ import annotations

import re
from typing import Any

from rest_framework import serializers

from memories.facts.models import MAX_FACT_VALUE_CHARS, Sensitivity
from memories.facts.services import MAX_FACT_REASON_CHARS
from memories.inputs import AS_OF_HELP, AwareDateTimeField
from teams.serializers import StrictCharField, StrictFloatField, StrictInputSerializer, StrictRegexField
from teams.validators import KEY_PATTERN

MAX_DOMAINS = 20
DOMAIN_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,49}$"
# "team", "project:<name>" or "user:<username>" (a Django username's characters).
SCOPE_PATTERN = r"^(team|project:[A-Za-z0-9][A-Za-z0-9._ /-]{0,199}|user:[A-Za-z0-9@.+_-]{1,150})$"
SCOPE_HELP = "Who the fact is about: `team`, `project:<name>` or `user:<username>`."
DOMAIN_HELP = "A word the fact is filed under (lowercase letters, digits, _ and -)."
_domain_re = re.compile(DOMAIN_PATTERN)


def entity_field(**options: Any) -> StrictRegexField:
    return StrictRegexField(
        KEY_PATTERN,
        max_length=200,
        help_text="What the fact is about, e.g. `project-alpha` (letters, digits and . _ : @ -).",
        **options,
    )


def fact_key_field(**options: Any) -> StrictRegexField:
    return StrictRegexField(
        KEY_PATTERN,
        max_length=200,
        help_text="Which of the entity's facts, e.g. `payments.provider` (letters, digits and . _ : @ -).",
        **options,
    )


class FactSetInputSerializer(StrictInputSerializer):
    """The body of a fact's PUT (and of the MCP tool fact_set)."""

    value = StrictCharField(
        max_length=MAX_FACT_VALUE_CHARS, trim_whitespace=False, help_text="The answer, e.g. `Paddle`."
    )
    scope = StrictRegexField(
        SCOPE_PATTERN, max_length=205, required=False, help_text=f"{SCOPE_HELP} Default `team`, or kept."
    )
    domains = serializers.ListField(
        child=StrictRegexField(DOMAIN_PATTERN, max_length=50, help_text=DOMAIN_HELP),
        max_length=MAX_DOMAINS,
        required=False,
        help_text='Words the fact is filed under, e.g. `["payments"]`. Default none, or kept.',
    )
    sensitivity = serializers.ChoiceField(
        choices=Sensitivity.choices,
        required=False,
        help_text="`high`: never injected, never shown to read-only tokens. Default `normal`, or kept.",
    )
    confidence = StrictFloatField(
        min_value=0, max_value=1, required=False, help_text="How sure, from 0 to 1. Default 1, or kept."
    )
    reason = StrictCharField(
        max_length=MAX_FACT_REASON_CHARS,
        required=False,
        allow_blank=True,
        help_text="Why the value changes: required to replace a different active value.",
    )

    def validate_domains(self, value: list[str]) -> list[str]:
        return sorted(set(value))

    def to_arguments(self) -> dict[str, Any]:
        data = self.validated_data
        return {
            "value": data["value"],
            "scope": data.get("scope"),
            "domains": data.get("domains"),
            "sensitivity": data.get("sensitivity"),
            "confidence": data.get("confidence"),
            "reason": data.get("reason"),
        }


class FactReadQuerySerializer(serializers.Serializer):  # type: ignore[type-arg]
    as_of = AwareDateTimeField(required=False, help_text=AS_OF_HELP)


class FactListQuerySerializer(serializers.Serializer):  # type: ignore[type-arg]
    entity = StrictRegexField(
        KEY_PATTERN, max_length=200, required=False, help_text="Only this entity's facts."
    )
    domain = StrictRegexField(
        DOMAIN_PATTERN, max_length=50, required=False, help_text="Only facts filed under this domain."
    )
    scope = StrictRegexField(
        SCOPE_PATTERN, max_length=205, required=False, help_text=f"Only this scope. {SCOPE_HELP}"
    )
    as_of = AwareDateTimeField(required=False, help_text="The versions active at this time (ISO 8601).")

    def to_arguments(self) -> dict[str, Any]:
        data = self.validated_data
        return {name: data.get(name) for name in ("entity", "domain", "scope", "as_of")}
