"""The tools over the memory resource: save (one or a batch), read (get, list, history)
and the changes of an entry without a new text (delete, unsupersede, rate, annotate,
confirm). Each parses with the REST endpoint's input serializer (or one made of it),
maps it with the same use case, and answers with the same output serializers."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rest_framework import serializers

from agents.mcp.tools.base import KeyArgument, PageArguments, Tool, ToolCall, page_of, with_fields
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
    entry_payload,
    line_slice,
    saved_payload,
)
from memories.writes import MAX_BATCH_ENTRIES
from teams.serializers import StrictBooleanField, StrictInputSerializer, StrictIntegerField

# --- memory_save / memory_save_batch -------------------------------------------

# What a save answers unless the agent asks for the whole entry: enough to name the new
# version (and what it replaced, a type hint, redactions), a few hundred bytes of a
# model's context instead of the whole entry it has just written.
BRIEF_SAVE_FIELDS = (
    "id",
    "key",
    "type",
    "supersedes_id",
    "hint",
    "vault_hint",
    "redactions",
    "replaced_duplicate",
)


class SaveToolArguments(KeylessSaveInputSerializer):
    return_entry = StrictBooleanField(
        default=False, help_text="Answer the whole saved entry, not only its id, key and type."
    )


def memory_save(call: ToolCall, payload: SaveToolArguments) -> dict[str, Any]:
    result = use_cases.save_entry(team=call.team, arguments=payload.to_arguments(), updated_by=call.actor)
    whole = payload.validated_data.get("return_entry", False)
    if not result.saved:
        refused = dict(duplicate_payload(result))
        return refused if whole else _brief_refusal(refused)
    saved = {"saved": True, **saved_payload(result)}
    return saved if whole else _brief(saved)


def _brief(saved: dict[str, Any]) -> dict[str, Any]:
    """The saved version's id, key and type, and of the rest only what is set."""
    brief = {"saved": True, **{name: saved[name] for name in BRIEF_SAVE_FIELDS if saved.get(name)}}
    if "replaced_duplicate" in brief:
        brief["replaced_duplicate"] = _named(brief["replaced_duplicate"])
    return brief


def _brief_refusal(refused: dict[str, Any]) -> dict[str, Any]:
    """A duplicate refused: why and what to do (the detail) and which entry holds the text."""
    brief = {name: refused[name] for name in ("saved", "detail")}
    brief["duplicate_of"] = _named(refused["duplicate_of"])
    if refused.get("redactions"):
        brief["redactions"] = refused["redactions"]
    return brief


def _named(entry: dict[str, Any]) -> dict[str, Any]:
    return {"id": entry["id"], "key": entry["key"]}


SAVE = Tool(
    name="memory_save",
    title="Save a memory",
    description=(
        "Save what the team should remember (a decision, lesson, fact or context) as soon as you "
        "learn or decide it. To change a key that has an active entry, give `supersede_reason`; "
        "without it: `conflict` with the current entry. Answers the new version's id and key."
    ),
    arguments=SaveToolArguments,
    scope="write",
    read_only=False,
    destructive=False,
    idempotent=False,
    handler=memory_save,
)
# The core list's save: what an agent sends in most sessions. Skills, anchors and
# expected_version are on the full list (`/mcp/full/`).
CORE_SAVE = replace(
    SAVE,
    arguments=with_fields(
        SaveToolArguments,
        "CoreSaveToolArguments",
        (
            "key",
            "content",
            "type",
            "supersede_reason",
            "project",
            "metadata",
            "allow_duplicate",
            "return_entry",
        ),
    ),
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
        "Read one memory in full when a search snippet is not enough: a key's active entry, or a "
        "version by `version_id` (from search or history). Page a long text with `from_line` and `lines`."
    ),
    arguments=GetArguments,
    scope="read",
    read_only=True,
    destructive=False,
    idempotent=True,
    handler=memory_get,
)
CORE_GET = replace(
    GET, arguments=with_fields(GetArguments, "CoreGetArguments", ("key", "version_id", "from_line", "lines"))
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
        "Browse the team's active memories, newest first, a page at a time (`next_cursor`), by "
        "type, project or tag. To find something specific, use memory_search."
    ),
    arguments=ListArguments,
    scope="read",
    read_only=True,
    destructive=False,
    idempotent=True,
    handler=memory_list,
    replica_reads=True,
)
CORE_LIST = replace(
    LIST,
    arguments=with_fields(ListArguments, "CoreListArguments", ("type", "project", "tags", "limit", "cursor")),
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
        "Every version of a key, newest first, with the reason for each change: use it to learn "
        "why the team changed its mind before you change it again."
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
    return entry_payload(memory)


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
CORE_TOOLS = (CORE_SAVE, CORE_GET, CORE_LIST, HISTORY)
