"""Every operation of the SDK, once: its arguments, its docstring, the request it makes
and how its answer is read (a `Call`). `MemoryHub` and `AsyncMemoryHub` (hub.py) turn each
into a method, so the two never differ in what they send.

An argument left as None is not sent: the server's default applies. Times are ISO 8601
strings with a time zone, or aware datetimes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import quote

import httpx
from typing_extensions import TypeIs

from memoryhub_client.transport import Call, json_answer, no_answer
from memoryhub_client.types import (
    AgentSessionBootOutput,
    AgentSessionOutput,
    AnchoredEntry,
    DraftExtractOutput,
    DraftOutput,
    InjectionOutput,
    MemoryBatchOutput,
    MemoryDetailOutput,
    MemoryDuplicateOutput,
    MemoryHistoryOutput,
    MemoryOutput,
    MemoryReadOutput,
    MemorySavedOutput,
    NudgeOutput,
    SearchOutput,
)

T = TypeVar("T")

# A save's answer: the stored entry (201), or, when an active entry already holds the
# text, what holds it (200, `saved` false, nothing written).
SaveAnswer = MemorySavedOutput | MemoryDuplicateOutput


def is_duplicate(answer: SaveAnswer) -> TypeIs[MemoryDuplicateOutput]:
    """Whether a save's answer says nothing was written because an active entry holds
    the text (`answer["duplicate_of"]`)."""
    return "duplicate_of" in answer


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a list, newest first. Pass `next_cursor` as `cursor` for the next
    (older) page; it is None on the last."""

    results: list[T]
    next_cursor: str | None
    previous_cursor: str | None


def _page(response: httpx.Response) -> Page[Any]:
    body = json_answer(response)
    return Page(
        results=list(body.get("results") or []),
        next_cursor=cursor_of(body.get("next")),
        previous_cursor=cursor_of(body.get("previous")),
    )


def cursor_of(link: Any) -> str | None:
    """The cursor of a page link (`next` or `previous`), or None."""
    if not isinstance(link, str) or not link:
        return None
    value = httpx.URL(link).params.get("cursor")
    return value or None


def _json(response: httpx.Response) -> Any:
    return json_answer(response)


def _key(key: str) -> str:
    return quote(key, safe="")


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, list | tuple):
        return ",".join(str(item) for item in value)
    return str(value)


def _params(**values: Any) -> dict[str, str]:
    return {name: _value(value) for name, value in values.items() if value is not None}


def _body(**values: Any) -> dict[str, Any]:
    return {
        name: value.isoformat() if isinstance(value, datetime) else value
        for name, value in values.items()
        if value is not None
    }


# ----- memories -----


def save(
    key: str,
    content: str,
    *,
    type: str | None = None,
    project: str | None = None,
    supersede_reason: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    expected_version: str | None = None,
    allow_duplicate: bool | None = None,
    skill_trigger: Mapping[str, Any] | None = None,
    anchor: Mapping[str, Any] | None = None,
) -> Call[SaveAnswer]:
    """Save `content` under `key`. A key with an active entry needs `supersede_reason`
    (else `Conflict`, code `conflict`, with the entry as `current`); `"minor correction"`
    makes a soft supersede. `expected_version` (the id of the version this write is based
    on) refuses the write with `Conflict` (`stale_version`) when another one is active.
    `type` is identity, lesson, decision, context (the default), reference or historical
    (aliases such as warning resolve). Answers the stored entry, or, when an active entry
    already holds the text and this one is not longer, that entry as `duplicate_of` with
    `saved` false: nothing was written (`allow_duplicate=True` saves anyway)."""
    body = _body(
        key=key,
        content=content,
        type=type,
        project=project,
        supersede_reason=supersede_reason,
        metadata=dict(metadata) if metadata is not None else None,
        expected_version=expected_version,
        allow_duplicate=allow_duplicate,
        skill_trigger=dict(skill_trigger) if skill_trigger is not None else None,
        anchor=dict(anchor) if anchor is not None else None,
    )
    return Call("POST", "memories/", _json, json=body)


def save_batch(entries: Sequence[Mapping[str, Any]]) -> Call[MemoryBatchOutput]:
    """Save up to 500 entries in one request, each a mapping with `save`'s arguments
    (`key`, `content`, `type`, ...). Answers one result per entry, in order: `created`,
    `superseded`, `unchanged` (sending the same batch again changes nothing), `duplicate`
    or `error` (with the error body a single save would have raised); the other entries
    are saved all the same."""
    return Call("POST", "memories/batch/", _json, json={"entries": [dict(entry) for entry in entries]})


def get(
    key: str, *, as_of: str | datetime | None = None, from_line: int | None = None, lines: int | None = None
) -> Call[MemoryReadOutput]:
    """The active entry of `key` with the notes of its key (`NotFound` when it has none).
    `as_of`: the version that was active then. A long text reads a slice at a time:
    `from_line` (from 1) and `lines`; the answer says `from_line`, `to_line`,
    `total_lines` and `has_more`. Counts as an access of the entry."""
    return Call(
        "GET", f"memories/{_key(key)}/", _json, params=_params(as_of=as_of, from_line=from_line, lines=lines)
    )


def get_version(key: str, version_id: str) -> Call[MemoryDetailOutput]:
    """Any version of `key` by its id (from history, search or `superseded_by`), active,
    superseded or deleted; a superseded one says what replaced it in `superseded_by`."""
    return Call("GET", f"memories/{_key(key)}/versions/{_key(version_id)}/", _json)


def list_memories(
    *,
    type: str | None = None,
    project: str | None = None,
    tags: Sequence[str] | None = None,
    people: Sequence[str] | None = None,
    as_of: str | datetime | None = None,
    include_archived: bool | None = None,
    limit: int | None = None,
    cursor: str | None = None,
    topics: Sequence[str] | None = None,
) -> Call[Page[MemoryOutput]]:
    """A page of the team's active memories, newest first (`limit` a page, 50 by default).
    `tags` and `people`: entries with every one; `topics`: entries about any one of them.
    `as_of`: the versions active then. `iter_memories` walks every page."""
    params = _params(
        type=type,
        project=project,
        tags=tags,
        people=people,
        topics=topics,
        as_of=as_of,
        include_archived=include_archived,
        limit=limit,
        cursor=cursor,
    )
    return Call("GET", "memories/", _page, params=params)


def history(key: str, *, limit: int | None = None, cursor: str | None = None) -> Call[MemoryHistoryOutput]:
    """Every version of `key` with its events (created, superseded, unsuperseded, deleted,
    archived, confirmed), newest first, `limit` versions a page (50 by default); `next` is
    the link of the older page (its cursor: `cursor_of(answer["next"])`)."""
    return Call("GET", f"memories/{_key(key)}/history/", _json, params=_params(limit=limit, cursor=cursor))


def delete(key: str) -> Call[None]:
    """Delete the active entry of `key`; it stays in the key's history, marked deleted."""
    return Call("DELETE", f"memories/{_key(key)}/", no_answer)


def confirm(key: str, *, note: str | None = None) -> Call[MemoryDetailOutput]:
    """Say the active entry of `key` is still true: its `last_confirmed_at` moves to now
    (no new version), its open `due` and `anchor_broken` nudges are resolved, and the
    confirmation (who, when, `note`) shows in its history."""
    return Call("POST", f"memories/{_key(key)}/confirm/", _json, json=_body(note=note))


def unsupersede(key: str, reason: str) -> Call[MemoryDetailOutput]:
    """Make the version the active entry of `key` replaced active again (as a new version,
    so history is never rewritten)."""
    return Call("POST", f"memories/{_key(key)}/unsupersede/", _json, json={"reason": reason})


def archive(key: str, *, expected_version: str | None = None) -> Call[MemoryDetailOutput]:
    """Archive the active entry of `key`: kept with its history, left out of default
    search, lists and injection until `restore` (`expected_version`: only that version)."""
    return Call(
        "POST", f"memories/{_key(key)}/archive/", _json, json=_body(expected_version=expected_version)
    )


def restore(key: str) -> Call[MemoryDetailOutput]:
    """Make the archived last version of `key` its active entry again."""
    return Call("POST", f"memories/{_key(key)}/restore/", _json, json={})


# ----- search and context -----


def search(
    query: str,
    *,
    max_results: int | None = None,
    min_score: float | None = None,
    types: Sequence[str] | None = None,
    project: str | None = None,
    include_superseded: bool | None = None,
    include_archived: bool | None = None,
    tags: Sequence[str] | None = None,
    people: Sequence[str] | None = None,
    explain: bool | None = None,
    mode: Literal["hybrid", "keyword", "vector"] | None = None,
    topics: Sequence[str] | None = None,
    sources: Sequence[Literal["memories", "facts", "conversations"]] | None = None,
) -> Call[SearchOutput]:
    """Search the team's memory by meaning and keyword. `search_mode` says which paths ran
    (keyword only when embeddings are unavailable, with a warning, never an error);
    each key comes once, as its current entry, unless `include_superseded=True` adds the
    replaced versions (marked, with `superseded_by`); `explain=True` adds how each score
    was made. `tags` and `people`: entries with every one; `topics`: any one of them.
    `sources` picks memories, facts and conversations (the server's default: memories and
    facts); each result names its `origin`."""
    body = _body(
        query=query,
        max_results=max_results,
        min_score=min_score,
        types=list(types) if types is not None else None,
        project=project,
        include_superseded=include_superseded,
        include_archived=include_archived,
        tags=list(tags) if tags is not None else None,
        people=list(people) if people is not None else None,
        topics=list(topics) if topics is not None else None,
        explain=explain,
        mode=mode,
        sources=list(sources) if sources is not None else None,
    )
    return Call("POST", "search/", _json, json=body)


def context(
    *,
    project: str | None = None,
    query: str | None = None,
    max_entries: int | None = None,
    max_tokens: int | None = None,
    format: Literal["markdown", "json"] | None = None,
) -> Call[InjectionOutput]:
    """The memory block to put at the top of an agent's prompt at session start (`text`,
    markdown): identity entries, always-on skills, then lessons, decisions and context
    newest first, within the team's entry cap and token budget (or `max_entries`,
    `max_tokens`), and the entries most relevant to `query` when one is given.
    `format="json"` adds why each entry is in (`entries`) or out (`left_out`)."""
    params = _params(
        project=project, query=query, max_entries=max_entries, max_tokens=max_tokens, format=format
    )
    return Call("GET", "injection/", _json, params=params)


# ----- nudges -----


def nudges(
    *,
    state: Literal["open", "resolved", "dismissed", "all"] | None = None,
    kind: Literal["due", "anchor_broken", "contradiction", "prune", "fact_contradiction"] | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> Call[Page[NudgeOutput]]:
    """A page of the team's nudges, newest first: entries due for confirmation, broken
    anchors, contradictions, prune proposals and fact contradictions (a conversation stated
    another value for a fact; open ones unless `state` says otherwise)."""
    return Call("GET", "nudges/", _page, params=_params(state=state, kind=kind, limit=limit, cursor=cursor))


def resolve_nudge(
    nudge_id: str, action: Literal["confirm", "dismiss", "archive", "supersede", "compatible"]
) -> Call[NudgeOutput]:
    """Resolve a nudge: `confirm` (still true), `compatible` (a contradiction's two entries
    both hold), `dismiss` (change nothing), `supersede` (archive a contradiction's older
    entry; a fact contradiction's value becomes the fact's) or `archive` (a prune
    proposal's entry)."""
    return Call("POST", f"nudges/{_key(nudge_id)}/resolve/", _json, json={"action": action})


# ----- drafts -----

# What one extraction sends at most: well under the server's body limit once JSON-encoded
# (the commands' transcripts and the context manager's flushes alike).
MAX_TRANSCRIPT_CHARS = 150_000
MAX_SOURCE_SESSION_CHARS = 200  # the server's limit on a draft's source_session


def drafts(
    *,
    state: Literal["pending", "accepted", "rejected", "merged", "all"] | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> Call[Page[DraftOutput]]:
    """A page of the memories an extractor proposed, newest first (pending ones unless
    `state` says otherwise)."""
    return Call("GET", "drafts/", _page, params=_params(state=state, limit=limit, cursor=cursor))


def get_draft(draft_id: str) -> Call[DraftOutput]:
    """One draft."""
    return Call("GET", f"drafts/{_key(draft_id)}/", _json)


def extract_drafts(
    transcript: str,
    *,
    source_session: str | None = None,
    keep_conversation: bool | None = None,
    source: Literal["hook", "sdk", "api"] | None = None,
) -> Call[DraftExtractOutput]:
    """Propose memories and facts from a transcript or notes: at most 15 pending drafts of
    each, each flagged with its conflict (`duplicate`, `contradiction`) for a person to
    review; a fact the team holds with the same value is in `confirmed_facts`, with
    another value it opens a fact contradiction nudge (`fact_nudges`). The
    server removes credentials, secrets, PII and code first. A learning already pending is
    not drafted again: another session's extraction of it raises that draft's count
    (answered in `corroborated`). `source_session` says where it came from (a session id
    or a label). The server keeps the transcript as a conversation too (scrubbed, for the
    team's retention) unless `keep_conversation=False`; `source` is recorded on it."""
    body = _body(
        transcript=transcript,
        source_session=source_session,
        keep_conversation=keep_conversation,
        source=source,
    )
    return Call("POST", "drafts/extract/", _json, json=body)


def accept_draft(
    draft_id: str,
    *,
    type: str | None = None,
    key: str | None = None,
    content: str | None = None,
    value: str | None = None,
) -> Call[DraftOutput]:
    """Store a pending draft as a new entry (optionally as another type, under another key
    or with edited content). `Conflict` when the key has an active entry (merge instead) or
    another entry holds the text. A fact draft (`kind` "fact") is set as its fact, with
    `value` edited when given (`Conflict`, `draft_fact_exists`, when the fact has another
    value since)."""
    body = _body(type=type, key=key, content=content, value=value)
    return Call("POST", f"drafts/{_key(draft_id)}/accept/", _json, json=body)


def reject_draft(draft_id: str) -> Call[DraftOutput]:
    """Reject a pending draft."""
    return Call("POST", f"drafts/{_key(draft_id)}/reject/", _json, json={})


def merge_draft(draft_id: str, into_key: str, *, content: str | None = None) -> Call[DraftOutput]:
    """Supersede the active entry of `into_key` with the draft merged in (`content`, or the
    entry's text then the draft's)."""
    return Call(
        "POST", f"drafts/{_key(draft_id)}/merge/", _json, json=_body(into_key=into_key, content=content)
    )


# ----- sessions -----


def start_session(
    *,
    source: str | None = None,
    project: str | None = None,
    cwd: str | None = None,
    pid: int | None = None,
    host: str | None = None,
    current_task: str | None = None,
) -> Call[AgentSessionBootOutput]:
    """Register an agent's session: answers the session, the other live sessions of the
    project and the memory block to put at the top of its prompt (`injection`). Set
    `hub.session` to the session's id and every later call is its heartbeat."""
    body = _body(source=source, project=project, cwd=cwd, pid=pid, host=host, current_task=current_task)
    return Call("POST", "sessions/", _json, json=body)


def update_session(
    session_id: str, *, project: str | None = None, current_task: str | None = None
) -> Call[AgentSessionOutput]:
    """Say what the session works on now (and beat its heartbeat)."""
    return Call(
        "PATCH",
        f"sessions/{_key(session_id)}/",
        _json,
        json=_body(project=project, current_task=current_task),
    )


def end_session(session_id: str) -> Call[None]:
    """End a session."""
    return Call("DELETE", f"sessions/{_key(session_id)}/", no_answer)


def get_session(session_id: str) -> Call[AgentSessionOutput]:
    """One session."""
    return Call("GET", f"sessions/{_key(session_id)}/", _json)


def sessions(
    *, project: str | None = None, limit: int | None = None, cursor: str | None = None
) -> Call[Page[AgentSessionOutput]]:
    """A page of the team's live sessions (of `project`, when given)."""
    return Call("GET", "sessions/", _page, params=_params(project=project, limit=limit, cursor=cursor))


# ----- anchors -----


def anchors(
    *, type: Literal["url", "file", "api"] | None = None, limit: int | None = None, cursor: str | None = None
) -> Call[Page[AnchoredEntry]]:
    """A page of the active entries with an anchor (of `type`, when given)."""
    return Call("GET", "anchors/", _page, params=_params(type=type, limit=limit, cursor=cursor))


def report_file_anchors(results: Sequence[Mapping[str, Any]]) -> Call[dict[str, Any]]:
    """Report checks of file anchors made in a worktree: up to 500 of `{"key", "exists",
    "reason"}`. Answers how many were recorded, flagged and unflagged, and the keys
    ignored."""
    return Call("POST", "anchors/report/", _json, json={"results": [dict(item) for item in results]})


# ----- import -----


def import_export_file(
    body: bytes,
    *,
    dry_run: bool | None = None,
    skip_existing: bool | None = None,
    strict: bool | None = None,
    vault_passphrase: str | None = None,
    timeout: float | None = None,
) -> Call[dict[str, Any]]:
    """Import a file in the export's format (JSON Lines, admin token), at most the server's
    body limit (1 MiB by default; `memoryhub import` cuts a bigger file into batches).
    Answers what was created, superseded, unchanged and skipped, and the lines refused."""
    headers = {"Content-Type": "application/jsonl"}
    if vault_passphrase is not None:
        headers[VAULT_PASSPHRASE_HEADER] = vault_passphrase
    params = _params(dry_run=dry_run or None, skip_existing=skip_existing or None, strict=strict or None)
    return Call("POST", "import/", _json, params=params, content=body, headers=headers, timeout=timeout)


VAULT_PASSPHRASE_HEADER = "X-MemoryHub-Vault-Passphrase"  # noqa: S105 (a header name)


def raw(
    method: str,
    path: str,
    *,
    params: Mapping[str, Any] | None = None,
    json: Any = None,
    timeout: float | None = None,
) -> Call[dict[str, Any]]:
    """Any call of the team's REST API without a method of its own (`path` relative to
    `/api/v1/teams/{team}/`, e.g. `"vault/"`), answering its JSON object (empty for 204);
    `timeout` overrides the client's for this call."""
    clean = _params(**dict(params or {}))
    return Call(method.upper(), path.lstrip("/"), _json, params=clean, json=json, timeout=timeout)
