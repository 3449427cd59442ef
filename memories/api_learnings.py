"""The learnings API: record what an agent learned, with how sure it is."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from core.api_errors import BODY_ERRORS, TEAM_SCOPED_ERRORS, error_responses
from memories import learnings
from memories.serializers import (
    ConflictErrorSerializer,
    MemorySavedOutputSerializer,
    memory_error_extra,
    saved_payload,
)
from teams.authentication import agent_actor
from teams.serializers import StrictBooleanField, StrictCharField, StrictInputSerializer
from teams.viewsets import TEAM_PATH_PARAMETER, TeamScopedViewSet


class LearningInputSerializer(StrictInputSerializer):
    """A claim about a topic and how sure the agent is. Unknown fields are rejected."""

    topic = StrictCharField(
        max_length=learnings.MAX_TOPIC_CHARS,
        help_text="What the claim is about, e.g. deploys (part of the key).",
    )
    claim = StrictCharField(
        max_length=learnings.MAX_CLAIM_CHARS,
        help_text="One statement; the same claim (case and spacing aside) on a topic is the same learning.",
    )
    confidence = serializers.ChoiceField(choices=learnings.Confidence.choices)
    corroborated = StrictBooleanField(default=False, help_text="Confirmed by a second source.")
    domains = serializers.ListField(
        child=StrictCharField(max_length=learnings.MAX_DOMAIN_CHARS),
        max_length=learnings.MAX_DOMAINS,
        default=list,
        help_text="Short labels of the areas it applies to, e.g. ci.",
    )
    verified = StrictBooleanField(default=False, help_text="Checked against reality, e.g. by a test.")
    type = serializers.ChoiceField(choices=list(learnings.LEARNING_TYPES), default="lesson")

    def to_arguments(self) -> dict[str, Any]:
        """memories.learnings.record_learning's arguments (but the team and the writer)."""
        data = self.validated_data
        names = ("topic", "claim", "confidence", "corroborated", "domains", "verified")
        return {**{name: data[name] for name in names}, "type_name": data["type"]}


class LearningSavedOutputSerializer(MemorySavedOutputSerializer):
    outcome = serializers.ChoiceField(
        choices=["created", "superseded", "unchanged"],
        read_only=True,
        help_text="created: a new learning; superseded: a new version (the reason says what "
        "changed); unchanged: the same learning was already recorded, nothing was written.",
    )

    class Meta(MemorySavedOutputSerializer.Meta):
        fields = [*MemorySavedOutputSerializer.Meta.fields, "outcome"]
        read_only_fields = fields


class LearningViewSet(TeamScopedViewSet):
    @extend_schema(
        summary="Record a learning",
        description="Stores the claim as a memory under `learn:{topic_slug}:{claim_hash}` with its "
        "confidence in `metadata.learning`. Recording it again with a different confidence, "
        "corroboration, verification or type supersedes it with a reason such as "
        "`confidence high → medium`; a change of wording, topic spelling or domains only is a "
        "soft supersede; an identical learning changes nothing and answers 200.",
        parameters=[TEAM_PATH_PARAMETER],
        request=LearningInputSerializer,
        responses={
            201: OpenApiResponse(
                LearningSavedOutputSerializer, description="Recorded: a new learning or a new version."
            ),
            200: OpenApiResponse(
                LearningSavedOutputSerializer, description="Already recorded exactly so; nothing changed."
            ),
            **error_responses(*TEAM_SCOPED_ERRORS),
            409: OpenApiResponse(
                ConflictErrorSerializer, description="Concurrent writers kept the key busy; try again."
            ),
            **error_responses(*BODY_ERRORS),
        },
    )
    def create(self, request: Request, team: str) -> Response:
        payload = LearningInputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        result = learnings.record_learning(
            team=self.get_team(), updated_by=agent_actor(request), **payload.to_arguments()
        )
        body = dict(saved_payload(result.saved))
        body["outcome"] = result.outcome
        code = status.HTTP_200_OK if result.outcome == "unchanged" else status.HTTP_201_CREATED
        return Response(body, status=code)

    def serialize_error_extra(self, name: str, value: Any) -> Any:
        return memory_error_extra(name, value)
