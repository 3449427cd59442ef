"""The drafts API: extract drafts from a transcript, list them, and review one (accept,
reject, merge). Thin: parse, call one service or read of freshness.drafts, render."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
    extend_schema_view,
)
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from core.api_errors import BODY_ERRORS, TEAM_SCOPED_ERRORS, ErrorSerializer, error_responses
from core.built_fields import FieldsBuiltOnce
from core.pagination import KeysetPagination
from freshness import drafts
from freshness.api import NudgeOutputSerializer, _version_path
from freshness.models import Draft, DraftConflict, DraftKind, DraftState
from memories.conversations.models import ConversationSource
from memories.facts.models import MAX_FACT_VALUE_CHARS
from memories.facts.serializers import FactOutputSerializer, fact_payload
from memories.inputs import TYPE_HELP, key_field
from memories.models import MAX_CONTENT_BYTES
from teams.authentication import agent_actor
from teams.models import Team
from teams.serializers import StrictBooleanField, StrictCharField, StrictInputSerializer, StrictRegexField
from teams.validators import KEY_PATTERN
from teams.viewsets import TEAM_PATH_PARAMETER, TeamScopedViewSet

ID_PATH_PARAMETER = OpenApiParameter(
    "id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="The draft's id, as the list gives it."
)
ERRORS = error_responses(*TEAM_SCOPED_ERRORS)
REVIEW_ERRORS = {**ERRORS, **error_responses(409), **error_responses(*BODY_ERRORS)}
EXTRACTOR_ERRORS = {
    502: OpenApiResponse(
        ErrorSerializer, description="The configured extractor answered something unusable."
    ),
    503: OpenApiResponse(ErrorSerializer, description="The configured extractor could not be reached."),
}


class DraftListQuerySerializer(serializers.Serializer):  # type: ignore[type-arg]
    state = serializers.ChoiceField(
        choices=drafts.STATE_FILTER_CHOICES,
        default=DraftState.PENDING,
        help_text="Pending ones by default; `all` for every state.",
    )


class DraftExtractInputSerializer(StrictInputSerializer):
    transcript = StrictCharField(
        max_length=settings.MAX_REQUEST_BODY_BYTES,
        trim_whitespace=False,
        help_text="The transcript or notes (credentials, secrets, PII and code are removed first).",
    )
    source_session = StrictCharField(
        required=False,
        allow_blank=True,
        max_length=drafts.MAX_SOURCE_SESSION_CHARS,
        help_text="Where it came from: the session's id or a label.",
    )
    captured = StrictBooleanField(
        default=False,
        help_text="The text is what a capture hook captured (`Learning: …` paragraphs). With the team's "
        "`capture_to_memory` on, a learning that would have been a draft with no conflict is saved as a "
        "lesson entry instead, and one saved before is confirmed.",
    )
    keep_conversation = StrictBooleanField(
        required=False,
        help_text="Also keep the transcript as a conversation of the team (scrubbed, for the team's "
        "retention; searchable): the drafts then name it and the lines they came from. Default true, "
        "but false for `captured` learnings, which are no transcript.",
    )
    source = serializers.ChoiceField(  # type: ignore[assignment]
        choices=ConversationSource.choices,
        default=ConversationSource.API,
        help_text="What sent it, recorded on the conversation: `hook`, `sdk` or `api`.",
    )


INTO_KEY_HELP = "The key of the active entry to merge into."
DRAFT_CONTENT_HELP = (
    "accept: the edited text; merge: the merged text (default: the entry's, then the draft's)."
)


class DraftAcceptInputSerializer(StrictInputSerializer):
    type = StrictCharField(required=False, max_length=32, help_text=f"Store it as this type: {TYPE_HELP}.")
    key = key_field("Store it under this key.", required=False)
    content = StrictCharField(
        required=False, max_length=MAX_CONTENT_BYTES, trim_whitespace=False, help_text=DRAFT_CONTENT_HELP
    )
    value = StrictCharField(
        required=False,
        max_length=MAX_FACT_VALUE_CHARS,
        trim_whitespace=False,
        help_text="A fact draft's edited value (a memory draft refuses it).",
    )


class DraftMergeInputSerializer(StrictInputSerializer):
    into_key = StrictRegexField(
        KEY_PATTERN, max_length=200, help_text="The key of the active entry to merge into."
    )
    content = StrictCharField(
        required=False, max_length=MAX_CONTENT_BYTES, trim_whitespace=False, help_text=DRAFT_CONTENT_HELP
    )


class DraftEntrySerializer(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.UUIDField()
    key = serializers.CharField()
    is_active = serializers.BooleanField()
    url = serializers.CharField(help_text="This version in the API (GET).")


class DraftFactEntrySerializer(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.UUIDField()
    entity = serializers.CharField()
    key = serializers.CharField()
    is_active = serializers.BooleanField()


class DraftConversationSerializer(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.UUIDField(help_text="The conversation the transcript was kept as (it may have expired).")
    first_line = serializers.IntegerField(
        allow_null=True, help_text="The first line holding the draft's excerpt (null: not found)."
    )
    last_line = serializers.IntegerField(allow_null=True, help_text="The last line holding it.")


class DraftOutputSerializer(FieldsBuiltOnce, serializers.ModelSerializer):  # type: ignore[type-arg]
    state = serializers.ChoiceField(choices=DraftState.choices, read_only=True)
    kind = serializers.ChoiceField(
        choices=DraftKind.choices,
        read_only=True,
        help_text="memory: type, key and content; fact: entity, fact_key and value (type is `fact`, key "
        "`entity/key`).",
    )
    conflict = serializers.ChoiceField(
        choices=DraftConflict.choices,
        read_only=True,
        help_text="duplicate: an active entry holds this already; contradiction: one disagrees with it.",
    )
    source_span = serializers.SerializerMethodField()
    source_conversation = serializers.SerializerMethodField()
    conflict_entry = serializers.SerializerMethodField()
    memory_entry = serializers.SerializerMethodField()
    fact_entry = serializers.SerializerMethodField()

    class Meta:
        model = Draft
        fields = [
            "id",
            "state",
            "kind",
            "type",
            "key",
            "content",
            "entity",
            "fact_key",
            "value",
            "why",
            "source_span",
            "source_excerpt",
            "source_session",
            "source_conversation",
            "extractor",
            "created_by",
            "created_at",
            "conflict",
            "conflict_entry",
            "reviewed_at",
            "reviewed_by",
            "memory_entry",
            "fact_entry",
            "corroborated",
            "last_corroborated_at",
        ]
        read_only_fields = fields
        extra_kwargs = {
            "corroborated": {
                "help_text": "How many times another session's extraction found this learning again "
                "while it was pending."
            },
            "last_corroborated_at": {"help_text": "When it was last found again (null: never)."},
            "entity": {"help_text": "A fact draft's entity (empty for a memory draft)."},
            "fact_key": {"help_text": "A fact draft's key within its entity (empty for a memory draft)."},
            "value": {"help_text": "A fact draft's value (empty for a memory draft)."},
        }

    @extend_schema_field(
        serializers.ListField(
            child=serializers.IntegerField(), help_text="[start, end) in the scrubbed, code-free transcript."
        )
    )
    def get_source_span(self, draft: Draft) -> list[int]:
        return [draft.source_start, draft.source_end]

    @extend_schema_field(DraftConversationSerializer(allow_null=True))
    def get_source_conversation(self, draft: Draft) -> dict[str, Any] | None:
        if draft.source_conversation is None:
            return None
        return {
            "id": draft.source_conversation,
            "first_line": draft.source_first_line,
            "last_line": draft.source_last_line,
        }

    @extend_schema_field(DraftEntrySerializer(allow_null=True))
    def get_conflict_entry(self, draft: Draft) -> dict[str, Any] | None:
        return self._entry(draft.conflict_memory)

    @extend_schema_field(DraftEntrySerializer(allow_null=True, help_text="The version it became."))
    def get_memory_entry(self, draft: Draft) -> dict[str, Any] | None:
        return self._entry(draft.memory)

    @extend_schema_field(DraftFactEntrySerializer(allow_null=True, help_text="The fact version it became."))
    def get_fact_entry(self, draft: Draft) -> dict[str, Any] | None:
        fact = draft.fact
        if fact is None:
            return None
        return {"id": fact.id, "entity": fact.entity, "key": fact.key, "is_active": fact.is_active}

    def _entry(self, memory: Any) -> dict[str, Any] | None:
        return None if memory is None else _entry_link(self.context.get("team_slug", ""), memory)


class DraftExtractOutputSerializer(serializers.Serializer):  # type: ignore[type-arg]
    drafts = DraftOutputSerializer(
        many=True, help_text="The drafts made; a learning already pending for the team is not drafted again."
    )
    corroborated = DraftOutputSerializer(
        many=True,
        help_text="Pending drafts this extraction found again (their count went up); not the ones this "
        "same session sent before.",
    )
    memories = DraftEntrySerializer(
        many=True,
        help_text="A capture with the team's `capture_to_memory` on: the lesson entries saved instead of "
        "drafts.",
    )
    confirmed = DraftEntrySerializer(
        many=True,
        help_text="A capture with the team's `capture_to_memory` on: entries saved from the same learning "
        "before, confirmed by this capture (one confirmer per session).",
    )
    confirmed_facts = FactOutputSerializer(
        many=True, help_text="Active facts the transcript stated again with the same value (no draft)."
    )
    fact_nudges = NudgeOutputSerializer(
        many=True,
        help_text="Fact contradictions opened: the transcript stated another value for an active fact.",
    )
    conversation = serializers.UUIDField(
        allow_null=True,
        help_text="The conversation the transcript was kept as (null: not kept, or the team's quota of "
        "conversations was reached).",
    )


class DraftPagination(KeysetPagination):
    ordering = ("-created_at", "-id")


@extend_schema_view(
    list=extend_schema(
        summary="List drafts",
        description="Memories an extractor proposed, newest first, a page at a time; pending ones "
        "unless `state` says otherwise.",
        parameters=[TEAM_PATH_PARAMETER, DraftListQuerySerializer],
        responses={200: DraftOutputSerializer(many=True), **ERRORS},
    ),
    retrieve=extend_schema(
        summary="Get a draft",
        parameters=[TEAM_PATH_PARAMETER, ID_PATH_PARAMETER],
        responses={200: DraftOutputSerializer, **ERRORS},
    ),
    extract=extend_schema(
        summary="Extract drafts from a transcript",
        description="At most 15 candidate memories and 15 proposed facts from a session transcript or "
        "notes, each a pending draft flagged with its conflict (duplicate, contradiction). A candidate "
        "already pending is not drafted again. A proposed fact the team holds with the same value is "
        "listed in `confirmed_facts`; with another value, it opens a fact contradiction nudge "
        "(`fact_nudges`) instead of a draft.",
        parameters=[TEAM_PATH_PARAMETER],
        request=DraftExtractInputSerializer,
        responses={
            201: DraftExtractOutputSerializer,
            **ERRORS,
            **error_responses(*BODY_ERRORS),
            **EXTRACTOR_ERRORS,
        },
    ),
    accept=extend_schema(
        summary="Accept a draft",
        description="Store it as a new entry (optionally edited) with its provenance under the "
        "metadata's `draft`. 409 `draft_key_exists` when the key has an active entry (merge instead), "
        "`draft_duplicate` when another entry holds the text, `draft_not_pending` once reviewed. A fact "
        "draft is set as its fact (`value` edits it), the draft its provenance (`source_draft`); 409 "
        "`draft_fact_exists` when the fact has another active value since.",
        parameters=[TEAM_PATH_PARAMETER, ID_PATH_PARAMETER],
        request=DraftAcceptInputSerializer,
        responses={200: DraftOutputSerializer, **REVIEW_ERRORS},
    ),
    reject=extend_schema(
        summary="Reject a draft",
        parameters=[TEAM_PATH_PARAMETER, ID_PATH_PARAMETER],
        request=None,
        responses={200: DraftOutputSerializer, **REVIEW_ERRORS},
    ),
    merge=extend_schema(
        summary="Merge a draft into an entry",
        description="Supersede the active entry of `into_key` with the merged text, the reason naming "
        "the draft.",
        parameters=[TEAM_PATH_PARAMETER, ID_PATH_PARAMETER],
        request=DraftMergeInputSerializer,
        responses={200: DraftOutputSerializer, **REVIEW_ERRORS},
    ),
)
class DraftViewSet(TeamScopedViewSet):
    lookup_field = "id"
    lookup_value_regex = "[^/]+"
    pagination_class = DraftPagination

    def _render(self, draft: Draft) -> dict[str, Any]:
        return dict(DraftOutputSerializer(draft, context={"team_slug": self.get_team().slug}).data)

    def list(self, request: Request, team: str) -> Response:
        query = DraftListQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        rows = drafts.list_drafts(team=self.get_team(), state=query.validated_data["state"])
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(rows, request, view=self)
        rendered = DraftOutputSerializer(page, many=True, context={"team_slug": self.get_team().slug}).data
        return paginator.get_paginated_response(rendered)

    def retrieve(self, request: Request, team: str, id: str) -> Response:
        return Response(self._render(drafts.get_draft(team=self.get_team(), draft_id=id)))

    @action(detail=False, methods=["post"])
    def extract(self, request: Request, team: str) -> Response:
        payload = DraftExtractInputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        body = extraction_payload(
            team=self.get_team(), arguments=payload.validated_data, actor=agent_actor(request)
        )
        return Response(body, status=status.HTTP_201_CREATED)

    @action(detail=True, methods=["post"])
    def accept(self, request: Request, team: str, id: str) -> Response:
        payload = DraftAcceptInputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        draft = drafts.accept_draft(
            team=self.get_team(),
            draft_id=id,
            actor=agent_actor(request),
            type=data.get("type"),
            key=data.get("key"),
            content=data.get("content"),
            value=data.get("value"),
        )
        return Response(self._render(draft))

    @action(detail=True, methods=["post"])
    def reject(self, request: Request, team: str, id: str) -> Response:
        draft = drafts.reject_draft(team=self.get_team(), draft_id=id, actor=agent_actor(request))
        return Response(self._render(draft))

    @action(detail=True, methods=["post"])
    def merge(self, request: Request, team: str, id: str) -> Response:
        payload = DraftMergeInputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        draft = drafts.merge_draft(
            team=self.get_team(),
            draft_id=id,
            actor=agent_actor(request),
            into_key=payload.validated_data["into_key"],
            content=payload.validated_data.get("content"),
        )
        return Response(self._render(draft))


def extraction_payload(*, team: Team, arguments: dict[str, Any], actor: str) -> dict[str, Any]:
    """Extract drafts from a transcript (DraftExtractInputSerializer's fields, validated)
    and the answer every door gives: the drafts made and the pending ones found again."""
    made = drafts.extract(
        team=team,
        transcript=arguments["transcript"],
        actor=actor,
        source_session=arguments.get("source_session", ""),
        captured=arguments.get("captured", False),
        keep_conversation=arguments.get("keep_conversation", not arguments.get("captured", False)),
        conversation_source=arguments.get("source", ConversationSource.API),
    )
    context = {"team_slug": team.slug}
    # Extracting takes the write scope, which may see `high` facts.
    nudge_context = {"team_slug": team.slug, "may_see_high": True}
    return {
        "drafts": DraftOutputSerializer(made.drafts, many=True, context=context).data,
        "corroborated": DraftOutputSerializer(made.corroborated, many=True, context=context).data,
        "memories": [_entry_link(team.slug, memory) for memory in made.saved],
        "confirmed": [_entry_link(team.slug, memory) for memory in made.confirmed],
        "confirmed_facts": [fact_payload(fact) for fact in made.confirmed_facts],
        "fact_nudges": NudgeOutputSerializer(made.fact_nudges, many=True, context=nudge_context).data,
        "conversation": made.conversation.id if made.conversation is not None else None,
    }


def _entry_link(team_slug: str, memory: Any) -> dict[str, Any]:
    """An entry as a draft's answer links it: id, key, whether active, its API path."""
    return {
        "id": memory.id,
        "key": memory.key,
        "is_active": memory.is_active,
        "url": _version_path(team_slug, memory),
    }
