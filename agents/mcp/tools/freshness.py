"""The tools that keep beliefs true: nudges (list, resolve) and extraction drafts
(extract, list, review)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from agents.mcp.tools.base import PageArguments, Tool, ToolCall, page_of
from core.errors import InvalidInput
from freshness import drafts, selectors, services
from freshness.api import (
    NudgeListQuerySerializer,
    NudgeOutputSerializer,
    NudgePagination,
    NudgeResolveInputSerializer,
)
from freshness.api_drafts import (
    INTO_KEY_HELP,
    DraftAcceptInputSerializer,
    DraftExtractInputSerializer,
    DraftListQuerySerializer,
    DraftMergeInputSerializer,
    DraftOutputSerializer,
    DraftPagination,
    extraction_payload,
)
from memories.inputs import StrictUUIDField, key_field
from teams.serializers import StrictInputSerializer

# --- memory_nudges / nudge_resolve ---------------------------------------------------


class NudgesArguments(StrictInputSerializer, NudgeListQuerySerializer, PageArguments):
    pass


def memory_nudges(call: ToolCall, payload: NudgesArguments) -> dict[str, Any]:
    data = payload.validated_data
    rows = selectors.list_nudges(team=call.team, kind=data.get("kind"), state=data["state"])
    page, next_cursor = page_of(NudgePagination, rows, payload)
    results = NudgeOutputSerializer(page, many=True, context=_nudge_context(call)).data
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
    arguments=NudgesArguments,
    scope="read",
    read_only=True,
    destructive=False,
    idempotent=True,
    handler=memory_nudges,
)


class NudgeResolveArguments(NudgeResolveInputSerializer):
    nudge_id = StrictUUIDField(help_text="The nudge's id, as memory_nudges gives it.")


def nudge_resolve(call: ToolCall, payload: NudgeResolveArguments) -> dict[str, Any]:
    data = payload.validated_data
    nudge = services.resolve_nudge(
        team=call.team, nudge_id=data["nudge_id"], action=data["action"], actor=call.actor
    )
    return dict(NudgeOutputSerializer(nudge, context=_nudge_context(call)).data)


def _nudge_context(call: ToolCall) -> dict[str, Any]:
    return {"team_slug": call.team.slug, "may_see_high": call.token.grants("write")}


RESOLVE = Tool(
    name="nudge_resolve",
    title="Resolve a nudge",
    description=(
        "Close a nudge of memory_nudges in one call (see `action`); a resolution that archives "
        "leaves the entry in history, where it can be restored. Returns the nudge. Errors: "
        "not_found, action_not_applicable, nudge_closed, invalid."
    ),
    arguments=NudgeResolveArguments,
    scope="write",
    read_only=False,
    destructive=True,
    idempotent=False,
    handler=nudge_resolve,
)


# --- drafts_extract / drafts_list / draft_review --------------------------------------


def drafts_extract(call: ToolCall, payload: DraftExtractInputSerializer) -> dict[str, Any]:
    return extraction_payload(team=call.team, arguments=payload.validated_data, actor=call.actor)


DRAFTS_EXTRACT = Tool(
    name="drafts_extract",
    title="Propose memories from a transcript",
    description=(
        "Give a session transcript or notes; at most 15 candidate memories (decisions, lessons, "
        "always/never rules, switches, TODOs) come back as pending drafts for a person to review. "
        "Credentials, the team's secrets, PII and code blocks are removed before any extractor reads "
        "it. Each draft says whether it duplicates or contradicts an entry. Text already pending is "
        "not drafted again: a pending draft found again is listed in `corroborated`. Errors: invalid, "
        "extractor_unavailable, extractor_bad_answer."
    ),
    arguments=DraftExtractInputSerializer,
    scope="write",
    read_only=False,
    destructive=False,
    idempotent=True,
    handler=drafts_extract,
)


class DraftsListArguments(StrictInputSerializer, DraftListQuerySerializer, PageArguments):
    pass


def drafts_list(call: ToolCall, payload: DraftsListArguments) -> dict[str, Any]:
    rows = drafts.list_drafts(team=call.team, state=payload.validated_data["state"])
    page, next_cursor = page_of(DraftPagination, rows, payload)
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
    arguments=DraftsListArguments,
    scope="read",
    read_only=True,
    destructive=False,
    idempotent=True,
    handler=drafts_list,
)

DRAFT_REVIEW_ACTIONS = ("accept", "reject", "merge")


class DraftReviewArguments(DraftAcceptInputSerializer, DraftMergeInputSerializer):
    """The three review endpoints of REST (accept, reject, merge) as one tool."""

    draft_id = StrictUUIDField(help_text="The draft's id, as drafts_list gives it.")
    action = serializers.ChoiceField(
        choices=DRAFT_REVIEW_ACTIONS, help_text="What to do; see the description."
    )
    into_key = key_field(INTO_KEY_HELP, required=False)


def draft_review(call: ToolCall, payload: DraftReviewArguments) -> dict[str, Any]:
    data = payload.validated_data
    team, draft_id, actor = call.team, data["draft_id"], call.actor
    if data["action"] == "accept":
        draft = drafts.accept_draft(
            team=team,
            draft_id=draft_id,
            actor=actor,
            type=data.get("type"),
            key=data.get("key"),
            content=data.get("content"),
            value=data.get("value"),
        )
    elif data["action"] == "reject":
        draft = drafts.reject_draft(team=team, draft_id=draft_id, actor=actor)
    else:
        if not data.get("into_key"):
            raise InvalidInput("merge needs into_key: the key of the entry to merge into", field="into_key")
        draft = drafts.merge_draft(
            team=team, draft_id=draft_id, actor=actor, into_key=data["into_key"], content=data.get("content")
        )
    return dict(DraftOutputSerializer(draft, context={"team_slug": call.team.slug}).data)


DRAFT_REVIEW = Tool(
    name="draft_review",
    title="Accept, reject or merge a draft",
    description=(
        "Review a pending draft of drafts_list. `accept` stores it as a new entry (optionally with an "
        "edited type, key or content) recording where it came from; a fact draft (kind `fact`) is set as "
        "its fact, optionally with an edited `value`; `reject` drops it; `merge` "
        "supersedes the active entry of `into_key` with the merged text. Returns the draft. Errors: "
        "not_found, draft_not_pending, draft_key_exists (merge instead), draft_duplicate, "
        "draft_fact_exists, invalid."
    ),
    arguments=DraftReviewArguments,
    scope="write",
    read_only=False,
    destructive=True,
    idempotent=False,
    handler=draft_review,
)

TOOLS = (NUDGES, RESOLVE, DRAFTS_EXTRACT, DRAFTS_LIST, DRAFT_REVIEW)
