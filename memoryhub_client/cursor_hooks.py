"""`memoryhub hook cursor EVENT` and `memoryhub hook windsurf EVENT`: Cursor's and
Windsurf's hooks (docs/agents.md, "Other clients' hooks"), the same handlers as Claude
Code's on their own input and output.

Cursor (`.cursor/hooks.json`, written by `memoryhub connect cursor`) sends every hook
`conversation_id`, `generation_id`, `hook_event_name`, `workspace_roots` (and
`transcript_path`), then the event's own fields, and reads a JSON answer on stdout:
- session-start (sessionStart: `session_id`, `is_background_agent`, `composer_mode`):
  answers `{"additional_context": <the memory block and the guide>}`;
- session-end (sessionEnd: `session_id`, `reason`, ...): the transcript for drafts, then
  the MemoryHub session ends;
- before-submit-prompt (beforeSubmitPrompt: `prompt`): a correction is captured; answers
  `{"continue": true}` (never blocks);
- post-tool-use (postToolUse: `tool_name`, `tool_input`, `tool_output`, a JSON string):
  a result that shows a failure (a non-zero `exitCode`) goes through the failure rules;
- post-tool-use-failure (postToolUseFailure: `error_message`, `failure_type`,
  `is_interrupt`): a failure goes through the failure rules; a timeout is transient and a
  denied call declined, as for Claude Code.
The last three answer `{}` where an answer is read.

Windsurf (`.windsurf/hooks.json`): pre-user-prompt (pre_user_prompt: `tool_info.user_prompt`)
captures a correction and prints nothing (stdout is shown to the user, never to the model).

Every hook reads stdin bounded (claude_code_hooks.read_hook_input) and exits 0, server or
no server; what happened is one line on stderr."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from typing import Any

from memoryhub_client.capture_hooks import (
    capture_prompt,
    capture_tool_failure,
    capture_tool_result,
    enabled,
)
from memoryhub_client.claude_code_hooks import end_session, read_hook_input, session_start_text
from memoryhub_client.config import add_connection_flags

CURSOR = "cursor"
WINDSURF = "windsurf"
MAX_TOOL_OUTPUT_CHARS = 200_000  # a Shell result's JSON, parsed only when this small
# Cursor's failure_type, as the rules' words: a timeout is transient, a denial declined.
FAILURE_WORDS = {"timeout": "timed out", "permission_denied": "user denied the tool call"}


def register(clients: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`hook cursor ...` and `hook windsurf ...` (claude_code_hooks.register adds `hook`)."""
    cursor = clients.add_parser(CURSOR, help="Cursor hooks (sessionStart, sessionEnd, the captures)")
    events = cursor.add_subparsers(dest="event", required=True)
    for event, handler, text in (
        ("session-start", run_session_start, "answer the memory block and a guide as additional_context"),
        ("session-end", run_session_end, "send the transcript for drafts; end the session"),
        ("before-submit-prompt", run_prompt, "send a prompt that corrects the agent as a draft"),
        ("post-tool-use", run_tool_use, "send a tool call whose result shows a failure as a draft"),
        ("post-tool-use-failure", run_tool_failure, "send a failed tool call as a draft"),
    ):
        _add(events, event, handler, text)
    cursor.set_defaults(source=CURSOR)
    windsurf = clients.add_parser(WINDSURF, help="Windsurf Cascade hooks (pre_user_prompt)")
    windsurf_events = windsurf.add_subparsers(dest="event", required=True)
    _add(windsurf_events, "pre-user-prompt", run_windsurf_prompt, "send a prompt that corrects the agent")
    windsurf.set_defaults(source=WINDSURF)


def _add(
    events: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    handler: Callable[[argparse.Namespace], int],
    text: str,
) -> None:
    parser = events.add_parser(name, help=text, description=text)
    parser.add_argument("--project", default=None, help="the project (default: the worktree's folder name)")
    add_connection_flags(parser)
    parser.set_defaults(handler=handler)


def claude_shape(event: dict[str, Any]) -> dict[str, Any]:
    """A Cursor event with the fields the shared handlers read: `session_id` (Cursor's
    session id, the same as its conversation id) and `cwd` (the first workspace root)."""
    roots = event.get("workspace_roots")
    root = roots[0] if isinstance(roots, list) and roots and isinstance(roots[0], str) else None
    return {
        **event,
        "session_id": event.get("session_id") or event.get("conversation_id"),
        "cwd": event.get("cwd") or root or os.getcwd(),
    }


def run_session_start(arguments: argparse.Namespace) -> int:
    event = claude_shape(read_hook_input())
    _answer({"additional_context": session_start_text(arguments, event)})
    return 0


def run_session_end(arguments: argparse.Namespace) -> int:
    end_session(arguments, claude_shape(read_hook_input()))
    _answer({})
    return 0


def run_prompt(arguments: argparse.Namespace) -> int:
    event = claude_shape(read_hook_input())
    if enabled():
        capture_prompt(arguments, event)
    _answer({"continue": True})
    return 0


def run_tool_use(arguments: argparse.Namespace) -> int:
    event = claude_shape(read_hook_input())
    if enabled():
        capture_tool_result(arguments, {**event, "tool_response": _parsed(event.get("tool_output"))})
    _answer({})
    return 0


def run_tool_failure(arguments: argparse.Namespace) -> int:
    event = claude_shape(read_hook_input())
    if enabled():
        kind = event.get("failure_type")
        words = FAILURE_WORDS.get(kind) if isinstance(kind, str) else None
        message = event.get("error_message")
        error = "\n".join(part for part in (words, message if isinstance(message, str) else "") if part)
        capture_tool_failure(arguments, {**event, "error": error})
    _answer({})
    return 0


def run_windsurf_prompt(arguments: argparse.Namespace) -> int:
    event = read_hook_input()
    info = event.get("tool_info")
    prompt = info.get("user_prompt") if isinstance(info, dict) else None
    # Windsurf leaves trajectory_id empty for this hook: no session to remember captures
    # by, so the server's own check ("already pending") is the one that applies.
    session = event.get("trajectory_id") or None
    if enabled():
        capture_prompt(arguments, {"session_id": session, "prompt": prompt})
    return 0


def _parsed(tool_output: Any) -> Any:
    """Cursor's `tool_output` is the tool's result as a JSON string."""
    if isinstance(tool_output, dict):
        return tool_output
    if not isinstance(tool_output, str) or len(tool_output) > MAX_TOOL_OUTPUT_CHARS:
        return None
    try:
        return json.loads(tool_output)
    except ValueError:
        return None


def _answer(answer: dict[str, Any]) -> None:
    print(json.dumps(answer))
