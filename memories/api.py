"""The memories API. Thin: parse, call one service or selector, render."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from memories import selectors, services
from memories.models import Memory
from memories.serializers import (
    ConflictErrorSerializer,
    MemoryCreateInputSerializer,
    MemoryHistoryOutputSerializer,
    MemoryListQuerySerializer,
    MemoryOutputSerializer,
    MemorySavedOutputSerializer,
    saved_payload,
)
from memoryhub.api_errors import BODY_ERRORS, TEAM_SCOPED_ERRORS, error_responses
from memoryhub.lib.errors import InvalidInput
from memoryhub.pagination import KeysetPagination
from teams.authentication import acting_name
from teams.validators import KEY_PATTERN, is_key
from teams.viewsets import TEAM_PATH_PARAMETER, TeamScopedViewSet

KEY_PATH_PARAMETER = OpenApiParameter(
    "key", str, OpenApiParameter.PATH, pattern=KEY_PATTERN, description="The memory's key."
)
ERRORS = error_responses(*TEAM_SCOPED_ERRORS)


class MemoryPagination(KeysetPagination):
    ordering = ("-created_at", "-id")


@extend_schema_view(
    list=extend_schema(
        summary="List active memories",
        description="Active memories, newest first, a page at a time.",
        parameters=[TEAM_PATH_PARAMETER, MemoryListQuerySerializer],
        responses={200: MemoryOutputSerializer(many=True), **ERRORS},
    ),
    create=extend_schema(
        summary="Save a memory",
        description="Insert a new key, or supersede the active entry when `supersede_reason` is given.",
        parameters=[TEAM_PATH_PARAMETER],
        request=MemoryCreateInputSerializer,
        responses={
            201: MemorySavedOutputSerializer,
            **ERRORS,
            409: OpenApiResponse(
                ConflictErrorSerializer,
                description="The key has an active entry and no `supersede_reason` was given.",
            ),
            **error_responses(*BODY_ERRORS),
        },
    ),
    retrieve=extend_schema(
        summary="Get the active entry of a key",
        parameters=[TEAM_PATH_PARAMETER, KEY_PATH_PARAMETER],
        responses={200: MemoryOutputSerializer, **ERRORS},
    ),
    destroy=extend_schema(
        summary="Delete the active entry of a key",
        description="The entry stays in the key's history, marked deleted.",
        parameters=[TEAM_PATH_PARAMETER, KEY_PATH_PARAMETER],
        responses={204: OpenApiResponse(description="Deleted."), **ERRORS},
    ),
    history=extend_schema(
        summary="Every version of a key",
        description="Created, superseded and deleted events, newest first.",
        parameters=[TEAM_PATH_PARAMETER, KEY_PATH_PARAMETER],
        responses={200: MemoryHistoryOutputSerializer, **ERRORS},
    ),
)
class MemoryViewSet(TeamScopedViewSet):
    lookup_field = "key"
    lookup_value_regex = "[^/]+"
    pagination_class = MemoryPagination

    def list(self, request: Request, team: str) -> Response:
        query = MemoryListQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        memories = selectors.list_memories(
            team=self.get_team(),
            memory_type=query.validated_data.get("type"),
            project=query.validated_data.get("project"),
        )
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(memories, request, view=self)
        return paginator.get_paginated_response(MemoryOutputSerializer(page, many=True).data)

    def create(self, request: Request, team: str) -> Response:
        payload = MemoryCreateInputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        result = services.save_memory(
            team=self.get_team(),
            key=data["key"],
            content=data["content"],
            type_name=data.get("type"),
            supersede_reason=data.get("supersede_reason"),
            project=data.get("project"),
            metadata=data.get("metadata"),
            updated_by=acting_name(request),
        )
        return Response(saved_payload(result), status=status.HTTP_201_CREATED)

    def retrieve(self, request: Request, team: str, key: str) -> Response:
        _check_key(key)
        memory = selectors.get_active_memory(team=self.get_team(), key=key)
        return Response(MemoryOutputSerializer(memory).data)

    def destroy(self, request: Request, team: str, key: str) -> Response:
        _check_key(key)
        services.delete_memory(team=self.get_team(), key=key, deleted_by=acting_name(request))
        return Response(status=status.HTTP_204_NO_CONTENT)

    @action(detail=True, methods=["get"])
    def history(self, request: Request, team: str, key: str) -> Response:
        _check_key(key)
        events = selectors.memory_history(team=self.get_team(), key=key)
        return Response(MemoryHistoryOutputSerializer({"key": key, "history": events}).data)

    def serialize_error_extra(self, name: str, value: Any) -> Any:
        if isinstance(value, Memory):
            return MemoryOutputSerializer(value).data
        return value


def _check_key(key: str) -> None:
    if not is_key(key):
        raise InvalidInput("malformed key", field="key")
