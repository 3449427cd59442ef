"""The anchors API: the team's anchored entries (what `memoryhub verify` checks), a
client's file-anchor report, and an entry's recorded checks. Thin: parse, call one
service or selector, render."""

from __future__ import annotations

from typing import Any, ClassVar

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from core.api_errors import BODY_ERRORS, TEAM_SCOPED_ERRORS, error_responses
from core.built_fields import FieldsBuiltOnce
from core.errors import NotFound
from core.pagination import KeysetPagination
from freshness import anchor_checks, selectors
from freshness.models import AnchorCheck
from memories.anchors import ANCHOR_TYPES
from memories.models import Memory
from teams.authentication import agent_actor
from teams.viewsets import TEAM_PATH_PARAMETER, TeamScopedViewSet

MAX_REPORT_RESULTS = 500
MAX_KEY_CHARS = 200
MAX_REASON_CHARS = 200
ERRORS = error_responses(*TEAM_SCOPED_ERRORS)


class _NoUnknownFields(serializers.Serializer):  # type: ignore[type-arg]
    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(str(name)[:50] for name in set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError(
                    {name: ["unknown field"] for name in unknown}, code="unknown_field"
                )
        return super().to_internal_value(data)


class _CleanText(serializers.CharField):
    """A string (never a number coerced to one) without NUL bytes."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            raise serializers.ValidationError("must be a string", code="invalid")
        if "\x00" in data:
            raise serializers.ValidationError("must not contain NUL bytes", code="invalid")
        return str(super().to_internal_value(data))


class AnchorListQuerySerializer(serializers.Serializer):  # type: ignore[type-arg]
    type = serializers.ChoiceField(
        choices=list(ANCHOR_TYPES), required=False, help_text="Only anchors of this type (e.g. file)."
    )


class AnchorValueSerializer(serializers.Serializer):  # type: ignore[type-arg]
    type = serializers.CharField()
    value = serializers.CharField()
    expect = serializers.JSONField(required=False, help_text="A status (int) or a substring.")


class AnchoredEntrySerializer(FieldsBuiltOnce, serializers.ModelSerializer):  # type: ignore[type-arg]
    anchor = AnchorValueSerializer(read_only=True)
    anchor_broken = serializers.SerializerMethodField()

    class Meta:
        model = Memory
        fields = ["id", "key", "anchor", "anchor_broken"]
        read_only_fields = fields

    def get_anchor_broken(self, memory: Memory) -> bool:
        return memory.anchor_broken_at is not None


class FileReportItemSerializer(_NoUnknownFields):
    key = _CleanText(max_length=MAX_KEY_CHARS, help_text="The entry's key, as `GET anchors/` gave it.")
    exists = serializers.BooleanField(help_text="Whether the anchor's path exists in the worktree.")
    reason = _CleanText(
        max_length=MAX_REASON_CHARS,
        required=False,
        allow_blank=True,
        help_text="Why it does not, in a few words (e.g. `outside the worktree`).",
    )

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict) and not isinstance(data.get("exists", False), bool):
            raise serializers.ValidationError({"exists": ["must be true or false"]}, code="invalid")
        return super().to_internal_value(data)


class FileReportInputSerializer(_NoUnknownFields):
    results = FileReportItemSerializer(many=True, allow_empty=True)

    def to_internal_value(self, data: Any) -> Any:
        # Refused before any item is looked at.
        results = data.get("results") if isinstance(data, dict) else None
        if isinstance(results, list) and len(results) > MAX_REPORT_RESULTS:
            raise serializers.ValidationError(
                {"results": [f"at most {MAX_REPORT_RESULTS} results a report"]}, code="invalid"
            )
        return super().to_internal_value(data)

    def validate_results(self, results: list[dict[str, Any]]) -> list[dict[str, Any]]:
        keys = [item["key"] for item in results]
        if len(set(keys)) != len(keys):
            raise serializers.ValidationError("each key at most once", code="invalid")
        return results


class FileReportOutputSerializer(serializers.Serializer):  # type: ignore[type-arg]
    recorded = serializers.IntegerField(help_text="Checks recorded (keys of file-anchored entries).")
    flagged = serializers.IntegerField(help_text="Entries newly flagged anchor_broken.")
    unflagged = serializers.IntegerField(help_text="Entries whose flag was lowered.")
    ignored = serializers.ListField(
        child=serializers.CharField(), help_text="Keys without an active entry with a file anchor."
    )


class AnchorCheckSerializer(FieldsBuiltOnce, serializers.ModelSerializer):  # type: ignore[type-arg]
    class Meta:
        model = AnchorCheck
        fields = ["checked_at", "source", "ok", "status", "detail", "duration_ms", "reported_by"]
        read_only_fields = fields


class AnchorChecksQuerySerializer(_NoUnknownFields):
    key = _CleanText(max_length=MAX_KEY_CHARS, help_text="The entry's key.")


class AnchorChecksOutputSerializer(serializers.Serializer):  # type: ignore[type-arg]
    key = serializers.CharField()
    id = serializers.UUIDField(help_text="The active version the checks concern.")
    anchor = AnchorValueSerializer(allow_null=True)
    anchor_broken = serializers.BooleanField()
    checks = AnchorCheckSerializer(many=True, help_text="Newest first; the newest few are kept.")


class AnchorPagination(KeysetPagination):
    ordering = ("key", "id")


@extend_schema_view(
    list=extend_schema(
        summary="List anchored entries",
        description="The team's active entries with an anchor, by key, a page at a time; `type=file` "
        "gives what `memoryhub verify` checks in a worktree.",
        parameters=[TEAM_PATH_PARAMETER, AnchorListQuerySerializer],
        responses={200: AnchoredEntrySerializer(many=True), **ERRORS},
    ),
    report=extend_schema(
        summary="Report file anchors",
        description=f"A client's word on file anchors (at most {MAX_REPORT_RESULTS} keys): whether each "
        "path exists in its worktree. Each key of an active file-anchored entry gets a check; failed "
        "checks in a row flag the entry `anchor_broken` and open a nudge, an ok one lowers the flag. "
        "Other keys are answered in `ignored`.",
        parameters=[TEAM_PATH_PARAMETER],
        request=FileReportInputSerializer,
        responses={200: FileReportOutputSerializer, **ERRORS, **error_responses(*BODY_ERRORS)},
    ),
    checks=extend_schema(
        summary="An entry's anchor checks",
        description="The recorded checks of the active entry of `key`'s anchor, newest first: the "
        "server's for url and api anchors, clients' reports for file anchors.",
        parameters=[TEAM_PATH_PARAMETER, AnchorChecksQuerySerializer],
        responses={200: AnchorChecksOutputSerializer, **ERRORS},
    ),
)
class AnchorViewSet(TeamScopedViewSet):
    pagination_class = AnchorPagination
    required_scopes: ClassVar[dict[str, str]] = {"list": "read", "checks": "read", "report": "write"}

    def list(self, request: Request, team: str) -> Response:
        query = AnchorListQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        rows = selectors.list_anchored_entries(
            team=self.get_team(), anchor_type=query.validated_data.get("type")
        )
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(rows, request, view=self)
        return paginator.get_paginated_response(AnchoredEntrySerializer(page, many=True).data)

    @action(detail=False, methods=["post"])
    def report(self, request: Request, team: str) -> Response:
        payload = FileReportInputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        reports = [
            anchor_checks.FileReport(key=item["key"], exists=item["exists"], reason=item.get("reason", ""))
            for item in payload.validated_data["results"]
        ]
        recorded = anchor_checks.report_file_anchors(
            team=self.get_team(), reports=reports, reported_by=agent_actor(request)
        )
        return Response(
            FileReportOutputSerializer(
                {
                    "recorded": recorded.recorded,
                    "flagged": recorded.flagged,
                    "unflagged": recorded.unflagged,
                    "ignored": recorded.ignored,
                }
            ).data
        )

    @action(detail=False, methods=["get"])
    def checks(self, request: Request, team: str) -> Response:
        query = AnchorChecksQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        found = selectors.anchor_checks_of(team=self.get_team(), key=query.validated_data["key"])
        if found is None:
            raise NotFound("no active entry with this key")
        memory, checks = found
        return Response(
            AnchorChecksOutputSerializer(
                {
                    "key": memory.key,
                    "id": memory.id,
                    "anchor": memory.anchor,
                    "anchor_broken": memory.anchor_broken_at is not None,
                    "checks": checks,
                }
            ).data
        )
