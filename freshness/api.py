"""The nudges API: list a team's nudges and resolve one in one call. Thin: parse, call
one service or selector, render."""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import quote

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field, extend_schema_view
from rest_framework import serializers
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from core.api_errors import BODY_ERRORS, TEAM_SCOPED_ERRORS, error_responses
from core.built_fields import FieldsBuiltOnce
from core.errors import InvalidInput
from core.pagination import KeysetPagination
from freshness import fact_contradictions, selectors, services
from freshness.models import Nudge, NudgeAction, NudgeKind, NudgeState
from memories.models import Memory
from teams.authentication import agent_actor
from teams.serializers import StrictInputSerializer
from teams.viewsets import TEAM_PATH_PARAMETER, TeamScopedViewSet

ID_PATH_PARAMETER = OpenApiParameter(
    "id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="The nudge's id, as the list gives it."
)
ERRORS = error_responses(*TEAM_SCOPED_ERRORS)


class NudgeListQuerySerializer(serializers.Serializer):  # type: ignore[type-arg]
    kind = serializers.ChoiceField(
        choices=NudgeKind.choices, required=False, help_text="Only nudges of this kind."
    )
    state = serializers.ChoiceField(
        choices=selectors.STATE_FILTER_CHOICES,
        default=NudgeState.OPEN,
        help_text="Open ones by default; `all` for every state.",
    )


class NudgeResolveInputSerializer(StrictInputSerializer):
    action = serializers.ChoiceField(
        choices=NudgeAction.choices,
        help_text="confirm: still true; compatible: a contradiction's two entries both hold; "
        "dismiss: change nothing; supersede: archive a contradiction's older entry (a fact "
        "contradiction: set the conversation's value); archive: a prune proposal's entry.",
    )


class NudgeEntrySerializer(serializers.Serializer):  # type: ignore[type-arg]
    """An entry a nudge concerns, with where to read it."""

    id = serializers.UUIDField()
    key = serializers.CharField()
    type = serializers.CharField()
    is_active = serializers.BooleanField(help_text="False when the key moved on since the nudge was made.")
    url = serializers.CharField(help_text="This version in the API (GET).")


class NudgeFactSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """The fact a fact_contradiction nudge is about."""

    id = serializers.UUIDField(help_text="The fact's version the nudge was made on.")
    entity = serializers.CharField()
    key = serializers.CharField()
    sensitivity = serializers.CharField()
    is_active = serializers.BooleanField(help_text="False when the fact moved on since the nudge was made.")
    current_value = serializers.CharField(
        allow_null=True, help_text="That version's value; null for a `high` fact and a read-only token."
    )
    extracted_value = serializers.CharField(
        allow_null=True,
        help_text="The value the conversation stated; null for a `high` fact and a read-only token.",
    )


class NudgeOutputSerializer(FieldsBuiltOnce, serializers.ModelSerializer):  # type: ignore[type-arg]
    """Rendered with the context's `team_slug` and `may_see_high` (whether the reader may
    see `high` facts' values; False unless said)."""

    kind = serializers.ChoiceField(choices=NudgeKind.choices, read_only=True)
    state = serializers.ChoiceField(choices=NudgeState.choices, read_only=True)
    resolution = serializers.ChoiceField(choices=["", *NudgeAction.values], read_only=True)
    message = serializers.CharField(read_only=True, help_text="What to do.")
    details = serializers.SerializerMethodField()
    confidence = serializers.FloatField(
        read_only=True,
        allow_null=True,
        help_text="A contradiction's confidence (0..1); null for other kinds.",
    )
    keys = serializers.SerializerMethodField()
    entries = serializers.SerializerMethodField()
    fact = serializers.SerializerMethodField()

    class Meta:
        model = Nudge
        fields = [
            "id",
            "kind",
            "state",
            "message",
            "keys",
            "entries",
            "fact",
            "details",
            "confidence",
            "resolution",
            "created_at",
            "resolved_at",
            "resolved_by",
        ]
        read_only_fields = fields

    @extend_schema_field(
        serializers.ListField(
            child=serializers.CharField(),
            help_text="The keys it concerns (two for a contradiction; `entity/key` for a fact "
            "contradiction).",
        )
    )
    def get_keys(self, nudge: Nudge) -> list[str]:
        if nudge.fact is not None:
            return [f"{nudge.fact.entity}/{nudge.fact.key}"]
        return [memory.key for memory in _entries(nudge)]

    @extend_schema_field(serializers.DictField(help_text="What the job found (kind-specific)."))
    def get_details(self, nudge: Nudge) -> dict[str, Any]:
        return fact_contradictions.shown_details(nudge)

    @extend_schema_field(
        NudgeFactSerializer(allow_null=True, help_text="A fact contradiction's fact; null for other kinds.")
    )
    def get_fact(self, nudge: Nudge) -> dict[str, Any] | None:
        return fact_contradictions.nudge_fact_payload(
            nudge, may_see_high=bool(self.context.get("may_see_high", False))
        )

    @extend_schema_field(NudgeEntrySerializer(many=True))
    def get_entries(self, nudge: Nudge) -> list[dict[str, Any]]:
        return [
            {
                "id": memory.id,
                "key": memory.key,
                "type": memory.type,
                "is_active": memory.is_active,
                "url": _version_path(self.context.get("team_slug", ""), memory),
            }
            for memory in _entries(nudge)
        ]


def _entries(nudge: Nudge) -> list[Memory]:
    return [m for m in (nudge.memory, nudge.other_memory) if m is not None]


def _version_path(team_slug: str, memory: Memory) -> str:
    return f"/api/v1/teams/{team_slug}/memories/{quote(memory.key, safe='')}/versions/{memory.id}/"


class NudgePagination(KeysetPagination):
    ordering = ("-created_at", "-id")


@extend_schema_view(
    list=extend_schema(
        summary="List nudges",
        description="What the team is asked to look at, newest first, a page at a time: entries due "
        "for confirmation, broken anchors, contradictions, prune proposals. Each nudge names the keys "
        "it concerns, links the entries and says what to do.",
        parameters=[TEAM_PATH_PARAMETER, NudgeListQuerySerializer],
        responses={200: NudgeOutputSerializer(many=True), **ERRORS},
    ),
    resolve=extend_schema(
        summary="Resolve a nudge",
        description="One call: `confirm` confirms the entry (both entries of a contradiction, as "
        "compatible) as still true; `dismiss` closes the nudge. An action that does not resolve the "
        "nudge's kind answers 400 `action_not_applicable`; a nudge no longer open, 409 `nudge_closed`. "
        "A fact contradiction is resolved by `supersede` (the conversation's value becomes the fact's "
        "new version) or `dismiss` (the fact stays).",
        parameters=[TEAM_PATH_PARAMETER, ID_PATH_PARAMETER],
        request=NudgeResolveInputSerializer,
        responses={
            200: NudgeOutputSerializer,
            **ERRORS,
            **error_responses(409),
            **error_responses(*BODY_ERRORS),
        },
    ),
)
class NudgeViewSet(TeamScopedViewSet):
    lookup_field = "id"
    lookup_value_regex = "[^/]+"
    pagination_class = NudgePagination

    def list(self, request: Request, team: str) -> Response:
        query = NudgeListQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        rows = selectors.list_nudges(
            team=self.get_team(), kind=query.validated_data.get("kind"), state=query.validated_data["state"]
        )
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(rows, request, view=self)
        rendered = NudgeOutputSerializer(page, many=True, context=self._context()).data
        return paginator.get_paginated_response(rendered)

    def _context(self) -> dict[str, Any]:
        return {"team_slug": self.get_team().slug, "may_see_high": self.get_token().grants("write")}

    @action(detail=True, methods=["post"])
    def resolve(self, request: Request, team: str, id: str) -> Response:
        nudge_id = _parse_nudge_id(id)
        payload = NudgeResolveInputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        nudge = services.resolve_nudge(
            team=self.get_team(),
            nudge_id=nudge_id,
            action=payload.validated_data["action"],
            actor=agent_actor(request),
        )
        return Response(NudgeOutputSerializer(nudge, context=self._context()).data)


def _parse_nudge_id(value: str) -> uuid.UUID:
    try:
        return uuid.UUID(value) if len(value) <= 64 else uuid.UUID("x")
    except (ValueError, TypeError):
        raise InvalidInput("malformed nudge id", field="id") from None
