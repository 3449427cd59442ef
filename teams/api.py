"""The vault API (a team's configuration values and secrets, apart from memory) and the
team's audit trail."""

from __future__ import annotations

from typing import ClassVar

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from core.api_errors import BODY_ERRORS, TEAM_SCOPED_ERRORS, ErrorSerializer, error_responses
from core.pagination import KeysetPagination
from teams import selectors, services
from teams.authentication import agent_actor
from teams.serializers import (
    AuditEventOutputSerializer,
    VaultEntryInputSerializer,
    VaultEntryOutputSerializer,
    VaultEntryRevealSerializer,
)
from teams.validators import KEY_PATTERN
from teams.viewsets import TEAM_PATH_PARAMETER, TeamScopedViewSet

KEY_PATH_PARAMETER = OpenApiParameter(
    "key", str, OpenApiParameter.PATH, pattern=KEY_PATTERN, description="The vault entry's key."
)
ERRORS = error_responses(*TEAM_SCOPED_ERRORS)


class VaultPagination(KeysetPagination):
    ordering = "key"


@extend_schema_view(
    list=extend_schema(
        summary="List vault entries",
        description="Entries by key, a page at a time; secret values are masked.",
        parameters=[TEAM_PATH_PARAMETER],
        responses={200: VaultEntryOutputSerializer(many=True), **ERRORS},
    ),
    retrieve=extend_schema(
        summary="Get one vault entry",
        description="The one response that shows a secret's value; secrets need the admin scope.",
        parameters=[TEAM_PATH_PARAMETER, KEY_PATH_PARAMETER],
        responses={200: VaultEntryRevealSerializer, **ERRORS},
    ),
    update=extend_schema(
        summary="Set a vault entry",
        description="Any write token may add a key and change plain values. Replacing a secret, "
        "turning it into a plain value or deleting it needs the admin scope (403 otherwise). A secret "
        "must be at least 8 characters and not a common word or markup (400): every secret is "
        "redacted from all the team's responses.",
        parameters=[TEAM_PATH_PARAMETER, KEY_PATH_PARAMETER],
        request=VaultEntryInputSerializer,
        responses={
            200: OpenApiResponse(VaultEntryOutputSerializer, description="The entry was replaced."),
            201: OpenApiResponse(VaultEntryOutputSerializer, description="The entry was created."),
            **ERRORS,
            409: OpenApiResponse(
                ErrorSerializer,
                description="`quota_exceeded`: a new key past the team's vault quota (`quota`, `limit`).",
            ),
            **error_responses(*BODY_ERRORS),
        },
    ),
    destroy=extend_schema(
        summary="Delete a vault entry",
        description="Deleting a secret needs the admin scope.",
        parameters=[TEAM_PATH_PARAMETER, KEY_PATH_PARAMETER],
        responses={204: OpenApiResponse(description="Deleted."), **ERRORS},
    ),
)
class VaultViewSet(TeamScopedViewSet):
    lookup_field = "key"
    lookup_value_regex = "[^/]+"
    pagination_class = VaultPagination

    def list(self, request: Request, team: str) -> Response:
        entries = selectors.list_vault_entries(team=self.get_team())
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(entries, request, view=self)
        # drf-stubs type many=True's instance as one entry (typeddjango/djangorestframework-stubs#827).
        rendered = VaultEntryOutputSerializer(page, many=True).data  # type: ignore[arg-type]
        return paginator.get_paginated_response(rendered)

    def retrieve(self, request: Request, team: str, key: str) -> Response:
        entry, revealed = services.reveal_vault_entry(
            team=self.get_team(),
            key=key,
            actor=agent_actor(request),
            may_reveal_secrets=self.get_token().grants("admin"),
        )
        self.reveals_secret = True
        return Response(VaultEntryRevealSerializer(entry, context={"revealed_value": revealed}).data)

    def update(self, request: Request, team: str, key: str) -> Response:
        payload = VaultEntryInputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        entry, created = services.set_vault_entry(
            team=self.get_team(),
            key=key,
            value=payload.validated_data["value"],
            is_secret=payload.validated_data["is_secret"],
            actor=agent_actor(request),
            may_change_secrets=self.get_token().grants("admin"),
        )
        return Response(
            VaultEntryOutputSerializer(entry).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )

    def destroy(self, request: Request, team: str, key: str) -> Response:
        services.delete_vault_entry(
            team=self.get_team(),
            key=key,
            actor=agent_actor(request),
            may_change_secrets=self.get_token().grants("admin"),
        )
        return Response(status=status.HTTP_204_NO_CONTENT)


class AuditPagination(KeysetPagination):
    ordering = ("-created_at", "-id")


@extend_schema_view(
    list=extend_schema(
        summary="The team's audit trail",
        description="Who revealed, changed or deleted a vault entry, issued or revoked a token, "
        "changed a membership or re-indexed the team, from every surface (API, dashboard, "
        "commands), newest first, a page at a time. Needs the admin scope.",
        parameters=[TEAM_PATH_PARAMETER],
        responses={200: AuditEventOutputSerializer(many=True), **ERRORS},
    ),
)
class AuditEventViewSet(TeamScopedViewSet):
    required_scopes: ClassVar[dict[str, str]] = {"list": "admin"}
    pagination_class = AuditPagination

    def list(self, request: Request, team: str) -> Response:
        events = selectors.list_audit_events(team=self.get_team())
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(events, request, view=self)
        # drf-stubs type many=True's instance as one entry (typeddjango/djangorestframework-stubs#827).
        rendered = AuditEventOutputSerializer(page, many=True).data  # type: ignore[arg-type]
        return paginator.get_paginated_response(rendered)
