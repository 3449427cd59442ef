"""The search API: one POST that runs the hybrid pipeline for the token's team."""

from __future__ import annotations

from typing import Any, ClassVar

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from memories.types import ACCEPTED_TYPE_NAMES, resolve_type
from memoryhub.api_errors import BODY_ERRORS, TEAM_SCOPED_ERRORS, error_responses
from search import selectors
from search.selectors import MAX_QUERY_CHARS, MAX_RESULTS
from teams.serializers import StrictBooleanField, StrictCharField, StrictInputSerializer
from teams.viewsets import TEAM_PATH_PARAMETER, TeamScopedViewSet


class StrictFloatField(serializers.FloatField):
    """A number, not a numeric string or a boolean."""

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool) or not isinstance(data, int | float):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictIntegerField(serializers.IntegerField):
    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class SearchInputSerializer(StrictInputSerializer):
    query = StrictCharField(max_length=MAX_QUERY_CHARS, help_text="What to look for, in plain words.")
    max_results = StrictIntegerField(min_value=1, max_value=MAX_RESULTS, default=5)
    min_score = StrictFloatField(required=False, allow_null=True, min_value=0.0, max_value=1.0)
    types = serializers.ListField(
        child=StrictCharField(max_length=32),
        required=False,
        allow_empty=False,
        max_length=len(ACCEPTED_TYPE_NAMES),
        help_text=f"Only these types (aliases accepted): {', '.join(ACCEPTED_TYPE_NAMES)}.",
    )
    project = StrictCharField(required=False, allow_blank=True, max_length=200)
    include_superseded = StrictBooleanField(default=True)
    explain = StrictBooleanField(default=False)
    mode = serializers.ChoiceField(
        choices=["hybrid", "keyword", "vector"],
        default="hybrid",
        help_text="hybrid (default) merges both paths; keyword or vector runs one of them.",
    )

    def validate_types(self, value: list[str]) -> list[str]:
        resolved = []
        for name in value:
            memory_type = resolve_type(name)
            if memory_type is None:
                raise serializers.ValidationError(
                    f"unknown type '{name}'; use one of: {', '.join(ACCEPTED_TYPE_NAMES)}"
                )
            resolved.append(memory_type.value)
        return sorted(set(resolved))


class SupersededBySerializer(serializers.Serializer):
    id = serializers.UUIDField()
    key = serializers.CharField()
    reason = serializers.CharField(allow_blank=True)
    kind = serializers.CharField(allow_blank=True)
    is_active = serializers.BooleanField()


class ExplainSerializer(serializers.Serializer):
    vector = serializers.FloatField(help_text="Cosine similarity of the best chunk, 0..1.")
    keyword = serializers.FloatField(help_text="Full-text rank divided by this query's best rank, 0..1.")
    merged = serializers.FloatField(help_text="w_vec * vector + w_kw * keyword (one part in single modes).")
    decay = serializers.FloatField(help_text="0.5 ** (age / half-life); 1 for identity and lesson.")
    mmr = serializers.FloatField(
        allow_null=True, help_text="λ * score - (1 - λ) * similarity to results above."
    )


class SearchResultSerializer(serializers.Serializer):
    id = serializers.UUIDField(source="memory_id")
    key = serializers.CharField()
    snippet = serializers.CharField()
    score = serializers.FloatField()
    type = serializers.CharField()
    is_active = serializers.BooleanField()
    source = serializers.CharField(help_text="Which paths found it: keyword, vector or keyword+vector.")
    created_at = serializers.DateTimeField()
    superseded_by = SupersededBySerializer(required=False, allow_null=True)
    explain = ExplainSerializer(required=False)

    def to_representation(self, instance: Any) -> dict[str, Any]:
        data = super().to_representation(instance)
        if instance.superseded_by is None:
            data.pop("superseded_by")
        if instance.explain is None:
            data.pop("explain")
        return data


class SearchOutputSerializer(serializers.Serializer):
    search_mode = serializers.ChoiceField(choices=["hybrid", "keyword", "vector"])
    results = SearchResultSerializer(many=True)
    warnings = serializers.ListField(child=serializers.CharField())


class SearchViewSet(TeamScopedViewSet):
    # A search reads, whatever its verb.
    required_scopes: ClassVar[dict[str, str]] = {"create": "read"}

    @extend_schema(
        summary="Search memories",
        description="Hybrid keyword and vector search with age decay and diversification. "
        "Falls back to keyword-only (search_mode: keyword) when no embeddings are available.",
        parameters=[TEAM_PATH_PARAMETER],
        request=SearchInputSerializer,
        responses={200: SearchOutputSerializer, **error_responses(*TEAM_SCOPED_ERRORS, *BODY_ERRORS)},
    )
    def create(self, request: Request, team: str) -> Response:
        payload = SearchInputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        outcome = selectors.search_memories(
            team=self.get_team(),
            query=data["query"],
            max_results=data["max_results"],
            min_score=data.get("min_score"),
            types=data.get("types"),
            project=data.get("project"),
            include_superseded=data["include_superseded"],
            explain=data["explain"],
            mode=data["mode"],
        )
        return Response(SearchOutputSerializer(outcome).data)
