"""The tools over the memory resource: save (one or a batch), read (get, list, history)
and the changes of an entry without a new text (delete, unsupersede, rate, annotate,
confirm). Each parses with the REST endpoint's input serializer (or one made of it),
maps it with the same use case, and answers with the same output serializers."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from agents.mcp.tools.base import KeyArgument, PageArguments, Tool, ToolCall, page_of
from memories import feedback, selectors, use_cases, writes
from memories.api import HistoryPagination, MemoryPagination, batch_payload
from memories.inputs import (
    AS_OF_HELP,
    FROM_LINE_HELP,
    LINES_HELP,
    MAX_LINES,
    AnnotationInputSerializer,
    AwareDateTimeField,
    ConfirmInputSerializer,
    KeylessSaveInputSerializer,
    MemoryListQuerySerializer,
    RateInputSerializer,
    StrictUUIDField,
    UnsupersedeInputSerializer,
    batch_entries_field,
    key_field,
)
from memories.serializers import (
    AnnotationCreatedOutputSerializer,
    MemoryHistoryOutputSerializer,
    MemoryOutputSerializer,
    detail_payload,
    duplicate_payload,
    line_slice,
    saved_payload,
)
from memories.writes import MAX_BATCH_ENTRIES
from teams.serializers import StrictInputSerializer, StrictIntegerField

# --- memory_save / memory_save_batch -------------------------------------------


def memory_save(call: ToolCall, payload: KeylessSaveInputSerializer) -> dict[str, Any]:
    result = use_cases.save_entry(team=call.team, arguments=payload.to_arguments(), updated_by=call.actor)
    if not result.saved:
        return dict(duplicate_payload(result))
    return {"saved": True, **saved_payload(result)}


SAVE = Tool(
    name="memory_save",
    title="Save a memory",
    description=(
        "Save something the team should remember: a fact, decision, lesson or context, in plain "
        "text (credentials are redacted); `key` may be left out. Saving to a key that "
        "already has an active entry needs `supersede_reason` (the old version stays in history); "
        "without it the call fails with `conflict` and the current entry in `current`. A text that "
        "an active entry already holds is not saved again: the answer has `saved: false` and "
        "`duplicate_of`. Returns the saved version (`saved: true`) with a type `hint` when the "
        "text reads like another type. Errors: invalid, unknown_type, content_too_large, conflict, "
        "stale_version (with `expected_version`), skill_exists, quota_exceeded, forbidden."
    ),
    arguments=KeylessSaveInputSerializer,
    scope="write",
    read_only=False,
    destructive=False,
    idempotent=False,
    handler=memory_save,
)


class SaveBatchArguments(StrictInputSerializer):
    entries = batch_entries_field(KeylessSaveInputSerializer, max_entries=MAX_BATCH_ENTRIES)


def memory_save_batch(call: ToolCall, payload: SaveBatchArguments) -> dict[str, Any]:
    return batch_payload(
        team=call.team,
        raw_entries=payload.validated_data["entries"],
        updated_by=call.actor,
        entry_serializer=KeylessSaveInputSerializer,
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
        "is an error of its second entry. A near duplicate becomes a soft supersede after indexing "
        "(the longer text stays). Errors of the whole call: invalid, forbidden."
    ),
    arguments=SaveBatchArguments,
    scope="write",
    read_only=False,
    destructive=False,
    idempotent=True,
    handler=memory_save_batch,
)


# --- memory_get ------------------------------------------------------------------


class GetArguments(StrictInputSerializer):
    key = key_field(required=False)
    version_id = StrictUUIDField(required=False, help_text="One version's id.")
    as_of = AwareDateTimeField(required=False, help_text=AS_OF_HELP)
    from_line = StrictIntegerField(min_value=1, max_value=MAX_LINES, default=1, help_text=FROM_LINE_HELP)
    lines = StrictIntegerField(min_value=1, max_value=MAX_LINES, required=False, help_text=LINES_HELP)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "key" not in attrs and "version_id" not in attrs:
            raise serializers.ValidationError("give a key or a version_id")
        if "as_of" in attrs and "version_id" in attrs:
            raise serializers.ValidationError(
                "as_of reads a key as it was; a version_id is one version already"
            )
        return attrs


def memory_get(call: ToolCall, payload: GetArguments) -> dict[str, Any]:
    data = payload.validated_data
    as_of = data.get("as_of")
    memory = use_cases.read_entry(
        team=call.team, key=data.get("key"), version_id=data.get("version_id"), as_of=as_of
    )
    body = detail_payload(team=call.team, memory=memory, as_of=as_of)
    return line_slice(body, from_line=data["from_line"], count=data.get("lines"))


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
    arguments=GetArguments,
    scope="read",
    read_only=True,
    destructive=False,
    idempotent=True,
    handler=memory_get,
)


# --- memory_list / memory_history ------------------------------------------------


class ListArguments(StrictInputSerializer, MemoryListQuerySerializer, PageArguments):
    pass


def memory_list(call: ToolCall, payload: ListArguments) -> dict[str, Any]:
    rows = selectors.list_memories(team=call.team, **payload.to_arguments())
    page, next_cursor = page_of(MemoryPagination, rows, payload)
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
    arguments=ListArguments,
    scope="read",
    read_only=True,
    destructive=False,
    idempotent=True,
    handler=memory_list,
    replica_reads=True,
)


class HistoryArguments(KeyArgument, PageArguments):
    pass


def memory_history(call: ToolCall, payload: HistoryArguments) -> dict[str, Any]:
    key = payload.validated_data["key"]
    versions = selectors.list_memory_versions(team=call.team, key=key)
    page, next_cursor = page_of(HistoryPagination, versions, payload)
    events, successors = selectors.history_page(team_id=call.team.id, versions=page)
    body = {"key": key, "history": events, "next": None, "previous": None}
    rendered = dict(MemoryHistoryOutputSerializer(body, context={"successors": successors}).data)
    rendered.pop("next")
    rendered.pop("previous")
    return {**rendered, "next_cursor": next_cursor}


HISTORY = Tool(
    name="memory_history",
    title="History of a key",
    description=(
        "Every version of a key, newest first: created, superseded (with the reason), "
        "unsuperseded, deleted and confirmed events, a page of versions at a time (`next_cursor`). "
        "Use it to see why the team changed its mind. Errors: not_found (nothing was ever saved under "
        "the key), invalid."
    ),
    arguments=HistoryArguments,
    scope="read",
    read_only=True,
    destructive=False,
    idempotent=True,
    handler=memory_history,
    replica_reads=True,
)


# --- memory_delete / memory_unsupersede / memory_rate / memory_annotate / memory_confirm


def memory_delete(call: ToolCall, payload: KeyArgument) -> dict[str, Any]:
    key = payload.validated_data["key"]
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
    arguments=KeyArgument,
    scope="write",
    read_only=False,
    destructive=True,
    idempotent=True,
    handler=memory_delete,
)


class UnsupersedeArguments(KeyArgument, UnsupersedeInputSerializer):
    pass


def memory_unsupersede(call: ToolCall, payload: UnsupersedeArguments) -> dict[str, Any]:
    data = payload.validated_data
    memory = writes.unsupersede_memory(
        team=call.team, key=data["key"], reason=data["reason"], updated_by=call.actor
    )
    return detail_payload(team=call.team, memory=memory)


UNSUPERSEDE = Tool(
    name="memory_unsupersede",
    title="Restore the previous version",
    description=(
        "Undo the last change of a key: the version the active entry replaced becomes active "
        "again, as a new version with your reason (history is never rewritten). Returns the "
        "restored entry. Errors: not_found, no_previous_version (nothing to go back to), conflict, "
        "skill_exists, invalid, forbidden."
    ),
    arguments=UnsupersedeArguments,
    scope="write",
    read_only=False,
    destructive=False,
    idempotent=False,
    handler=memory_unsupersede,
)


class RateArguments(KeyArgument, RateInputSerializer):
    pass


def memory_rate(call: ToolCall, payload: RateArguments) -> dict[str, Any]:
    data = payload.validated_data
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
    arguments=RateArguments,
    scope="write",
    read_only=False,
    destructive=False,
    idempotent=False,
    handler=memory_rate,
)


class AnnotateArguments(KeyArgument, AnnotationInputSerializer):
    pass


def memory_annotate(call: ToolCall, payload: AnnotateArguments) -> dict[str, Any]:
    data = payload.validated_data
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
    arguments=AnnotateArguments,
    scope="write",
    read_only=False,
    destructive=False,
    idempotent=False,
    handler=memory_annotate,
)


class ConfirmArguments(KeyArgument, ConfirmInputSerializer):
    pass


def memory_confirm(call: ToolCall, payload: ConfirmArguments) -> dict[str, Any]:
    data = payload.validated_data
    result = writes.confirm_memory(
        team=call.team, key=data["key"], confirmed_by=call.actor, note=data.get("note")
    )
    return detail_payload(team=call.team, memory=result.memory)


CONFIRM = Tool(
    name="memory_confirm",
    title="Confirm a memory is still true",
    description=(
        "Say the active entry of a key is still true, after checking it (optionally with a note on "
        "how). It is then fresh again: no new version, the confirmation joins the key's history, and "
        "its due and broken-anchor nudges close. If it is no longer true, save the new truth with "
        "memory_save and a supersede_reason instead. Returns the entry. Errors: not_found, invalid."
    ),
    arguments=ConfirmArguments,
    scope="write",
    read_only=False,
    destructive=False,
    idempotent=False,
    handler=memory_confirm,
)

TOOLS = (SAVE, SAVE_BATCH, GET, LIST, HISTORY, DELETE, UNSUPERSEDE, RATE, ANNOTATE, CONFIRM)
