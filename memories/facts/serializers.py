"""What the doors answer about facts (REST, MCP and the dashboard render the same)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from core.api_errors import ErrorSerializer
from core.built_fields import representation
from memories.facts.models import Fact
from memories.facts.services import FactSetResult


class FactOutputSerializer(serializers.Serializer[Fact]):
    id = serializers.UUIDField()
    entity = serializers.CharField()
    key = serializers.CharField()
    value = serializers.CharField()
    scope = serializers.CharField()
    domains = serializers.ListField(child=serializers.CharField())
    sensitivity = serializers.CharField()
    confidence = serializers.FloatField()
    is_active = serializers.BooleanField()
    supersedes = serializers.UUIDField(source="supersedes_id", allow_null=True)
    supersede_reason = serializers.CharField()
    updated_by = serializers.CharField(
        help_text="Who set it: a token's name (with `/<session>`), or a person."
    )
    session = serializers.CharField(help_text="The agent session it was set in, if one was named.")
    source_draft = serializers.UUIDField(allow_null=True, help_text="The accepted draft it came from.")
    created_at = serializers.DateTimeField()
    deleted_at = serializers.DateTimeField(allow_null=True)
    deleted_by = serializers.CharField()


class FactSetOutputSerializer(FactOutputSerializer):
    outcome = serializers.ChoiceField(
        choices=["created", "superseded", "unchanged"],
        help_text="`unchanged`: the active version already held exactly this; nothing was written.",
    )
    redactions = serializers.DictField(
        child=serializers.IntegerField(), help_text="Credentials redacted from the value, by kind."
    )


class FactVersionOutputSerializer(FactOutputSerializer):
    state = serializers.ChoiceField(choices=["active", "superseded", "deleted"])
    superseded_by = serializers.UUIDField(allow_null=True, help_text="The version that replaced this one.")


class FactHistoryOutputSerializer(serializers.Serializer[dict[str, Any]]):
    entity = serializers.CharField()
    key = serializers.CharField()
    history = FactVersionOutputSerializer(many=True, help_text="Versions, newest first.")
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)


class FactConflictErrorSerializer(ErrorSerializer):
    """409 `conflict`: the fact has a different active value and no reason was given."""

    current = FactOutputSerializer(help_text="The active version, with its value.")


def fact_payload(fact: Fact) -> dict[str, Any]:
    return representation(FactOutputSerializer, fact)


def set_payload(result: FactSetResult) -> dict[str, Any]:
    return {**fact_payload(result.fact), "outcome": result.outcome, "redactions": result.redactions}


def version_payload(fact: Fact, successors: dict[object, Fact]) -> dict[str, Any]:
    successor = successors.get(fact.id)
    state = "active" if fact.is_active else "deleted" if fact.deleted_at is not None else "superseded"
    return {**fact_payload(fact), "state": state, "superseded_by": successor.id if successor else None}


def fact_error_extra(name: str, value: Any) -> Any:
    return fact_payload(value) if name == "current" and isinstance(value, Fact) else value
