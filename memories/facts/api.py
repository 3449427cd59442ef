"""The facts API. Thin: parse, call one service or selector, render."""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from core.api_errors import BODY_ERRORS, TEAM_SCOPED_ERRORS, error_responses
from core.pagination import KeysetPagination
from memories.facts import selectors, services
from memories.facts.inputs import FactListQuerySerializer, FactReadQuerySerializer, FactSetInputSerializer
from memories.facts.serializers import (
    FactConflictErrorSerializer,
    FactHistoryOutputSerializer,
    FactOutputSerializer,
    FactSetOutputSerializer,
    fact_error_extra,
    fact_payload,
    set_payload,
    version_payload,
)
from teams.authentication import agent_actor
from teams.validators import KEY_PATTERN
from teams.viewsets import TEAM_PATH_PARAMETER, TeamScopedViewSet

ENTITY_PATH_PARAMETER = OpenApiParameter(
    "entity", str, OpenApiParameter.PATH, pattern=KEY_PATTERN, description="What the fact is about."
)
KEY_PATH_PARAMETER = OpenApiParameter(
    "key", str, OpenApiParameter.PATH, pattern=KEY_PATTERN, description="Which of the entity's facts."
)
FACT_PATH = [TEAM_PATH_PARAMETER, ENTITY_PATH_PARAMETER, KEY_PATH_PARAMETER]
ERRORS = error_responses(*TEAM_SCOPED_ERRORS)
HIGH_NOTE = " `high` facts are left out for read-only tokens (and are not found by them)."


class FactPagination(KeysetPagination):
    ordering = ("-created_at", "-id")


class EntityFactPagination(KeysetPagination):
    ordering = ("key", "id")


class FactHistoryPagination(KeysetPagination):
    ordering = ("-created_at", "-id")


def read_as_of(request: Request) -> datetime | None:
    """The read's `as_of`, if its query string names one; most reads send none, and
    have nothing to validate."""
    if not request.query_params:
        return None
    query = FactReadQuerySerializer(data=request.query_params)
    query.is_valid(raise_exception=True)
    as_of: datetime | None = query.validated_data.get("as_of")
    return as_of


def session_of(request: Request) -> str:
    """The agent session named by X-MemoryHub-Session (agent_actor has checked it)."""
    return request.headers.get("X-MemoryHub-Session", "").strip()


@extend_schema_view(
    list=extend_schema(
        summary="List facts",
        description="Active facts, newest first, a page at a time, filtered by `entity`, `domain` and "
        "`scope`; with `as_of`, the versions active at that time." + HIGH_NOTE,
        parameters=[TEAM_PATH_PARAMETER, FactListQuerySerializer],
        responses={200: FactOutputSerializer(many=True), **ERRORS},
    ),
    retrieve=extend_schema(
        operation_id="facts_entity_list",
        summary="An entity's facts",
        description="The entity's active facts by key, a page at a time; with `as_of`, those active at "
        "that time. 404 when the entity has none." + HIGH_NOTE,
        parameters=[TEAM_PATH_PARAMETER, ENTITY_PATH_PARAMETER, FactReadQuerySerializer],
        responses={200: FactOutputSerializer(many=True), **ERRORS},
    ),
)
class FactViewSet(TeamScopedViewSet):
    replica_actions: ClassVar[frozenset[str]] = frozenset({"list", "retrieve", "fact", "history"})
    lookup_field = "entity"
    lookup_value_regex = "[^/]+"
    pagination_class = FactPagination

    def _may_see_high(self) -> bool:
        return self.get_token().grants("write")

    def list(self, request: Request, team: str) -> Response:
        query = FactListQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        rows = selectors.list_facts(
            team_id=self.get_team().id, may_see_high=self._may_see_high(), **query.to_arguments()
        )
        paginator = FactPagination()
        page = paginator.paginate_queryset(rows, request, view=self) or []
        return paginator.get_paginated_response([fact_payload(fact) for fact in page])

    def retrieve(self, request: Request, team: str, entity: str) -> Response:
        services.check_lookup(entity, "key")
        rows = selectors.entity_facts(
            team_id=self.get_team().id,
            may_see_high=self._may_see_high(),
            entity=entity,
            as_of=read_as_of(request),
        )
        paginator = EntityFactPagination()
        page = paginator.paginate_queryset(rows, request, view=self) or []
        return paginator.get_paginated_response([fact_payload(fact) for fact in page])

    @extend_schema(
        methods=["GET"],
        summary="Get a fact",
        description="The active value of `(entity, key)`; with `as_of`, the version active at that "
        "time (404 if none was)." + HIGH_NOTE,
        parameters=[*FACT_PATH, FactReadQuerySerializer],
        responses={200: FactOutputSerializer, **ERRORS},
    )
    @action(detail=True, methods=["get"], url_path=r"(?P<key>[^/]+)")
    def fact(self, request: Request, team: str, entity: str, key: str) -> Response:
        services.check_lookup(entity, key)
        fact = selectors.get_fact(
            team_id=self.get_team().id,
            entity=entity,
            key=key,
            may_see_high=self._may_see_high(),
            as_of=read_as_of(request),
        )
        return Response(fact_payload(fact))

    @extend_schema(
        summary="Set a fact",
        description="Creates the fact (201), or leaves it as it is when the active version already holds "
        "exactly this (200, `unchanged`). A different value replaces the active one only with a "
        "`reason` (200, `superseded`; 409 `conflict` with the current version otherwise); the same value "
        "with other attributes is a new version without one. `scope`, `domains`, `sensitivity` and "
        "`confidence` left out are kept from the active version. The value is scrubbed of credentials.",
        parameters=FACT_PATH,
        request=FactSetInputSerializer,
        responses={
            201: OpenApiResponse(FactSetOutputSerializer, description="Created."),
            200: OpenApiResponse(FactSetOutputSerializer, description="Superseded, or unchanged."),
            **ERRORS,
            409: OpenApiResponse(
                FactConflictErrorSerializer,
                description="`conflict`: a different value is active and no `reason` was given; "
                "`current` is that version.",
            ),
            **error_responses(*BODY_ERRORS),
        },
    )
    @fact.mapping.put
    def set_fact(self, request: Request, team: str, entity: str, key: str) -> Response:
        payload = FactSetInputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        result = services.set_fact(
            team=self.get_team(),
            entity=entity,
            key=key,
            actor=agent_actor(request),
            session=session_of(request),
            **payload.to_arguments(),
        )
        code = status.HTTP_201_CREATED if result.outcome == "created" else status.HTTP_200_OK
        return Response(set_payload(result), status=code)

    @extend_schema(
        summary="Delete a fact",
        description="The active version stays in the fact's history, marked deleted.",
        parameters=FACT_PATH,
        responses={204: OpenApiResponse(description="Deleted."), **ERRORS},
    )
    @fact.mapping.delete
    def delete_fact(self, request: Request, team: str, entity: str, key: str) -> Response:
        services.delete_fact(team=self.get_team(), entity=entity, key=key, actor=agent_actor(request))
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        summary="Every version of a fact",
        description="Versions newest first (active, superseded, deleted), a page at a time; a superseded "
        "version names the one that replaced it." + HIGH_NOTE,
        parameters=[
            *FACT_PATH,
            OpenApiParameter("cursor", str, OpenApiParameter.QUERY, description="The `next` link's cursor."),
            OpenApiParameter("limit", int, OpenApiParameter.QUERY, description="Versions per page."),
        ],
        responses={200: FactHistoryOutputSerializer, **ERRORS},
    )
    @action(detail=True, methods=["get"], url_path=r"(?P<key>[^/]+)/history")
    def history(self, request: Request, team: str, entity: str, key: str) -> Response:
        services.check_lookup(entity, key)
        team_id = self.get_team().id
        rows = selectors.fact_versions(
            team_id=team_id, entity=entity, key=key, may_see_high=self._may_see_high()
        )
        paginator = FactHistoryPagination()
        page = paginator.paginate_queryset(rows, request, view=self) or []
        successors = selectors.successors_of(team_id=team_id, facts=page)
        body = {
            "entity": entity,
            "key": key,
            "history": [version_payload(fact, successors) for fact in page],
            "next": paginator.get_next_link(),
            "previous": paginator.get_previous_link(),
        }
        return Response(body)

    def serialize_error_extra(self, name: str, value: Any) -> Any:
        return fact_error_extra(name, value)
