"""The daily log API: one GET of a team's day (agents.daily_log)."""

from __future__ import annotations

from typing import Any, ClassVar

from drf_spectacular.utils import extend_schema, extend_schema_field, extend_schema_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from agents.api_injection import single_query_values
from agents.api_sessions import AgentSessionOutputSerializer
from agents.daily_log import LOG_KINDS, MAX_EVENTS, DailyLog, daily_log, parse_day
from core.api_errors import TEAM_SCOPED_ERRORS, error_responses
from teams.serializers import StrictInputSerializer
from teams.viewsets import TEAM_PATH_PARAMETER, TeamScopedViewSet


class DailyLogQuerySerializer(StrictInputSerializer):
    date = serializers.CharField(required=False, help_text="The day, YYYY-MM-DD (UTC); default today.")
    kind = serializers.ChoiceField(
        choices=list(LOG_KINDS), required=False, help_text="Only events of this kind."
    )


class DailyLogCountsSerializer(serializers.Serializer):
    saved = serializers.IntegerField(help_text="New keys.")
    superseded = serializers.IntegerField(help_text="New versions that replaced the active one.")
    confirmed = serializers.IntegerField(help_text="Versions confirmed as still true.")
    captured = serializers.IntegerField(help_text="Drafts proposed from sessions, for review.")


class DailyLogEventSerializer(serializers.Serializer):
    at = serializers.DateTimeField()
    kind = serializers.ChoiceField(choices=list(LOG_KINDS))
    key = serializers.CharField()
    type = serializers.CharField()
    by = serializers.CharField(
        help_text="As stored: the token's name, user:<name> from the dashboard, and the client's "
        "X-MemoryHub-Session after a slash."
    )
    session = serializers.UUIDField(
        allow_null=True, help_text="The agent session, when `by` names one of this team."
    )
    detail = serializers.CharField(
        allow_blank=True, help_text="A supersede's reason, a confirmation's note, a draft's state."
    )


class DailyLogSessionSerializer(AgentSessionOutputSerializer):
    events = serializers.SerializerMethodField()

    class Meta(AgentSessionOutputSerializer.Meta):
        fields = [*AgentSessionOutputSerializer.Meta.fields, "events"]

    def get_events(self, session: Any) -> int:
        counted: dict[Any, int] = self.context["session_events"]
        return counted.get(session.id, 0)


@extend_schema_serializer(many=False)
class DailyLogSerializer(serializers.Serializer):
    date = serializers.DateField(source="day")
    counts = DailyLogCountsSerializer()
    sessions = serializers.SerializerMethodField(
        help_text="The agent sessions the events name, with how many."
    )
    events = DailyLogEventSerializer(many=True, help_text=f"Oldest first; at most {MAX_EVENTS}.")
    truncated = serializers.BooleanField(
        help_text=f"More than {MAX_EVENTS} events: ask one `kind` at a time."
    )

    @extend_schema_field(DailyLogSessionSerializer(many=True))
    def get_sessions(self, log: DailyLog) -> list[Any]:
        context = {"session_events": log.session_events}
        return list(DailyLogSessionSerializer(log.sessions, many=True, context=context).data)


class DailyLogViewSet(TeamScopedViewSet):
    required_scopes: ClassVar[dict[str, str]] = {"list": "read"}
    replica_actions: ClassVar[frozenset[str]] = frozenset({"list"})

    @extend_schema(
        summary="The team's day",
        description="What was saved, superseded, confirmed and captured (drafts) on one day (UTC), "
        "and by which sessions. Counts are exact; events are the day's first "
        f"{MAX_EVENTS}, oldest first.",
        parameters=[TEAM_PATH_PARAMETER, DailyLogQuerySerializer],
        responses={200: DailyLogSerializer, **error_responses(*TEAM_SCOPED_ERRORS)},
    )
    def list(self, request: Request, team: str) -> Response:
        params = DailyLogQuerySerializer(data=single_query_values(request))
        params.is_valid(raise_exception=True)
        day = params.validated_data.get("date")
        log = daily_log(
            team=self.get_team(),
            day=parse_day(day) if day is not None else None,
            kind=params.validated_data.get("kind"),
        )
        return Response(DailyLogSerializer(log).data)
