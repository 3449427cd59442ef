"""The MCP tools: what a model sees (name, description, JSON schema, annotations) and the
handler behind each, a thin call into the service or selector its REST view calls.

Arguments are validated by the REST API's own input serializers (the same limits and
the same `invalid` errors); answers are rendered by the REST API's output serializers,
so a tool answers what the endpoint it mirrors answers. A handler runs inside the call's
transaction, bound to the token's team (agents.mcp.server.run_tool): it never looks
beyond `call.team`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest, QueryDict
from rest_framework import serializers
from rest_framework.request import Request

from agents import injection, sessions
from agents.api_injection import injection_payload
from agents.api_sessions import (
    AgentSessionBootInputSerializer,
    AgentSessionBootOutputSerializer,
    AgentSessionOutputSerializer,
    AgentSessionUpdateInputSerializer,
)
from agents.injection.relevant import RELEVANT_MAX
from agents.mcp import schema as js
from core.errors import InvalidInput
from core.pagination import KeysetPagination
from freshness import drafts as freshness_drafts
from freshness import selectors as freshness_selectors
from freshness import services as freshness_services
from freshness.api import (
    NudgeListQuerySerializer,
    NudgeOutputSerializer,
    NudgePagination,
    NudgeResolveInputSerializer,
)
from freshness.api_drafts import (
    DraftAcceptInputSerializer,
    DraftExtractInputSerializer,
    DraftListQuerySerializer,
    DraftMergeInputSerializer,
    DraftOutputSerializer,
    DraftPagination,
)
from freshness.models import NudgeAction, NudgeKind
from memories import feedback, learnings, selectors, skills, writes
from memories.anchors import ANCHOR_TYPES, MAX_ANCHOR_VALUE_CHARS, MAX_EXPECT_CHARS
from memories.api import HistoryPagination, MemoryPagination, batch_payload
from memories.api_learnings import LearningInputSerializer
from memories.exceptions import MemoryNotFound
from memories.extraction import parse_filter_param
from memories.keys import derive_key
from memories.models import MAX_CONTENT_BYTES, MAX_NOTE_LENGTH, Memory
from memories.serializers import (
    AnnotationCreatedOutputSerializer,
    AnnotationInputSerializer,
    AwareDateTimeField,
    ConfirmInputSerializer,
    MemoryCreateInputSerializer,
    MemoryDetailOutputSerializer,
    MemoryHistoryOutputSerializer,
    MemoryListQuerySerializer,
    MemoryOutputSerializer,
    RateInputSerializer,
    StrictUUIDField,
    UnsupersedeInputSerializer,
    duplicate_payload,
    saved_payload,
)
from memories.types import ACCEPTED_TYPE_NAMES
from memories.writes import MAX_BATCH_ENTRIES, MAX_REASON_LENGTH
from search import querying
from search.api import SearchInputSerializer, SearchOutputSerializer
from search.selectors import MAX_QUERY_CHARS, MAX_RESULTS
from teams import services as team_services
from teams.models import AgentToken, Team
from teams.scrubber import scrub
from teams.selectors import team_secret_values
from teams.serializers import (
    MAX_VAULT_VALUE_LENGTH,
    StrictCharField,
    StrictInputSerializer,
    StrictIntegerField,
    StrictRegexField,
    VaultEntryInputSerializer,
)
from teams.validators import KEY_PATTERN

MAX_LINES = 100_000  # from_line / lines: far past any 64 KiB text
DEFAULT_LIST_LIMIT = 20
MAX_LIST_LIMIT = KeysetPagination.max_page_size
KEY_LENGTH = 200
PROJECT_LENGTH = 200
TYPE_NAMES = ", ".join(ACCEPTED_TYPE_NAMES)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ToolCall:
    """One call of a tool: who calls (the token, its team, the actor a change is
    attributed to) and the arguments as the client sent them."""

    team: Team
    token: AgentToken
    actor: str
    arguments: dict[str, Any]


Handler = Callable[[ToolCall], dict[str, Any]]


@dataclass(frozen=True)
class Tool:
    name: str
    title: str
    description: str
    input_schema: js.Schema
    scope: str  # the token scope it needs: read, write or admin (as its REST endpoint)
    read_only: bool
    destructive: bool
    idempotent: bool
    handler: Handler
    # Reads a replica may serve, as its REST endpoint's (TeamScopedViewSet.replica_actions).
    replica_reads: bool = False


def validated(
    serializer_class: type[serializers.Serializer[Any]], arguments: dict[str, Any]
) -> dict[str, Any]:
    """The arguments through a REST input serializer: the same limits, the same errors."""
    payload = serializer_class(data=arguments)
    payload.is_valid(raise_exception=True)
    data: dict[str, Any] = payload.validated_data
    return data


class _ToolHttpRequest(HttpRequest):
    """What DRF's cursor pagination reads from a request: query parameters, and a base
    URL to put the cursor in (taken back out: a tool answers the bare cursor)."""

    def build_absolute_uri(self, location: str | None = None) -> str:
        return "mcp:///"


def paginate(
    paginator_class: type[KeysetPagination], rows: QuerySet[Any], *, limit: int, cursor: str | None
) -> tuple[list[Any], str | None]:
    """One page of `rows` by the REST endpoint's own keyset pagination, and the cursor of
    the next (older) page, or None."""
    http = _ToolHttpRequest()
    http.method = "GET"
    params = QueryDict(mutable=True)
    params["limit"] = str(limit)
    if cursor:
        params["cursor"] = cursor
    http.GET = params  # type: ignore[assignment]  # django-stubs: GET is immutable
    paginator = paginator_class()
    page = paginator.paginate_queryset(rows, Request(http)) or []
    link = paginator.get_next_link()
    next_cursor = parse_qs(urlsplit(link).query)["cursor"][0] if link else None
    return list(page), next_cursor


class PageArguments(serializers.Serializer[Any]):
    limit = StrictIntegerField(min_value=1, max_value=MAX_LIST_LIMIT, default=DEFAULT_LIST_LIMIT)
    cursor = StrictCharField(required=False, max_length=1000)


def page_schema(what: str) -> dict[str, js.Schema]:
    return {
        "limit": js.integer(
            f"How many {what} per page (default {DEFAULT_LIST_LIMIT}).", minimum=1, maximum=MAX_LIST_LIMIT
        ),
        "cursor": js.string("The `next_cursor` of the previous page, as given.", max_length=1000),
    }


class KeyArgument(StrictInputSerializer):
    key = StrictRegexField(KEY_PATTERN, max_length=KEY_LENGTH)


KEY_SCHEMA = js.string(
    "The memory's key: letters, digits and . _ : @ -, starting with a letter or digit.",
    max_length=KEY_LENGTH,
    min_length=1,
    pattern=KEY_PATTERN,
)


def memory_detail(team: Team, memory: Memory, *, as_of: Any = None) -> dict[str, Any]:
    """One version with where the truth moved to and the notes of its key, counted as an
    access (MemoryViewSet._detail)."""
    memory.last_accessed_at = feedback.record_access(team=team, memory_ids=[memory.id])
    memory.access_count += 1
    replaced = [] if memory.is_active else [memory.id]
    context = {
        "successors": selectors.successors_of(team_id=team.id, memory_ids=replaced),
        "annotations": selectors.annotations_for(team.id, [memory.id], as_of=as_of),
    }
    data: dict[str, Any] = MemoryDetailOutputSerializer(memory, context=context).data
    return data


# --- memory_save -------------------------------------------------------------


def derived_key(team: Team, content: str) -> str:
    """A stable key for a text saved without one: the slug of its first words and the
    hash of its text, both taken after the credential scrub (as learnings derive theirs),
    so the same text always gets the same key and a secret never shapes one."""
    return derive_key(scrub(content, team_secret_values(team_id=team.id)).text)


class SaveArguments(MemoryCreateInputSerializer):
    key = StrictRegexField(KEY_PATTERN, max_length=KEY_LENGTH, required=False)


def memory_save(call: ToolCall) -> dict[str, Any]:
    data = validated(SaveArguments, call.arguments)
    key = data.get("key") or derived_key(call.team, data["content"])
    result = writes.save_memory(
        team=call.team,
        key=key,
        content=data["content"],
        type_name=data.get("type"),
        supersede_reason=data.get("supersede_reason"),
        project=data.get("project"),
        metadata=data.get("metadata"),
        skill_trigger=data.get("skill_trigger", writes.UNSET),
        allow_duplicate=data["allow_duplicate"],
        updated_by=call.actor,
        expected_version=data.get("expected_version"),
        anchor=data.get("anchor", writes.UNSET),
    )
    if not result.saved:
        return dict(duplicate_payload(result))
    return {"saved": True, **saved_payload(result)}


SKILL_TRIGGER_SCHEMA = js.nullable(
    js.obj(
        {
            "name": js.string(
                "Unique among the team's active entries; skill_get loads it.",
                max_length=63,
                pattern=skills.SKILL_NAME_PATTERN,
            ),
            "keywords": js.string_list(
                "Words or phrases; a search whose query contains one brings the skill first.",
                max_items=skills.MAX_KEYWORDS,
                max_length=skills.MAX_KEYWORD_CHARS,
            ),
            "projects": js.string_list(
                "Fire only in these projects; empty: everywhere.",
                max_items=skills.MAX_PROJECTS,
                max_length=skills.MAX_PROJECT_CHARS,
            ),
            "always_on": js.boolean("Put it in every injection block (memory_context, session_boot)."),
        },
        required=("name",),
    )
)

ANCHOR_SCHEMA = js.nullable(
    {
        **js.obj(
            {
                "type": {"type": "string", "enum": list(ANCHOR_TYPES), "description": "url, api or file."},
                "value": js.string(
                    "For url and api, an http(s) URL a check can fetch (no credentials, no numeric "
                    "host but a dotted quad, no private address); for file, a path in the worktree.",
                    max_length=MAX_ANCHOR_VALUE_CHARS,
                    min_length=1,
                ),
                "expect": {
                    "type": ["integer", "string", "null"],
                    "minimum": 100,
                    "maximum": 599,
                    "maxLength": MAX_EXPECT_CHARS,
                    "description": "What a good answer looks like: an HTTP status or a body substring.",
                },
            },
            required=("type", "value"),
        ),
        "description": "What the entry can be checked against. Left out on a supersede: carried over; "
        "null: no anchor.",
    }
)

SAVE = Tool(
    name="memory_save",
    title="Save a memory",
    description=(
        "Save something the team should remember: a fact, decision, lesson or context, in plain "
        "text (credentials are redacted). Leave `key` out to have one derived from the text "
        "(`mem:<first words>:<hash>`: the same text always gets the same key). Saving to a key that "
        "already has an active entry needs `supersede_reason` (the old version stays in history); "
        "without it the call fails with `conflict` and the current entry in `current`. A text that "
        "an active entry already holds is not saved again: the answer has `saved: false` and "
        "`duplicate_of`. Returns the saved version (`saved: true`) with a type `hint` when the "
        "text reads like another type. Errors: invalid, unknown_type, content_too_large, conflict, "
        "stale_version (with `expected_version`), skill_exists, quota_exceeded, forbidden."
    ),
    input_schema=js.obj(
        {
            "content": js.string(
                "The text to remember (at most 64 KiB of UTF-8).", max_length=MAX_CONTENT_BYTES, min_length=1
            ),
            "key": KEY_SCHEMA,
            "type": js.nullable(
                js.string(f"One of: {TYPE_NAMES} (aliases resolve). Default: context.", max_length=32)
            ),
            "supersede_reason": js.nullable(
                js.string("Why this replaces the key's active entry.", max_length=MAX_REASON_LENGTH)
            ),
            "project": js.string("The project it belongs to; empty: team-wide.", max_length=PROJECT_LENGTH),
            "metadata": {"type": "object", "description": 'Free-form JSON, e.g. {"tags": ["ci"]} (16 KiB).'},
            "skill_trigger": SKILL_TRIGGER_SCHEMA,
            "allow_duplicate": js.boolean("Save even when an active entry already holds the same text."),
            "anchor": ANCHOR_SCHEMA,
            "expected_version": js.nullable(
                js.string(
                    "The id of the active version this write was based on; another active version "
                    "fails with stale_version.",
                    max_length=36,
                    format="uuid",
                )
            ),
        },
        required=("content",),
    ),
    scope="write",
    read_only=False,
    destructive=False,
    idempotent=False,
    handler=memory_save,
)


# --- memory_save_batch -------------------------------------------------------


class SaveBatchArguments(StrictInputSerializer):
    entries = serializers.ListField(
        child=serializers.JSONField(allow_null=True), allow_empty=False, max_length=MAX_BATCH_ENTRIES
    )


def memory_save_batch(call: ToolCall) -> dict[str, Any]:
    data = validated(SaveBatchArguments, call.arguments)
    return batch_payload(
        team=call.team,
        raw_entries=data["entries"],
        updated_by=call.actor,
        entry_serializer=SaveArguments,
        key_of=lambda entry: entry.get("key") or derived_key(call.team, entry["content"]),
    )


SAVE_BATCH = Tool(
    name="memory_save_batch",
    title="Save many memories at once",
    description=(
        f"Save up to {MAX_BATCH_ENTRIES} memories in one call, each entry taking memory_save's "
        "arguments and rules. Returns one result per entry, in order: `status` created, superseded, "
        "unchanged (the key's active entry already holds exactly this; calling again with the same "
        "entries changes nothing), duplicate (another active entry holds the text: `duplicate_of`) or "
        "error (`error`, as memory_save would fail); the other entries are saved. A key given twice "
        "is an error of its second entry. Only exact copies are found at once: a near duplicate becomes "
        "a soft supersede after indexing (the longer text stays; see the key's history). Errors of the "
        "whole call: invalid, forbidden."
    ),
    input_schema=js.obj(
        {
            "entries": {
                "type": "array",
                "description": "The saves, each an object of memory_save's arguments.",
                "items": SAVE.input_schema,
                "minItems": 1,
                "maxItems": MAX_BATCH_ENTRIES,
            }
        },
        required=("entries",),
    ),
    scope="write",
    read_only=False,
    destructive=False,
    idempotent=True,
    handler=memory_save_batch,
)


# --- memory_search ---------------------------------------------------------


def memory_search(call: ToolCall) -> dict[str, Any]:
    data = validated(SearchInputSerializer, call.arguments)
    outcome = querying.embed_and_search(
        team=call.team,
        query=data["query"],
        max_results=data["max_results"],
        min_score=data.get("min_score"),
        types=data.get("types"),
        project=data.get("project"),
        include_superseded=data["include_superseded"],
        tags=data.get("tags"),
        people=data.get("people"),
        explain=data["explain"],
        mode=data["mode"],
    )
    # Every result handed to the agent counts as an access: one UPDATE for all.
    feedback.record_access(team=call.team, memory_ids=[r.memory_id for r in outcome.results])
    return dict(SearchOutputSerializer(outcome).data)


SEARCH = Tool(
    name="memory_search",
    title="Search memories",
    description=(
        "Find what the team knows about something: hybrid keyword and vector search over every "
        "memory, newest and best-rated first among equals. Use it before deciding or answering "
        "about anything the team may have settled before. Returns results with key, snippet, score, "
        "type, whether the version is still active (a superseded one says what replaced it in "
        "`superseded_by`) and notes; skills whose keyword is in the query come first. `search_mode` "
        "says which paths ran (keyword only when embeddings are unavailable). Use memory_get for "
        "the full text. Errors: invalid."
    ),
    input_schema=js.obj(
        {
            "query": js.string("What to look for, in plain words.", max_length=MAX_QUERY_CHARS, min_length=1),
            "max_results": js.integer("How many results (default 5).", minimum=1, maximum=MAX_RESULTS),
            "min_score": js.nullable(
                {
                    "type": "number",
                    "minimum": 0,
                    "maximum": 1,
                    "description": "Leave out results scoring lower.",
                }
            ),
            "types": js.string_list(
                f"Only these types: {TYPE_NAMES}.",
                max_items=len(ACCEPTED_TYPE_NAMES),
                max_length=32,
                minItems=1,
            ),
            "project": js.string("Only this project (and team-wide entries).", max_length=PROJECT_LENGTH),
            "include_superseded": js.boolean("Include replaced versions (default true)."),
            "tags": js.string_list("Only entries with every one of these tags.", max_items=10, max_length=64),
            "people": js.string_list(
                "Only entries mentioning every one of these.", max_items=10, max_length=64
            ),
            "explain": js.boolean("Add how each score was made."),
            "mode": {
                "type": "string",
                "enum": ["hybrid", "keyword", "vector"],
                "description": "hybrid (default), keyword or vector.",
            },
        },
        required=("query",),
    ),
    scope="read",
    read_only=True,
    destructive=False,
    idempotent=True,
    handler=memory_search,
    replica_reads=True,
)


# --- memory_get --------------------------------------------------------------


class GetArguments(StrictInputSerializer):
    key = StrictRegexField(KEY_PATTERN, max_length=KEY_LENGTH, required=False)
    version_id = StrictUUIDField(required=False)
    as_of = AwareDateTimeField(required=False)
    from_line = StrictIntegerField(min_value=1, max_value=MAX_LINES, default=1)
    lines = StrictIntegerField(min_value=1, max_value=MAX_LINES, required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "key" not in attrs and "version_id" not in attrs:
            raise serializers.ValidationError("give a key or a version_id")
        if "as_of" in attrs and "version_id" in attrs:
            raise serializers.ValidationError(
                "as_of reads a key as it was; a version_id is one version already"
            )
        return attrs


def memory_get(call: ToolCall) -> dict[str, Any]:
    data = validated(GetArguments, call.arguments)
    key, version_id, as_of = data.get("key"), data.get("version_id"), data.get("as_of")
    if version_id is not None:
        memory = _version(call.team, version_id, key)
    elif as_of is not None:
        memory = selectors.get_memory_as_of(team=call.team, key=data["key"], as_of=as_of)
    else:
        memory = selectors.get_active_memory(team=call.team, key=data["key"])
    body = memory_detail(call.team, memory, as_of=as_of)
    return _sliced(body, from_line=data["from_line"], count=data.get("lines"))


def _version(team: Team, version_id: uuid.UUID, key: str | None) -> Memory:
    if key is None:
        key = Memory.objects.for_team(team.id).filter(id=version_id).values_list("key", flat=True).first()
        if key is None:
            raise MemoryNotFound("no such version")
    return selectors.get_memory_version(team=team, key=key, version_id=version_id)


def _sliced(body: dict[str, Any], *, from_line: int, count: int | None) -> dict[str, Any]:
    """Lines `from_line`..(`from_line` + `count` - 1) of the content, 1-based, and where
    they sit in the whole, so an agent can page through a long text."""
    lines = body["content"].splitlines(keepends=True)
    total = len(lines)
    if from_line > max(total, 1):
        raise serializers.ValidationError({"from_line": [f"the content has {total} lines"]})
    end = total if count is None else min(total, from_line - 1 + count)
    return {
        **body,
        "content": "".join(lines[from_line - 1 : end]),
        "from_line": from_line,
        "to_line": end,
        "total_lines": total,
        "has_more": end < total,
    }


GET = Tool(
    name="memory_get",
    title="Read a memory",
    description=(
        "Read one memory in full: the active entry of a `key`, the version active at `as_of`, or "
        "any version by `version_id` (from search, history or `superseded_by`). Long texts can be "
        "read a slice at a time with `from_line` (1-based) and `lines`; the answer says "
        "`from_line`, `to_line`, `total_lines` and `has_more`. Includes the notes of the key and, "
        "for a replaced version, what replaced it. Errors: not_found, invalid."
    ),
    input_schema=js.obj(
        {
            "key": KEY_SCHEMA,
            "version_id": js.string("One version's id.", max_length=36, format="uuid"),
            "as_of": js.string("ISO 8601 with a time zone: the version active then.", max_length=64),
            "from_line": js.integer(
                "First line to return, 1-based (default 1).", minimum=1, maximum=MAX_LINES
            ),
            "lines": js.integer("How many lines (default: to the end).", minimum=1, maximum=MAX_LINES),
        }
    ),
    scope="read",
    read_only=True,
    destructive=False,
    idempotent=True,
    handler=memory_get,
)


# --- memory_list / memory_history ------------------------------------------------


class ListArguments(StrictInputSerializer, MemoryListQuerySerializer, PageArguments):
    pass


def memory_list(call: ToolCall) -> dict[str, Any]:
    data = validated(ListArguments, call.arguments)
    rows = selectors.list_memories(
        team=call.team,
        memory_type=data.get("type"),
        project=data.get("project"),
        as_of=data.get("as_of"),
        tags=parse_filter_param(data.get("tags")),
        people=parse_filter_param(data.get("people")),
    )
    page, next_cursor = paginate(MemoryPagination, rows, limit=data["limit"], cursor=data.get("cursor"))
    successors = selectors.successors_of(
        team_id=call.team.id, memory_ids=[m.id for m in page if not m.is_active]
    )
    results = MemoryOutputSerializer(page, many=True, context={"successors": successors}).data
    return {"results": results, "next_cursor": next_cursor}


LIST = Tool(
    name="memory_list",
    title="List memories",
    description=(
        "List the team's active memories, newest first, a page at a time (`next_cursor` fetches "
        "the next page; null at the end). Filter by type, project, tags or people; with `as_of`, "
        "the versions that were active then. For finding something specific use memory_search. "
        "Errors: invalid."
    ),
    input_schema=js.obj(
        {
            "type": js.string(f"Only this type: {TYPE_NAMES}.", max_length=32),
            "project": js.string("Only this project.", max_length=PROJECT_LENGTH),
            "as_of": js.string("ISO 8601 with a time zone: what was active then.", max_length=64),
            "tags": js.string("Comma-separated: entries with every tag.", max_length=1000),
            "people": js.string("Comma-separated: entries mentioning everyone.", max_length=1000),
            **page_schema("memories"),
        }
    ),
    scope="read",
    read_only=True,
    destructive=False,
    idempotent=True,
    handler=memory_list,
    replica_reads=True,
)


class HistoryArguments(KeyArgument, PageArguments):
    pass


def memory_history(call: ToolCall) -> dict[str, Any]:
    data = validated(HistoryArguments, call.arguments)
    versions = selectors.list_memory_versions(team=call.team, key=data["key"])
    page, next_cursor = paginate(HistoryPagination, versions, limit=data["limit"], cursor=data.get("cursor"))
    events = selectors.history_events(page, page)
    context = {"successors": selectors.history_successors(events, team_id=call.team.id)}
    body = {"key": data["key"], "history": events, "next": None, "previous": None}
    rendered = dict(MemoryHistoryOutputSerializer(body, context=context).data)
    rendered.pop("next")
    rendered.pop("previous")
    return {**rendered, "next_cursor": next_cursor}


HISTORY = Tool(
    name="memory_history",
    title="History of a key",
    description=(
        "Every version of a key, newest first: created, superseded (with the reason), "
        "unsuperseded and deleted events, a page of versions at a time (`next_cursor`). Use it to "
        "see why the team changed its mind. Errors: not_found (nothing was ever saved under the key), "
        "invalid."
    ),
    input_schema=js.obj({"key": KEY_SCHEMA, **page_schema("versions")}, required=("key",)),
    scope="read",
    read_only=True,
    destructive=False,
    idempotent=True,
    handler=memory_history,
    replica_reads=True,
)


# --- memory_delete / memory_unsupersede / memory_rate / memory_annotate ----------


def memory_delete(call: ToolCall) -> dict[str, Any]:
    key = validated(KeyArgument, call.arguments)["key"]
    memory = writes.delete_memory(team=call.team, key=key, deleted_by=call.actor)
    return {"deleted": True, "key": key, "id": str(memory.id)}


DELETE = Tool(
    name="memory_delete",
    title="Delete a memory",
    description=(
        "Delete the active entry of a key, when it is wrong and nothing replaces it (to correct "
        "it, save with a supersede_reason instead). The entry stays in the key's history, marked "
        "deleted. Errors: not_found (no active entry), invalid, forbidden."
    ),
    input_schema=js.obj({"key": KEY_SCHEMA}, required=("key",)),
    scope="write",
    read_only=False,
    destructive=True,
    idempotent=True,
    handler=memory_delete,
)


class UnsupersedeArguments(KeyArgument, UnsupersedeInputSerializer):
    pass


def memory_unsupersede(call: ToolCall) -> dict[str, Any]:
    data = validated(UnsupersedeArguments, call.arguments)
    memory = writes.unsupersede_memory(
        team=call.team, key=data["key"], reason=data["reason"], updated_by=call.actor
    )
    replaced = [] if memory.is_active else [memory.id]
    context = {
        "successors": selectors.successors_of(team_id=call.team.id, memory_ids=replaced),
        "annotations": selectors.annotations_for(call.team.id, [memory.id]),
    }
    return dict(MemoryDetailOutputSerializer(memory, context=context).data)


UNSUPERSEDE = Tool(
    name="memory_unsupersede",
    title="Restore the previous version",
    description=(
        "Undo the last change of a key: the version the active entry replaced becomes active "
        "again, as a new version with your reason (history is never rewritten). Returns the "
        "restored entry. Errors: not_found, no_previous_version (nothing to go back to), conflict, "
        "skill_exists, invalid, forbidden."
    ),
    input_schema=js.obj(
        {
            "key": KEY_SCHEMA,
            "reason": js.string(
                "Why the previous version is right after all.", max_length=MAX_REASON_LENGTH, min_length=1
            ),
        },
        required=("key", "reason"),
    ),
    scope="write",
    read_only=False,
    destructive=False,
    idempotent=False,
    handler=memory_unsupersede,
)


class RateArguments(KeyArgument, RateInputSerializer):
    pass


def memory_rate(call: ToolCall) -> dict[str, Any]:
    data = validated(RateArguments, call.arguments)
    memory = feedback.rate_memory(
        team=call.team, key=data["key"], direction=data["direction"], rated_by=call.actor
    )
    return dict(MemoryOutputSerializer(memory).data)


RATE = Tool(
    name="memory_rate",
    title="Rate a memory",
    description=(
        "Vote a memory up when it helped, down when it misled; the net `rating` nudges it up or "
        "down in search. Each call is one more vote. Errors: not_found, invalid, forbidden."
    ),
    input_schema=js.obj(
        {"key": KEY_SCHEMA, "direction": {"type": "string", "enum": ["up", "down"]}},
        required=("key", "direction"),
    ),
    scope="write",
    read_only=False,
    destructive=False,
    idempotent=False,
    handler=memory_rate,
)


class AnnotateArguments(KeyArgument, AnnotationInputSerializer):
    pass


def memory_annotate(call: ToolCall) -> dict[str, Any]:
    data = validated(AnnotateArguments, call.arguments)
    result = feedback.annotate_memory(
        team=call.team, key=data["key"], note=data["note"], created_by=call.actor
    )
    annotation = result.annotation
    annotation.redactions = result.redactions  # type: ignore[attr-defined]
    return dict(AnnotationCreatedOutputSerializer(annotation).data)


ANNOTATE = Tool(
    name="memory_annotate",
    title="Add a note to a memory",
    description=(
        "Add a short note to the active entry of a key (a caveat, where it applied, a link) "
        "without changing its text; every version of the key shows its notes. Errors: not_found, "
        "invalid, forbidden."
    ),
    input_schema=js.obj(
        {
            "key": KEY_SCHEMA,
            "note": js.string("1-2000 characters.", max_length=MAX_NOTE_LENGTH, min_length=1),
        },
        required=("key", "note"),
    ),
    scope="write",
    read_only=False,
    destructive=False,
    idempotent=False,
    handler=memory_annotate,
)


# --- memory_context ----------------------------------------------------------


class ContextArguments(StrictInputSerializer):
    """The injection API's parameters, as JSON values rather than query strings."""

    project = StrictCharField(
        required=False, allow_blank=True, max_length=injection.MAX_PROJECT_CHARS, trim_whitespace=False
    )
    query = StrictCharField(required=False, max_length=MAX_QUERY_CHARS)
    max_entries = StrictIntegerField(required=False, min_value=1, max_value=injection.MAX_ENTRIES_LIMIT)
    max_tokens = StrictIntegerField(
        required=False, min_value=injection.MIN_TOKENS, max_value=injection.MAX_TOKENS
    )
    format = serializers.ChoiceField(choices=["markdown", "json"], default="markdown")


def memory_context(call: ToolCall) -> dict[str, Any]:
    data = validated(ContextArguments, call.arguments)
    result = injection.build_injection(
        team=call.team,
        project=data.get("project"),
        query=data.get("query"),
        max_entries=data.get("max_entries"),
        max_tokens=data.get("max_tokens"),
    )
    return dict(injection_payload(result, data["format"]))


CONTEXT = Tool(
    name="memory_context",
    title="What to know now",
    description=(
        "The team's memory block to put in your context at the start of a task: every identity "
        "entry, always-on skills, lessons, then decisions, then context, each newest first, within a "
        "token budget (markdown in `text`), ending with up to 3 nudges to review. Give `project` for "
        "that project's and team-wide "
        f"entries, and `query` to add the {RELEVANT_MAX} most relevant search results. "
        "`format: json` also lists what was left out and why. Errors: invalid."
    ),
    input_schema=js.obj(
        {
            "project": js.string(
                "Entries of this project and team-wide ones.", max_length=injection.MAX_PROJECT_CHARS
            ),
            "query": js.string(
                "Adds a 'relevant' section for this.", max_length=MAX_QUERY_CHARS, min_length=1
            ),
            "max_entries": js.integer(
                "Entry cap (default: the team's).", minimum=1, maximum=injection.MAX_ENTRIES_LIMIT
            ),
            "max_tokens": js.integer(
                "Token budget (default: the team's, 2,000).",
                minimum=injection.MIN_TOKENS,
                maximum=injection.MAX_TOKENS,
            ),
            "format": {"type": "string", "enum": ["markdown", "json"]},
        }
    ),
    scope="read",
    read_only=True,
    destructive=False,
    idempotent=True,
    handler=memory_context,
    replica_reads=True,
)


# --- sessions ----------------------------------------------------------------


def session_boot(call: ToolCall) -> dict[str, Any]:
    data = validated(AgentSessionBootInputSerializer, call.arguments)
    booted = sessions.boot_session(team=call.team, token=call.token, agent=call.token.name, **data)
    body = {
        "session": booted.session,
        "other_sessions": booted.others,
        "expired_sessions": booted.expired,
        "injection": _injection_text(call.team, booted.session.project),
    }
    return dict(AgentSessionBootOutputSerializer(body).data)


def _injection_text(team: Team, project: str) -> str | None:
    """As a REST boot: the block for the session's project, or None if it failed."""
    try:
        with transaction.atomic():  # a savepoint: a failed read leaves the boot intact
            return injection.build_injection(team=team, project=project).text
    except Exception:
        logger.exception("team %s: injection block for a session boot failed", team.slug)
        return None


BOOT = Tool(
    name="session_boot",
    title="Start a session",
    description=(
        "Register this agent session at the start of work, so other agents see who is working on "
        "what. Returns the session (keep `session.id` for session_heartbeat and session_end), the "
        "other live sessions of the same project and the memory block for the project in "
        "`injection`. Errors: invalid, quota_exceeded, forbidden."
    ),
    input_schema=js.obj(
        {
            "source": js.string("The client, e.g. claude-code.", max_length=64),
            "project": js.string("The project worked on.", max_length=PROJECT_LENGTH),
            "cwd": js.string("The working directory.", max_length=1024),
            "pid": js.nullable(js.integer("The agent's process id.", minimum=0, maximum=2**31 - 1)),
            "host": js.string("The machine.", max_length=255),
            "current_task": js.string("What the agent is doing.", max_length=1000),
        }
    ),
    scope="write",
    read_only=False,
    destructive=False,
    idempotent=False,
    handler=session_boot,
)


class SessionArgument(StrictInputSerializer):
    session_id = StrictUUIDField()


class HeartbeatArguments(SessionArgument, AgentSessionUpdateInputSerializer):
    pass


SESSION_ID_SCHEMA = js.string("The id session_boot returned.", max_length=36, format="uuid")


def session_heartbeat(call: ToolCall) -> dict[str, Any]:
    data = validated(HeartbeatArguments, call.arguments)
    session_id = data.pop("session_id")
    session = sessions.update_session(team=call.team, session_id=session_id, **data)
    return dict(AgentSessionOutputSerializer(session).data)


HEARTBEAT = Tool(
    name="session_heartbeat",
    title="Keep a session live",
    description=(
        "Say this session is still working, now and then during long work (sessions without a "
        "heartbeat within the TTL stop being listed as live); optionally change its current task "
        "or project. Errors: not_found, session_ended (boot a new one), invalid, forbidden."
    ),
    input_schema=js.obj(
        {
            "session_id": SESSION_ID_SCHEMA,
            "current_task": js.string("What the agent is doing now.", max_length=1000),
            "project": js.string("The project worked on now.", max_length=PROJECT_LENGTH),
        },
        required=("session_id",),
    ),
    scope="write",
    read_only=False,
    destructive=False,
    idempotent=True,
    handler=session_heartbeat,
)


def session_end(call: ToolCall) -> dict[str, Any]:
    session_id = validated(SessionArgument, call.arguments)["session_id"]
    session = sessions.end_session(team=call.team, session_id=session_id)
    return dict(AgentSessionOutputSerializer(session).data)


END = Tool(
    name="session_end",
    title="End a session",
    description=(
        "End this agent session when the work is done. Ending one that already ended changes "
        "nothing. Errors: not_found, invalid, forbidden."
    ),
    input_schema=js.obj({"session_id": SESSION_ID_SCHEMA}, required=("session_id",)),
    scope="write",
    read_only=False,
    destructive=False,
    idempotent=True,
    handler=session_end,
)


# --- learnings, skills, vault --------------------------------------------------


def learning_record(call: ToolCall) -> dict[str, Any]:
    data = validated(LearningInputSerializer, call.arguments)
    result = learnings.record_learning(
        team=call.team,
        topic=data["topic"],
        claim=data["claim"],
        confidence=data["confidence"],
        corroborated=data["corroborated"],
        domains=data["domains"],
        verified=data["verified"],
        type_name=data["type"],
        updated_by=call.actor,
    )
    return {**saved_payload(result.saved), "outcome": result.outcome}


LEARNING = Tool(
    name="learning_record",
    title="Record a learning",
    description=(
        "Record one thing learned (a claim about a topic) with how sure you are. The same claim "
        "about the same topic is the same learning: recording it again with another confidence, "
        "corroboration or verification makes a new version with the change as its reason, and an "
        "identical one changes nothing (`outcome`: created, superseded or unchanged). "
        "Errors: invalid, conflict (busy; retry), forbidden."
    ),
    input_schema=js.obj(
        {
            "topic": js.string(
                "What the claim is about, e.g. deploys.", max_length=learnings.MAX_TOPIC_CHARS, min_length=1
            ),
            "claim": js.string("One statement.", max_length=learnings.MAX_CLAIM_CHARS, min_length=1),
            "confidence": {"type": "string", "enum": list(learnings.Confidence.values)},
            "corroborated": js.boolean("Confirmed by a second source."),
            "domains": js.string_list(
                "Short labels of areas, e.g. ci.",
                max_items=learnings.MAX_DOMAINS,
                max_length=learnings.MAX_DOMAIN_CHARS,
            ),
            "verified": js.boolean("Checked against reality, e.g. by a test."),
            "type": {"type": "string", "enum": list(learnings.LEARNING_TYPES)},
        },
        required=("topic", "claim", "confidence"),
    ),
    scope="write",
    read_only=False,
    destructive=False,
    idempotent=True,
    handler=learning_record,
)


class SkillArguments(StrictInputSerializer):
    name = StrictRegexField(skills.SKILL_NAME_PATTERN, max_length=63)


def skill_get(call: ToolCall) -> dict[str, Any]:
    name = validated(SkillArguments, call.arguments)["name"]
    memory = skills.get_skill(team=call.team, name=name)
    memory.last_accessed_at = feedback.record_access(team=call.team, memory_ids=[memory.id])
    memory.access_count += 1
    context = {"annotations": selectors.annotations_for(call.team.id, [memory.id])}
    return dict(MemoryDetailOutputSerializer(memory, context=context).data)


SKILL = Tool(
    name="skill_get",
    title="Load a skill",
    description=(
        "Load a skill (a memory with a skill trigger) by its name, e.g. when a search result is "
        "marked `via_skill_trigger` or the injection block names it. Returns the entry in full. "
        "Errors: not_found, invalid."
    ),
    input_schema=js.obj(
        {"name": js.string("The skill's name.", max_length=63, pattern=skills.SKILL_NAME_PATTERN)},
        required=("name",),
    ),
    scope="read",
    read_only=True,
    destructive=False,
    idempotent=True,
    handler=skill_get,
)


class VaultArguments(KeyArgument, VaultEntryInputSerializer):
    pass


def vault_set(call: ToolCall) -> dict[str, Any]:
    data = validated(VaultArguments, call.arguments)
    entry, created = team_services.set_vault_entry(
        team=call.team,
        key=data["key"],
        value=data["value"],
        is_secret=data["is_secret"],
        actor=call.actor,
        may_change_secrets=True,  # the tool needs the admin scope
    )
    # Write-only: the vault is never readable over MCP, not even the value just set.
    return {
        "key": entry.key,
        "is_secret": entry.is_secret,
        "created": created,
        "updated_by": entry.updated_by,
        "updated_at": entry.updated_at.isoformat(),
    }


VAULT = Tool(
    name="vault_set",
    title="Set a vault entry",
    description=(
        "Store a team configuration value or secret (admin tokens only). A secret is encrypted and "
        "redacted from every answer the team gets; the vault cannot be read over MCP. Errors: "
        "invalid (a weak secret), quota_exceeded, forbidden."
    ),
    input_schema=js.obj(
        {
            "key": KEY_SCHEMA,
            "value": js.string("The value.", max_length=MAX_VAULT_VALUE_LENGTH, min_length=1),
            "is_secret": js.boolean("Encrypt it and redact it everywhere (at least 8 characters)."),
        },
        required=("key", "value"),
    ),
    scope="admin",
    read_only=False,
    destructive=True,
    idempotent=True,
    handler=vault_set,
)


# --- memory_confirm / memory_nudges / nudge_resolve (freshness) -------------------


class ConfirmArguments(KeyArgument, ConfirmInputSerializer):
    pass


def memory_confirm(call: ToolCall) -> dict[str, Any]:
    data = validated(ConfirmArguments, call.arguments)
    result = writes.confirm_memory(
        team=call.team, key=data["key"], confirmed_by=call.actor, note=data.get("note")
    )
    return memory_detail(call.team, result.memory)


CONFIRM = Tool(
    name="memory_confirm",
    title="Confirm a memory is still true",
    description=(
        "Say the active entry of a key is still true, after checking it (optionally with a note on "
        "how). It is then fresh again: no new version, the confirmation joins the key's history, and "
        "its due and broken-anchor nudges close. If it is no longer true, save the new truth with "
        "memory_save and a supersede_reason instead. Returns the entry. Errors: not_found, invalid."
    ),
    input_schema=js.obj(
        {
            "key": KEY_SCHEMA,
            "note": js.string("How it was checked (0-2000 characters).", max_length=MAX_NOTE_LENGTH),
        },
        required=("key",),
    ),
    scope="write",
    read_only=False,
    destructive=False,
    idempotent=False,
    handler=memory_confirm,
)


class NudgesArguments(StrictInputSerializer, NudgeListQuerySerializer, PageArguments):
    pass


def memory_nudges(call: ToolCall) -> dict[str, Any]:
    data = validated(NudgesArguments, call.arguments)
    rows = freshness_selectors.list_nudges(team=call.team, kind=data.get("kind"), state=data["state"])
    page, next_cursor = paginate(NudgePagination, rows, limit=data["limit"], cursor=data.get("cursor"))
    results = NudgeOutputSerializer(page, many=True, context={"team_slug": call.team.slug}).data
    return {"results": results, "next_cursor": next_cursor}


NUDGES = Tool(
    name="memory_nudges",
    title="What the team is asked to review",
    description=(
        "The team's open nudges, newest first: entries due for confirmation, broken anchors, "
        "contradictions between two entries, and archive proposals. Each names its keys, says what "
        "to do and gives its id for nudge_resolve. Check them at the start of a session and resolve "
        "the ones you can verify. Errors: invalid."
    ),
    input_schema=js.obj(
        {
            "kind": {"enum": list(NudgeKind.values), "description": "Only nudges of this kind."},
            "state": {
                "enum": list(freshness_selectors.STATE_FILTER_CHOICES),
                "description": "open (the default), or another state; `all` for every state.",
            },
            **page_schema("nudges"),
        }
    ),
    scope="read",
    read_only=True,
    destructive=False,
    idempotent=True,
    handler=memory_nudges,
)


class NudgeResolveArguments(StrictInputSerializer, NudgeResolveInputSerializer):
    nudge_id = StrictUUIDField()


def nudge_resolve(call: ToolCall) -> dict[str, Any]:
    data = validated(NudgeResolveArguments, call.arguments)
    nudge = freshness_services.resolve_nudge(
        team=call.team, nudge_id=data["nudge_id"], action=data["action"], actor=call.actor
    )
    return dict(NudgeOutputSerializer(nudge, context={"team_slug": call.team.slug}).data)


RESOLVE = Tool(
    name="nudge_resolve",
    title="Resolve a nudge",
    description=(
        "Close a nudge of memory_nudges in one call. `confirm`: the entry (both entries of a "
        "contradiction, as compatible) is still true; `dismiss`: close it, changing nothing; "
        "`supersede` (a contradiction): keep the newer entry and archive the older; `archive` (a "
        "prune proposal): archive the entry, which stays in history and can be restored. Returns the "
        "nudge. Errors: not_found, action_not_applicable, nudge_closed, invalid."
    ),
    input_schema=js.obj(
        {
            "nudge_id": js.string("The nudge's id, as memory_nudges gives it.", max_length=64, format="uuid"),
            "action": {"enum": list(NudgeAction.values), "description": "What to do; see the description."},
        },
        required=("nudge_id", "action"),
    ),
    scope="write",
    read_only=False,
    destructive=True,
    idempotent=False,
    handler=nudge_resolve,
)


# --- drafts_extract / drafts_list / draft_review (freshness drafts) ----------------


class DraftsExtractArguments(DraftExtractInputSerializer):
    pass


def drafts_extract(call: ToolCall) -> dict[str, Any]:
    data = validated(DraftsExtractArguments, call.arguments)
    made = freshness_drafts.extract_drafts(
        team=call.team,
        transcript=data["transcript"],
        actor=call.actor,
        source_session=data.get("source_session", ""),
    )
    return {"drafts": DraftOutputSerializer(made, many=True, context={"team_slug": call.team.slug}).data}


DRAFTS_EXTRACT = Tool(
    name="drafts_extract",
    title="Propose memories from a transcript",
    description=(
        "Give a session transcript or notes; at most 15 candidate memories (decisions, lessons, "
        "always/never rules, switches, TODOs) come back as pending drafts for a person to review. "
        "Credentials, the team's secrets, PII and code blocks are removed before any extractor reads "
        "it. Each draft says whether it duplicates or contradicts an entry. Text already pending is "
        "not drafted again. Errors: invalid, extractor_unavailable, extractor_bad_answer."
    ),
    input_schema=js.obj(
        {
            "transcript": js.string(
                "The transcript or notes.", max_length=settings.MAX_REQUEST_BODY_BYTES, min_length=1
            ),
            "source_session": js.string(
                "Where it came from: the session's id or a label.",
                max_length=freshness_drafts.MAX_SOURCE_SESSION_CHARS,
            ),
        },
        required=("transcript",),
    ),
    scope="write",
    read_only=False,
    destructive=False,
    idempotent=True,
    handler=drafts_extract,
)


class DraftsListArguments(StrictInputSerializer, DraftListQuerySerializer, PageArguments):
    pass


def drafts_list(call: ToolCall) -> dict[str, Any]:
    data = validated(DraftsListArguments, call.arguments)
    rows = freshness_drafts.list_drafts(team=call.team, state=data["state"])
    page, next_cursor = paginate(DraftPagination, rows, limit=data["limit"], cursor=data.get("cursor"))
    results = DraftOutputSerializer(page, many=True, context={"team_slug": call.team.slug}).data
    return {"results": results, "next_cursor": next_cursor}


DRAFTS_LIST = Tool(
    name="drafts_list",
    title="Drafts waiting for review",
    description=(
        "The team's extraction drafts, newest first: pending ones unless `state` says otherwise. "
        "Each has its type, key, content, why it was proposed, the transcript excerpt it came from "
        "and its conflict with an existing entry, and an id for draft_review. Errors: invalid."
    ),
    input_schema=js.obj(
        {
            "state": {
                "enum": list(freshness_drafts.STATE_FILTER_CHOICES),
                "description": "pending (the default), or another state; `all` for every state.",
            },
            **page_schema("drafts"),
        }
    ),
    scope="read",
    read_only=True,
    destructive=False,
    idempotent=True,
    handler=drafts_list,
)

DRAFT_REVIEW_ACTIONS = ("accept", "reject", "merge")


class DraftReviewArguments(DraftAcceptInputSerializer, DraftMergeInputSerializer):
    draft_id = StrictUUIDField()
    action = serializers.ChoiceField(choices=DRAFT_REVIEW_ACTIONS)
    into_key = StrictRegexField(KEY_PATTERN, required=False, max_length=KEY_LENGTH)


def draft_review(call: ToolCall) -> dict[str, Any]:
    data = validated(DraftReviewArguments, call.arguments)
    team, draft_id, actor = call.team, data["draft_id"], call.actor
    if data["action"] == "accept":
        draft = freshness_drafts.accept_draft(
            team=team,
            draft_id=draft_id,
            actor=actor,
            type=data.get("type"),
            key=data.get("key"),
            content=data.get("content"),
        )
    elif data["action"] == "reject":
        draft = freshness_drafts.reject_draft(team=team, draft_id=draft_id, actor=actor)
    else:
        if not data.get("into_key"):
            raise InvalidInput("merge needs into_key: the key of the entry to merge into", field="into_key")
        draft = freshness_drafts.merge_draft(
            team=team, draft_id=draft_id, actor=actor, into_key=data["into_key"], content=data.get("content")
        )
    return dict(DraftOutputSerializer(draft, context={"team_slug": call.team.slug}).data)


DRAFT_REVIEW = Tool(
    name="draft_review",
    title="Accept, reject or merge a draft",
    description=(
        "Review a pending draft of drafts_list. `accept` stores it as a new entry (optionally with an "
        "edited type, key or content) recording where it came from; `reject` drops it; `merge` "
        "supersedes the active entry of `into_key` with the merged text (by default the entry's text "
        "then the draft's). Returns the draft. Errors: not_found, draft_not_pending, "
        "draft_key_exists (merge instead), draft_duplicate, invalid."
    ),
    input_schema=js.obj(
        {
            "draft_id": js.string("The draft's id, as drafts_list gives it.", max_length=64, format="uuid"),
            "action": {"enum": list(DRAFT_REVIEW_ACTIONS), "description": "What to do; see the description."},
            "type": js.string("accept: store it as this type instead.", max_length=32),
            "key": {**KEY_SCHEMA, "description": "accept: store it under this key instead."},
            "content": js.string(
                "accept: the edited text; merge: the merged text.", max_length=MAX_CONTENT_BYTES
            ),
            "into_key": {**KEY_SCHEMA, "description": "merge: the key of the active entry to merge into."},
        },
        required=("draft_id", "action"),
    ),
    scope="write",
    read_only=False,
    destructive=True,
    idempotent=False,
    handler=draft_review,
)


TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in (
        SAVE,
        SAVE_BATCH,
        SEARCH,
        GET,
        LIST,
        HISTORY,
        DELETE,
        CONTEXT,
        BOOT,
        HEARTBEAT,
        END,
        UNSUPERSEDE,
        RATE,
        ANNOTATE,
        LEARNING,
        SKILL,
        VAULT,
        CONFIRM,
        NUDGES,
        RESOLVE,
        DRAFTS_EXTRACT,
        DRAFTS_LIST,
        DRAFT_REVIEW,
    )
}
