"""The memories API. Thin: parse, call one service or selector, render."""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import replace
from typing import Any, ClassVar

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import serializers as drf_serializers
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from core.api_errors import (
    BODY_ERRORS,
    TEAM_SCOPED_ERRORS,
    domain_error_body,
    error_responses,
    validation_error_body,
)
from core.errors import InvalidInput
from core.pagination import KeysetPagination
from memories import feedback, selectors, use_cases, writes
from memories.inputs import (
    AnnotationInputSerializer,
    ArchiveInputSerializer,
    ConfirmInputSerializer,
    MemoryBatchInputSerializer,
    MemoryCreateInputSerializer,
    MemoryListQuerySerializer,
    MemoryRetrieveQuerySerializer,
    RateInputSerializer,
    UnsupersedeInputSerializer,
)
from memories.serializers import (
    AnnotationCreatedOutputSerializer,
    AnnotationOutputSerializer,
    ConflictErrorSerializer,
    MemoryBatchOutputSerializer,
    MemoryDetailOutputSerializer,
    MemoryDuplicateOutputSerializer,
    MemoryHistoryOutputSerializer,
    MemoryOutputSerializer,
    MemoryReadOutputSerializer,
    MemorySavedOutputSerializer,
    NoPreviousVersionErrorSerializer,
    batch_result_payload,
    detail_payload,
    duplicate_payload,
    entry_payload,
    line_slice,
    memory_error_extra,
    saved_payload,
)
from teams.authentication import agent_actor
from teams.models import Team
from teams.validators import KEY_PATTERN, check_key
from teams.viewsets import TEAM_PATH_PARAMETER, TeamScopedViewSet

KEY_PATH_PARAMETER = OpenApiParameter(
    "key", str, OpenApiParameter.PATH, pattern=KEY_PATTERN, description="The memory's key."
)
VERSION_PATH_PARAMETER = OpenApiParameter(
    "version_id",
    OpenApiTypes.UUID,
    OpenApiParameter.PATH,
    description="The id of one version of the key (from history, search or `superseded_by`).",
)
CURSOR_HELP = "The `next` or `previous` link's cursor, as given."
IF_MATCH_HEADER = OpenApiParameter(
    "If-Match",
    str,
    OpenApiParameter.HEADER,
    required=False,
    description='The id of the active version the write was based on, as an ETag: `"<id>"` (the '
    "`ETag` of `GET memories/{key}/`). Same as `expected_version`.",
)
ERRORS = error_responses(*TEAM_SCOPED_ERRORS)
WRITE_ERRORS = error_responses(*TEAM_SCOPED_ERRORS, *BODY_ERRORS)


class MemoryPagination(KeysetPagination):
    ordering = ("-created_at", "-id")


class HistoryPagination(KeysetPagination):
    """Pages of versions; each version brings its events (and its deletion)."""

    ordering = ("-created_at", "-id")


class AnnotationPagination(KeysetPagination):
    ordering = ("-created_at", "-id")


@extend_schema_view(
    list=extend_schema(
        summary="List active memories",
        description="Active memories, newest first, a page at a time; with `include_archived`, the "
        "archived ones too. With `as_of`, the versions that were active at that time (superseded ones "
        "say what replaced them in `superseded_by`).",
        parameters=[TEAM_PATH_PARAMETER, MemoryListQuerySerializer],
        responses={200: MemoryOutputSerializer(many=True), **ERRORS},
    ),
    create=extend_schema(
        summary="Save a memory",
        description="Insert a new key, or supersede the active entry when `supersede_reason` is given. "
        "A new key whose text an active entry of the team already holds (the same text, or a cosine "
        "similarity of at least the team's `dedup_threshold`, 0.92 by default) is a duplicate: a longer "
        "text supersedes that entry (201, `replaced_duplicate`); otherwise nothing is written (200, "
        "`duplicate_of`). `allow_duplicate: true` skips the check. `skill_trigger` makes the entry a skill.",
        parameters=[TEAM_PATH_PARAMETER, IF_MATCH_HEADER],
        request=MemoryCreateInputSerializer,
        responses={
            201: OpenApiResponse(
                MemorySavedOutputSerializer,
                description="Saved: a new key, a new version of the key, or a longer duplicate that "
                "superseded another key's entry (`replaced_duplicate`).",
            ),
            200: OpenApiResponse(
                MemoryDuplicateOutputSerializer,
                description="Not saved: an active entry already holds this text and the new text is not "
                "longer. `duplicate_of` is that entry.",
            ),
            **ERRORS,
            409: OpenApiResponse(
                ConflictErrorSerializer,
                description="`conflict`: the key has an active entry and no `supersede_reason` was given. "
                "`skill_exists`: another active entry carries the skill's name. `stale_version`: the "
                "key's active version is not `expected_version` (or `If-Match`). `current` is that "
                "entry (null when the key has no active entry). `quota_exceeded`: a new key past the "
                "team's quota of active memories (`quota`, `limit`; no `current`).",
            ),
            **error_responses(*BODY_ERRORS),
        },
    ),
    retrieve=extend_schema(
        summary="Get the active entry of a key",
        description="The active entry with the notes of its key; with `as_of`, the version that was "
        "active at that time (404 if none was). A long text can be read a slice at a time with "
        "`from_line` (1-based) and `lines`; the answer says `from_line`, `to_line`, `total_lines` and "
        "`has_more`. Counts as an access of the entry returned.",
        parameters=[TEAM_PATH_PARAMETER, KEY_PATH_PARAMETER, MemoryRetrieveQuerySerializer],
        responses={200: MemoryReadOutputSerializer, **ERRORS},
    ),
    destroy=extend_schema(
        summary="Delete the active entry of a key",
        description="The entry stays in the key's history, marked deleted.",
        parameters=[TEAM_PATH_PARAMETER, KEY_PATH_PARAMETER],
        responses={204: OpenApiResponse(description="Deleted."), **ERRORS},
    ),
    history=extend_schema(
        summary="Every version of a key",
        description="Created, superseded, unsuperseded, deleted and confirmed events, newest first, a "
        "page of versions at a time (`limit` versions, 50 by default; a deleted version also brings its "
        "`deleted` event, and each version its newest 20 `confirmed` events, the note in `reason`). "
        "`next` and `previous` link to the neighbouring pages.",
        parameters=[
            TEAM_PATH_PARAMETER,
            KEY_PATH_PARAMETER,
            OpenApiParameter("cursor", str, OpenApiParameter.QUERY, description=CURSOR_HELP),
            OpenApiParameter(
                "limit",
                int,
                OpenApiParameter.QUERY,
                description=f"Versions per page (default {KeysetPagination.page_size}, "
                f"at most {KeysetPagination.max_page_size}).",
            ),
        ],
        responses={200: MemoryHistoryOutputSerializer, **ERRORS},
    ),
    version=extend_schema(
        summary="Get one version of a key by id",
        description="Any version, active, superseded or deleted, with the notes of its key. A "
        "superseded version says where the truth moved to in `superseded_by`. Counts as an access.",
        parameters=[TEAM_PATH_PARAMETER, KEY_PATH_PARAMETER, VERSION_PATH_PARAMETER],
        responses={200: MemoryDetailOutputSerializer, **ERRORS},
    ),
    unsupersede=extend_schema(
        summary="Restore the previous version of a key",
        description="The version the active entry replaced becomes the active one again, as a new "
        "version (kind `unsupersede`, with the reason) so that history is never rewritten. "
        "Undoing an unsupersede brings back what it undid. When the active entry was saved under this "
        "key as a longer duplicate of another key's entry, that entry comes back under its own key "
        "(the answer's `key`) and this key is left without an active entry.",
        parameters=[TEAM_PATH_PARAMETER, KEY_PATH_PARAMETER],
        request=UnsupersedeInputSerializer,
        responses={
            201: MemoryDetailOutputSerializer,
            **WRITE_ERRORS,
            409: OpenApiResponse(
                NoPreviousVersionErrorSerializer,
                description="`no_previous_version`: the active entry replaced nothing. `conflict`: the "
                "entry it replaced belongs to another key (a duplicate) that has an active entry again. "
                "`skill_exists`: another active entry carries the restored version's skill name. "
                "`current` is the entry in the way.",
            ),
        },
    ),
    confirm=extend_schema(
        summary="Confirm the active entry of a key is still true",
        description="Resets `last_confirmed_at` to now without a new version (the id, content and "
        "`updated_at` stay), lowers a broken-anchor flag, resolves the entry's open `due` and "
        "`anchor_broken` nudges, and records a confirmation (who, when, the optional `note`) that the "
        "key's history shows as a `confirmed` event. Two or more distinct confirmers give the entry "
        "the team's longer freshness window.",
        parameters=[TEAM_PATH_PARAMETER, KEY_PATH_PARAMETER],
        request=ConfirmInputSerializer,
        responses={200: MemoryDetailOutputSerializer, **WRITE_ERRORS},
    ),
    archive=extend_schema(
        summary="Archive the active entry of a key",
        description="A soft state, never a delete: the entry (its id, content and history) stays, "
        "marked `archived` with who and when, but leaves search's default results (`include_archived` "
        "brings it back there), the memory list (`include_archived`), injection and the freshness jobs. "
        "The key's history shows an `archived` event. `restore` makes it active again. Open nudges "
        "about the entry are resolved by the archive.",
        parameters=[TEAM_PATH_PARAMETER, KEY_PATH_PARAMETER],
        request=ArchiveInputSerializer,
        responses={
            200: MemoryDetailOutputSerializer,
            **WRITE_ERRORS,
            409: OpenApiResponse(
                ConflictErrorSerializer,
                description="`stale_version`: the key's active entry is not `expected_version` "
                "(`current` is that entry).",
            ),
        },
    ),
    restore=extend_schema(
        summary="Restore the archived entry of a key",
        description="The key's archived last version becomes its active entry again, as it was (the "
        "same id; no new version). 404 when the key's last version is not archived.",
        parameters=[TEAM_PATH_PARAMETER, KEY_PATH_PARAMETER],
        request=None,
        responses={
            200: MemoryDetailOutputSerializer,
            **ERRORS,
            409: OpenApiResponse(
                ConflictErrorSerializer,
                description="`conflict`: the key has an active entry again (saved since; `current` is "
                "it). `skill_exists`: another active entry carries its skill's name. "
                "`quota_exceeded`: the team's quota of active memories is reached.",
            ),
        },
    ),
    rate=extend_schema(
        summary="Rate the active entry of a key",
        description="One vote up or down. The net score (`rating`) gives a small boost or penalty in search.",
        parameters=[TEAM_PATH_PARAMETER, KEY_PATH_PARAMETER],
        request=RateInputSerializer,
        responses={200: MemoryOutputSerializer, **WRITE_ERRORS},
    ),
)
class MemoryViewSet(TeamScopedViewSet):
    replica_actions: ClassVar[frozenset[str]] = frozenset({"list", "history"})
    lookup_field = "key"
    lookup_value_regex = "[^/]+"
    pagination_class = MemoryPagination

    def list(self, request: Request, team: str) -> Response:
        query = MemoryListQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        memories = selectors.list_memories(team=self.get_team(), **query.to_arguments())
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(memories, request, view=self) or []
        successors = selectors.successors_of(
            team_id=self.get_team().id, memory_ids=[m.id for m in page if not m.is_active]
        )
        data = MemoryOutputSerializer(page, many=True, context={"successors": successors}).data
        return paginator.get_paginated_response(data)

    def create(self, request: Request, team: str) -> Response:
        payload = MemoryCreateInputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        arguments = payload.to_arguments()
        expected_version = _expected_version(request, arguments.expected_version)
        result = use_cases.save_entry(
            team=self.get_team(),
            arguments=replace(arguments, expected_version=expected_version),
            updated_by=agent_actor(request),
        )
        if not result.saved:
            return Response(duplicate_payload(result), status=status.HTTP_200_OK)
        return Response(saved_payload(result), status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Save many memories at once",
        description="Up to 500 saves in one request, each with the fields and rules of `POST memories/` (one "
        "`error` outcome per entry that does not validate or is refused; the others are stored). "
        "One result per entry, in order: `created`, `superseded`, `unchanged` (the key's active "
        "entry already holds exactly this: sending a batch again changes nothing), `duplicate` "
        "(another active entry holds exactly this text; nothing written) or `error` (the one error "
        "shape, as the single save would answer). A key named twice is an error of its second "
        "entry. Each entry is stored in a savepoint of its own and the batch commits once, before "
        "the answer: what the answer reports is what is stored. The duplicate check in the request "
        "is the exact one (same text): a near duplicate (similar wording, at the team's threshold) "
        "is looked for once the worker has indexed the entry, and then becomes a soft supersede "
        "visible in history: the longer text stays active and replaces the other, and a new entry "
        "that is not longer is the one replaced (the single save would have refused it). Counts as "
        "one request against the token's write rate; the team's quota of active memories applies to "
        "every entry.",
        parameters=[TEAM_PATH_PARAMETER],
        request=MemoryBatchInputSerializer,
        responses={
            200: OpenApiResponse(
                MemoryBatchOutputSerializer,
                description="The batch ran: one result per entry (some may be `error`).",
            ),
            **WRITE_ERRORS,
        },
    )
    @action(detail=False, methods=["post"], url_path="batch")
    def batch(self, request: Request, team: str) -> Response:
        if request.headers.get("If-Match") is not None:
            raise InvalidInput("a batch takes expected_version per entry, not If-Match", field="If-Match")
        payload = MemoryBatchInputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        body = batch_payload(
            team=self.get_team(),
            raw_entries=payload.validated_data["entries"],
            updated_by=agent_actor(request),
        )
        return Response(body, status=status.HTTP_200_OK)

    @extend_schema(exclude=True)
    @batch.mapping.get
    def batch_key(self, request: Request, team: str) -> Response:
        """`GET memories/batch/` is the key "batch", which the batch's route would shadow."""
        return self.retrieve(request, team, key="batch")

    @extend_schema(exclude=True)
    @batch.mapping.delete
    def delete_batch_key(self, request: Request, team: str) -> Response:
        return self.destroy(request, team, key="batch")

    def retrieve(self, request: Request, team: str, key: str) -> Response:
        check_key(key)
        query = MemoryRetrieveQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        as_of = query.validated_data.get("as_of")
        memory = use_cases.read_entry(team=self.get_team(), key=key, as_of=as_of)
        body = detail_payload(team=self.get_team(), memory=memory, as_of=as_of)
        sliced = line_slice(
            body, from_line=query.validated_data["from_line"], count=query.validated_data.get("lines")
        )
        response = Response(sliced)
        if as_of is None:
            # What a writer sends back in If-Match to supersede exactly this version.
            response["ETag"] = f'"{memory.id}"'
        return response

    def destroy(self, request: Request, team: str, key: str) -> Response:
        check_key(key)
        writes.delete_memory(team=self.get_team(), key=key, deleted_by=agent_actor(request))
        return Response(status=status.HTTP_204_NO_CONTENT)

    @action(detail=True, methods=["get"])
    def history(self, request: Request, team: str, key: str) -> Response:
        check_key(key)
        versions = selectors.list_memory_versions(team=self.get_team(), key=key)
        paginator = HistoryPagination()
        page = paginator.paginate_queryset(versions, request, view=self) or []
        events, successors = selectors.history_page(team_id=self.get_team().id, versions=page)
        body = {
            "key": key,
            "history": events,
            "next": paginator.get_next_link(),
            "previous": paginator.get_previous_link(),
        }
        return Response(MemoryHistoryOutputSerializer(body, context={"successors": successors}).data)

    @action(detail=True, methods=["get"], url_path=r"versions/(?P<version_id>[^/]+)")
    def version(self, request: Request, team: str, key: str, version_id: str) -> Response:
        check_key(key)
        try:
            parsed_id = uuid.UUID(version_id)
        except ValueError:
            raise InvalidInput("malformed version id", field="version_id") from None
        memory = use_cases.read_entry(team=self.get_team(), key=key, version_id=parsed_id)
        return Response(detail_payload(team=self.get_team(), memory=memory))

    @action(detail=True, methods=["post"])
    def unsupersede(self, request: Request, team: str, key: str) -> Response:
        check_key(key)
        payload = UnsupersedeInputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        memory = writes.unsupersede_memory(
            team=self.get_team(),
            key=key,
            reason=payload.validated_data["reason"],
            updated_by=agent_actor(request),
        )
        return Response(detail_payload(team=self.get_team(), memory=memory), status=status.HTTP_201_CREATED)

    @action(detail=True, methods=["post"])
    def confirm(self, request: Request, team: str, key: str) -> Response:
        check_key(key)
        payload = ConfirmInputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        result = writes.confirm_memory(
            team=self.get_team(),
            key=key,
            confirmed_by=agent_actor(request),
            note=payload.validated_data.get("note"),
        )
        return Response(detail_payload(team=self.get_team(), memory=result.memory))

    @action(detail=True, methods=["post"])
    def archive(self, request: Request, team: str, key: str) -> Response:
        check_key(key)
        payload = ArchiveInputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        memory = writes.archive_memory(
            team=self.get_team(),
            key=key,
            archived_by=agent_actor(request),
            expected_version=payload.validated_data.get("expected_version"),
        )
        return Response(detail_payload(team=self.get_team(), memory=memory))

    @action(detail=True, methods=["post"])
    def restore(self, request: Request, team: str, key: str) -> Response:
        check_key(key)
        memory = writes.restore_archived(team=self.get_team(), key=key, restored_by=agent_actor(request))
        return Response(detail_payload(team=self.get_team(), memory=memory))

    @action(detail=True, methods=["post"])
    def rate(self, request: Request, team: str, key: str) -> Response:
        check_key(key)
        payload = RateInputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        memory = feedback.rate_memory(
            team=self.get_team(),
            key=key,
            direction=payload.validated_data["direction"],
            rated_by=agent_actor(request),
        )
        return Response(entry_payload(memory))

    @extend_schema(
        methods=["GET"],
        summary="Every note on a key",
        description="Notes written on any version of the key, newest first, a page at a time.",
        parameters=[TEAM_PATH_PARAMETER, KEY_PATH_PARAMETER],
        responses={200: AnnotationOutputSerializer(many=True), **ERRORS},
    )
    @extend_schema(
        methods=["POST"],
        summary="Add a note to the active entry of a key",
        description="A persistent note, scrubbed of credentials like content. It is shown with "
        "every version of the key (and says which version it was written on).",
        parameters=[TEAM_PATH_PARAMETER, KEY_PATH_PARAMETER],
        request=AnnotationInputSerializer,
        responses={201: AnnotationCreatedOutputSerializer, **WRITE_ERRORS},
    )
    @action(detail=True, methods=["get", "post"], pagination_class=AnnotationPagination)
    def annotations(self, request: Request, team: str, key: str) -> Response:
        check_key(key)
        if request.method == "GET":
            notes = selectors.list_annotations(team=self.get_team(), key=key)
            paginator = AnnotationPagination()
            page = paginator.paginate_queryset(notes, request, view=self)
            return paginator.get_paginated_response(AnnotationOutputSerializer(page, many=True).data)
        payload = AnnotationInputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        result = feedback.annotate_memory(
            team=self.get_team(),
            key=key,
            note=payload.validated_data["note"],
            created_by=agent_actor(request),
        )
        annotation = result.annotation
        annotation.redactions = result.redactions  # type: ignore[attr-defined]
        return Response(AnnotationCreatedOutputSerializer(annotation).data, status=status.HTTP_201_CREATED)

    def serialize_error_extra(self, name: str, value: Any) -> Any:
        return memory_error_extra(name, value)


def batch_payload(
    *,
    team: Team,
    raw_entries: list[Any],
    updated_by: str,
    entry_serializer: type[MemoryCreateInputSerializer] = MemoryCreateInputSerializer,
) -> dict[str, Any]:
    """The batch save of `raw_entries` (each parsed by `entry_serializer`, a bad one
    being an `error` result of its own) and its answer: one result per entry, in order,
    and the count per status. The MCP tool memory_save_batch shares it, with the
    serializer of its saves (a key may be left out)."""
    entries: list[writes.BatchEntry] = []
    results: dict[int, dict[str, Any]] = {}
    for index, raw in enumerate(raw_entries):
        entry = entry_serializer(data=raw)
        if not entry.is_valid():
            error = validation_error_body(drf_serializers.ValidationError(entry.errors))
            results[index] = {"index": index, "key": _sent_key(raw), "status": "error", "error": error}
            continue
        entries.append(use_cases.batch_entry(team=team, index=index, arguments=entry.to_arguments()))
    for outcome in writes.save_batch(team=team, entries=entries, updated_by=updated_by):
        refusal = None if outcome.error is None else domain_error_body(outcome.error, _MemoryErrorExtras())
        results[outcome.index] = batch_result_payload(outcome, refusal)
    ordered = [results[index] for index in sorted(results)]
    counts = Counter(result["status"] for result in ordered)
    return {"results": ordered, "counts": {name: counts[name] for name in writes.STATUSES}}


class _MemoryErrorExtras:
    """Renders an entry named in an error (`current`) as every door does."""

    def serialize_error_extra(self, name: str, value: Any) -> Any:
        return memory_error_extra(name, value)


def _sent_key(raw: Any) -> str:
    """The key an entry that did not validate sent, for its result (bounded)."""
    key = raw.get("key") if isinstance(raw, dict) else None
    return key[:200] if isinstance(key, str) else ""


def _expected_version(request: Request, from_body: uuid.UUID | None) -> uuid.UUID | None:
    """`expected_version` from the body or the `If-Match` header (an ETag: the id in
    quotes); both may be sent if they agree."""
    header = request.headers.get("If-Match")
    if header is None:
        return from_body
    text = header.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        text = text[1:-1]
    try:
        from_header = uuid.UUID(text) if len(text) <= 64 else None
    except ValueError:
        from_header = None
    if from_header is None:
        raise InvalidInput('If-Match takes one version id as an ETag: "<id>"', field="If-Match")
    if from_body is not None and from_body != from_header:
        raise InvalidInput("If-Match and expected_version name different versions", field="If-Match")
    return from_header
