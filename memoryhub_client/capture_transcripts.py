"""Learnings from a whole transcript (the PreCompact hook and the session's end): each
tool failure judged with the calls around it (memoryhub_client.capture's failure rules,
plus whether the agent's own next edits fixed it), and each user prompt by the
correction rules. One rule set: the same functions the per-event hooks call. Since v5 a prompt that
answers the question the agent's text just asked is read as an answer (a correction only
when it states a rule), and a failure whose error states a constraint of the environment
("cannot run inside a transaction block", "not supported") stays a learning even when the
agent's own edits then made the call work: the edit applied the lesson, it fixed no slip."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from memoryhub_client.capture import (
    BOOKKEEPING_TOOLS,
    FIX_LOOKAHEAD_CALLS,
    LOOKUP_TOOLS,
    MAX_COMMAND_CHARS,
    Learning,
    command_of,
    error_text,
    failure_learning,
    program_of,
    shorten,
)
from memoryhub_client.capture_corrections import correction_learning

# v5: an error that states what the environment does not allow: a lesson even when the
# agent's own edit then worked around it.
_CONSTRAINT = re.compile(
    r"(?i)\bcannot (?:be )?(?:run|used|executed|called|done) (?:inside|in|within|outside|from|on)\b"
    r"|\bnot (?:allowed|permitted|supported)\b|\bunsupported\b|\bis (?:disabled|forbidden|prohibited)\b"
)


@dataclass(frozen=True)
class _Question:
    """The agent's text ended with a question: the next prompt answers it (v5)."""


@dataclass(frozen=True)
class _Call:
    id: str
    name: str
    input: Any
    failed: bool
    error: Any
    interrupted: bool


def transcript_learnings(records: Iterable[Any]) -> list[Learning]:
    """The learnings of a Claude Code transcript (its JSON Lines records, parsed), in
    order, one per fingerprint: the PreCompact hook's path, where the calls after a
    failure are known (flakes are left out, a fix is named)."""
    events = list(_events(records))
    calls = [event for event in events if isinstance(event, _Call)]
    found: list[Learning] = []
    seen: set[str] = set()
    prompts = 0
    previous: _Call | str | _Question | None = None
    for event in events:
        asked, previous = isinstance(previous, _Question), event
        if isinstance(event, _Question):
            continue
        if isinstance(event, str):
            learning = correction_learning(event, source=f"prompt:{prompts}", answers_a_question=asked)
            prompts += 1
        elif event.failed:
            learning = _failure_in_context(event, calls)
        else:
            continue
        if learning is not None and learning.fingerprint not in seen:
            seen.add(learning.fingerprint)
            found.append(learning)
    return found


def agent_asked_before(records: Iterable[Any], prompt: str) -> bool:
    """Whether the agent's text just before `prompt` ended with a question (the
    UserPromptSubmit hook's look at the transcript's tail): the prompt is then an answer.
    The prompt may already be the transcript's last record, or not yet written."""
    asked, before_prompt = False, None
    for event in _events(records):
        if isinstance(event, str) and event.strip() == prompt.strip():
            before_prompt = asked
        asked = isinstance(event, _Question)
    return asked if before_prompt is None else before_prompt


def _failure_in_context(call: _Call, calls: list[_Call]) -> Learning | None:
    learning = failure_learning(
        call.name, call.input, call.error, is_interrupt=call.interrupted, source=call.id
    )
    if learning is None:
        return None
    after = calls[calls.index(call) + 1 :][:FIX_LOOKAHEAD_CALLS]
    if after and after[0].name == call.name and after[0].input == call.input and not after[0].failed:
        return None  # the same call worked at once: a flake
    if _fixed_by_own_edits(call, after) and not _CONSTRAINT.search(error_text(call.error)):
        return None
    command = command_of(call.name, call.input)
    for later in after:
        later_command = command_of(later.name, later.input)
        if (
            not later.failed
            and later.name == call.name == "Bash"
            and later_command != command
            and program_of(later_command) == program_of(command)
        ):
            fix = f"; then `{shorten(later_command, MAX_COMMAND_CHARS)}` worked"
            return Learning(learning.kind, learning.text + fix, learning.source, learning.fingerprint)
    return learning


def _fixed_by_own_edits(call: _Call, after: list[_Call]) -> bool:
    """The same call succeeded later and only edits to files came between."""
    for later in after:
        if later.name == call.name and later.input == call.input:
            return not later.failed
        if later.name not in BOOKKEEPING_TOOLS and later.name not in LOOKUP_TOOLS:
            return False
    return False


def _events(records: Iterable[Any]) -> Iterator[_Call | str | _Question]:
    """User prompts (str), tool calls with their outcome and the agent's questions, in
    transcript order."""
    pending: dict[str, tuple[str, Any]] = {}
    for record in records:
        if not isinstance(record, dict) or record.get("isMeta") or record.get("isCompactSummary"):
            continue
        message = record.get("message")
        if not isinstance(message, dict):
            continue
        role, content = message.get("role", record.get("type")), message.get("content")
        if role == "user" and isinstance(content, str):
            yield content
            continue
        if role == "assistant" and isinstance(content, str) and content.rstrip().endswith("?"):
            yield _Question()
            continue
        if not isinstance(content, list):
            continue
        for part in content[:1000]:
            if not isinstance(part, dict):
                continue
            kind = part.get("type")
            if role == "assistant" and kind == "text" and str(part.get("text") or "").rstrip().endswith("?"):
                yield _Question()
            elif role == "assistant" and kind == "tool_use" and isinstance(part.get("id"), str):
                pending[part["id"]] = (str(part.get("name") or ""), part.get("input"))
            elif role == "user" and kind == "tool_result" and part.get("tool_use_id") in pending:
                name, tool_input = pending.pop(part["tool_use_id"])
                content_text = part.get("content")
                yield _Call(
                    part["tool_use_id"],
                    name,
                    tool_input,
                    part.get("is_error") is True,
                    content_text,
                    "[Request interrupted" in error_text(content_text),
                )
            elif role == "user" and kind == "text" and isinstance(part.get("text"), str):
                yield part["text"]
