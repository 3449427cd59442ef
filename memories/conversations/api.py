"""The conversations API. Thin: parse, call one service or selector, render."""

from __future__ import annotations

from typing import ClassVar

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from core.api_errors import BODY_ERRORS, TEAM_SCOPED_ERRORS, error_responses
from core.pagination import KeysetPagination
from memories.conversations import selectors, services
from memories.conversations.inputs import (
    ConversationCreateInputSerializer,
    ConversationListQuerySerializer,
    ConversationReadQuerySerializer,
)
from memories.conversations.serializers import (
    ConversationDetailOutputSerializer,
    ConversationOutputSerializer,
    conversation_payload,
    detail_payload,
)
from teams.authentication import agent_actor
from teams.viewsets import TEAM_PATH_PARAMETER, TeamScopedViewSet

ID_PATH_PARAMETER = OpenApiParameter(
    "id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="The conversation's id."
)
ERRORS = error_responses(*TEAM_SCOPED_ERRORS)


class ConversationPagination(KeysetPagination):
    ordering = ("-created_at", "-id")


@extend_schema_view(
    list=extend_schema(
        summary="List conversations",
        description="The team's conversations, newest first, a page at a time (without their lines).",
        parameters=[TEAM_PATH_PARAMETER, ConversationListQuerySerializer],
        responses={200: ConversationOutputSerializer(many=True), **ERRORS},
    ),
    retrieve=extend_schema(
        summary="Get a conversation",
        description="The conversation and its lines; `lines=a-b` gives lines a to b only.",
        parameters=[TEAM_PATH_PARAMETER, ID_PATH_PARAMETER, ConversationReadQuerySerializer],
        responses={200: ConversationDetailOutputSerializer, **ERRORS},
    ),
    create=extend_schema(
        summary="Store a conversation",
        description="Stores a transcript as ordered lines. Every line is scrubbed of credentials and the "
        "team's vault secrets before it is stored; the lines are indexed for search in the background. "
        "413 `transcript_too_large` past the size bounds; 409 `quota_exceeded` past the team's quota. "
        "Kept for the team's retention (`conversation_retention_days`, default 30).",
        parameters=[TEAM_PATH_PARAMETER],
        request=ConversationCreateInputSerializer,
        responses={201: ConversationOutputSerializer, **ERRORS, **error_responses(409, *BODY_ERRORS)},
    ),
    destroy=extend_schema(
        summary="Delete a conversation",
        description="The conversation, its lines and its search index go at once.",
        parameters=[TEAM_PATH_PARAMETER, ID_PATH_PARAMETER],
        responses={204: OpenApiResponse(description="Deleted."), **ERRORS},
    ),
)
class ConversationViewSet(TeamScopedViewSet):
    replica_actions: ClassVar[frozenset[str]] = frozenset({"list", "retrieve"})
    lookup_field = "id"
    lookup_value_regex = "[^/]+"
    pagination_class = ConversationPagination

    def list(self, request: Request, team: str) -> Response:
        query = ConversationListQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        rows = selectors.list_conversations(
            team_id=self.get_team().id, session=query.validated_data.get("session")
        )
        paginator = ConversationPagination()
        page = paginator.paginate_queryset(rows, request, view=self) or []
        return paginator.get_paginated_response([conversation_payload(row) for row in page])

    def retrieve(self, request: Request, team: str, id: str) -> Response:
        team_id = self.get_team().id
        conversation = selectors.get_conversation(team_id=team_id, conversation_id=id)
        query = ConversationReadQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        first, last = query.line_range()
        lines = selectors.conversation_lines(
            team_id=team_id, conversation=conversation, first=first, last=last
        )
        return Response(detail_payload(conversation, lines, first))

    def create(self, request: Request, team: str) -> Response:
        payload = ConversationCreateInputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        conversation = services.store_conversation(
            team=self.get_team(), actor=agent_actor(request), **payload.to_arguments()
        )
        return Response(conversation_payload(conversation), status=status.HTTP_201_CREATED)

    def destroy(self, request: Request, team: str, id: str) -> Response:
        services.delete_conversation(team=self.get_team(), conversation_id=id)
        return Response(status=status.HTTP_204_NO_CONTENT)
