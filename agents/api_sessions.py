"""The agent session registry API: boot, list, get, update and end sessions.

A client boots once (POST), keeps the returned id and sends it back as
`X-MemoryHub-Session` on every request: that is the heartbeat (see
TeamScopedViewSet.check_permissions), and it also names the session in `updated_by`.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
    extend_schema_view,
)
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from agents import sessions
from agents.models import AgentSession
from core.api_errors import BODY_ERRORS, TEAM_SCOPED_ERRORS, error_responses
from core.built_fields import FieldsBuiltOnce, representation
from core.pagination import KeysetPagination
from teams.authentication import SESSION_ID
from teams.models import AgentToken, Team
from teams.serializers import StrictCharField, StrictInputSerializer, StrictIntegerField
from teams.viewsets import TEAM_PATH_PARAMETER, TeamScopedViewSet

logger = logging.getLogger(__name__)

MAX_PID = 2**31 - 1  # the column is a PostgreSQL integer
SESSION_STATUSES = ["live", "stale", "ended"]

ID_PATH_PARAMETER = OpenApiParameter(
    "id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="The session's id, as the boot returned it."
)
SESSION_HEADER_PARAMETER = OpenApiParameter(
    sessions.SESSION_HEADER,
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    required=False,
    pattern=SESSION_ID.pattern,
    description="The id of the caller's own session: any request carrying it is that session's "
    "heartbeat (ignored unless it names a session of this team that has not ended).",
)
ERRORS = error_responses(*TEAM_SCOPED_ERRORS)


class AgentSessionBootInputSerializer(StrictInputSerializer):
    """Everything is optional; what is sent must have the right type. Unknown fields
    are rejected."""

    # The API's field is named `source`. DRF's metaclass moves declared fields off the class, so
    # it never shadows Field.source at run time; the stubs cannot model that.
    source = StrictCharField(  # type: ignore[assignment]
        required=False, allow_blank=True, max_length=64, help_text="The client, e.g. `claude-code`."
    )
    project = StrictCharField(
        required=False,
        allow_blank=True,
        max_length=200,
        help_text="The project worked on (as memories name it).",
    )
    cwd = StrictCharField(
        required=False,
        allow_blank=True,
        max_length=1024,
        trim_whitespace=False,
        help_text="The working directory.",
    )
    pid = StrictIntegerField(
        required=False, allow_null=True, min_value=0, max_value=MAX_PID, help_text="The agent's process id."
    )
    host = StrictCharField(required=False, allow_blank=True, max_length=255, help_text="The machine.")
    current_task = StrictCharField(
        required=False, allow_blank=True, max_length=1000, help_text="What the agent is doing."
    )


class AgentSessionUpdateInputSerializer(StrictInputSerializer):
    """What may change during a session. An empty body is an explicit heartbeat."""

    current_task = StrictCharField(
        required=False, allow_blank=True, max_length=1000, help_text="What the agent is doing now."
    )
    project = StrictCharField(
        required=False, allow_blank=True, max_length=200, help_text="The project worked on now."
    )


class AgentSessionListQuerySerializer(serializers.Serializer):
    project = serializers.CharField(
        required=False, allow_blank=True, max_length=200, help_text="Only sessions of this project."
    )


class AgentSessionOutputSerializer(FieldsBuiltOnce, serializers.ModelSerializer):
    status = serializers.SerializerMethodField(method_name="render_status")
    end_reason = serializers.ChoiceField(choices=["", *AgentSession.EndReason.values], read_only=True)

    class Meta:
        model = AgentSession
        fields = [
            "id",
            "agent",
            "source",
            "project",
            "cwd",
            "pid",
            "host",
            "current_task",
            "status",
            "started_at",
            "last_heartbeat_at",
            "ended_at",
            "end_reason",
        ]
        read_only_fields = fields

    @extend_schema_field(
        serializers.ChoiceField(
            choices=SESSION_STATUSES,
            help_text="live; stale (no heartbeat within the TTL, not yet ended by a boot); ended.",
        )
    )
    def render_status(self, session: AgentSession) -> str:
        return sessions.session_status(session)


class AgentSessionBootOutputSerializer(serializers.Serializer):
    session = AgentSessionOutputSerializer()
    other_sessions = AgentSessionOutputSerializer(
        many=True,
        help_text=f"The other live sessions of the same project, most recently active first "
        f"(at most {sessions.MAX_OTHER_SESSIONS}).",
    )
    expired_sessions = serializers.IntegerField(
        help_text="How many of the team's sessions this boot ended for missing the TTL."
    )
    injection = serializers.CharField(
        allow_null=True,
        help_text="The memory block (markdown) to put at the top of the agent's prompt: the project's "
        "and team-wide entries, as GET injection/?project= renders it. Null if it could not be built.",
    )


class AgentSessionPagination(KeysetPagination):
    ordering = ("-started_at", "-id")


@extend_schema_view(
    list=extend_schema(
        summary="List live sessions",
        description="Sessions that have not ended and sent a heartbeat within the TTL, newest first.",
        parameters=[TEAM_PATH_PARAMETER, AgentSessionListQuerySerializer, SESSION_HEADER_PARAMETER],
        responses={200: AgentSessionOutputSerializer(many=True), **ERRORS},
    ),
    create=extend_schema(
        summary="Boot a session",
        description="Ends the team's sessions that missed the TTL, registers this one and answers "
        "with its id, the other live sessions of the same project and the prompt injection block.",
        parameters=[TEAM_PATH_PARAMETER],
        request=AgentSessionBootInputSerializer,
        responses={201: AgentSessionBootOutputSerializer, **ERRORS, **error_responses(*BODY_ERRORS)},
    ),
    retrieve=extend_schema(
        summary="Get a session",
        description="Any session of the team, live, stale or ended.",
        parameters=[TEAM_PATH_PARAMETER, ID_PATH_PARAMETER, SESSION_HEADER_PARAMETER],
        responses={200: AgentSessionOutputSerializer, **ERRORS},
    ),
    partial_update=extend_schema(
        summary="Update a session",
        description="Change the current task or project; also a heartbeat. An ended session "
        "answers 409: boot a new one.",
        parameters=[TEAM_PATH_PARAMETER, ID_PATH_PARAMETER, SESSION_HEADER_PARAMETER],
        request=AgentSessionUpdateInputSerializer,
        responses={
            200: AgentSessionOutputSerializer,
            **ERRORS,
            **error_responses(409),
            **error_responses(*BODY_ERRORS),
        },
    ),
    destroy=extend_schema(
        summary="End a session",
        description="Ending a session that already ended changes nothing.",
        parameters=[TEAM_PATH_PARAMETER, ID_PATH_PARAMETER, SESSION_HEADER_PARAMETER],
        responses={204: OpenApiResponse(description="Ended."), **ERRORS},
    ),
)
class AgentSessionViewSet(TeamScopedViewSet):
    lookup_field = "id"
    lookup_value_regex = "[^/]+"
    pagination_class = AgentSessionPagination

    def list(self, request: Request, team: str) -> Response:
        query = AgentSessionListQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        rows = sessions.list_live_sessions(team=self.get_team(), project=query.validated_data.get("project"))
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(rows, request, view=self)
        return paginator.get_paginated_response(AgentSessionOutputSerializer(page, many=True).data)

    def create(self, request: Request, team: str) -> Response:
        payload = AgentSessionBootInputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        body = boot_payload(team=self.get_team(), token=self.get_token(), arguments=payload.validated_data)
        return Response(body, status=status.HTTP_201_CREATED)

    def retrieve(self, request: Request, team: str, id: str) -> Response:
        session = sessions.get_session(team=self.get_team(), session_id=sessions.parse_session_id(id))
        return Response(session_payload(session))

    def partial_update(self, request: Request, team: str, id: str) -> Response:
        session_id = sessions.parse_session_id(id)
        payload = AgentSessionUpdateInputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        session = sessions.update_session(
            team=self.get_team(), session_id=session_id, **payload.validated_data
        )
        return Response(session_payload(session))

    def destroy(self, request: Request, team: str, id: str) -> Response:
        sessions.end_session(team=self.get_team(), session_id=sessions.parse_session_id(id))
        return Response(status=status.HTTP_204_NO_CONTENT)


def session_payload(session: AgentSession) -> dict[str, Any]:
    """One session, as every door shows it."""
    return representation(AgentSessionOutputSerializer, session)


def boot_payload(*, team: Team, token: AgentToken, arguments: dict[str, Any]) -> dict[str, Any]:
    """Boot a session for the token (the boot's fields, validated) and the answer every
    door gives: the session, the other live ones of its project, and its injection block."""
    booted = sessions.boot_session(team=team, token=token, agent=token.name, **arguments)
    body = {
        "session": booted.session,
        "other_sessions": booted.others,
        "expired_sessions": booted.expired,
        "injection": _injection(team, booted.session),
    }
    return representation(AgentSessionBootOutputSerializer, body)


def _injection(team: Team, session: AgentSession) -> str | None:
    """The session's prompt injection block (markdown), for its project: entries of
    that project and team-wide ones. Reads fail open: if building it fails, the boot
    still succeeds, with null, and the failure is logged."""
    # Imported here: memories depends on teams, not the other way round; this is the
    # one place the session registry reads memories.
    from agents.injection import build_injection

    try:
        with transaction.atomic():  # a savepoint: a failed read leaves the boot intact
            return build_injection(
                team=team, project=session.project, live=True, reader_session=session.id
            ).text
    except Exception:
        logger.exception("team %s: injection block for a session boot failed", team.slug)
        return None
