"""`memoryhub hook claude-code pre-compact | post-tool-use-failure | post-tool-use |
user-prompt-submit`: Claude Code's capture hooks (docs/agents.md, "Capture").

- post-tool-use-failure: a failed tool call that the rules (memoryhub_client.capture)
  call a learning is sent as a draft;
- post-tool-use: a call reported as done whose `tool_response` shows a failure (a
  non-zero exit, `is_error`, an error on the shell's stderr) goes through the same rules;
- user-prompt-submit: a prompt that corrects the agent is sent as a draft;
- pre-compact: before Claude Code compacts the conversation, the transcript's learnings
  (where the calls after a failure show a flake or a fix) not sent already.

What is sent goes to POST drafts/extract/ as `Learning: …` paragraphs marked `captured`:
a pending draft a person reviews, or, for a team with `capture_to_memory` on, a lesson
entry (the server decides; docs/freshness.md, "Captures straight to memory"); the server
scrubs credentials, the team's secrets and PII first, and drafts a text already pending
for the team only once. Each
hook remembers, per Claude Code session, the fingerprints it sent (a failure seen again
is not sent again). Nothing goes to stdout (UserPromptSubmit's stdout would enter the
model's context); what happened is one line on stderr, and every hook exits 0, server
or no server. A prompt or a failure that is no learning never reaches the network.
Bounds: stdin as claude_code_hooks reads it; the server's answer within
CAPTURE_SERVER_SECONDS for the hooks that run in the agent's loop (the user waits
for UserPromptSubmit), SERVER_SECONDS for pre-compact."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from memoryhub_client.api import ApiError, MemoryHubApi
from memoryhub_client.capture import (
    Learning,
    failure_learning,
    result_failure,
)
from memoryhub_client.capture_corrections import correction_learning
from memoryhub_client.capture_transcripts import agent_asked_before, transcript_learnings
from memoryhub_client.claude_code_hooks import (
    SAFE_SESSION_ID,
    SERVER_SECONDS,
    SOURCE,
    read_hook_input,
)
from memoryhub_client.config import ConfigError, config_dir, load_config
from memoryhub_client.drafts import transcript_records
from memoryhub_client.operations import MAX_SOURCE_SESSION_CHARS
from memoryhub_client.section import write_atomically

CAPTURE_SERVER_SECONDS = 5.0
# `memoryhub connect`'s client timeout for those two: past stdin's STDIN_SECONDS, the
# server's CAPTURE_SERVER_SECONDS and the interpreter's start.
CAPTURE_CLIENT_TIMEOUT_SECONDS = 15
MAX_REMEMBERED = 1000  # fingerprints kept per session
MAX_PER_REQUEST = 15  # the server's cap on drafts from one extraction
# What user-prompt-submit reads of the transcript's end to see whether the agent just asked
# a question (only for a prompt that reads as a correction): a turn or two.
PROMPT_CONTEXT_BYTES = 256 * 1024
# Set to 0 to turn every capture hook off (the hooks then exit at once).
CAPTURE_ENV = "MEMORYHUB_CAPTURE"


def add_events(
    events: argparse._SubParsersAction[argparse.ArgumentParser], only: tuple[str, ...] | None = None
) -> list[argparse.ArgumentParser]:
    """The capture events' subcommands, all or `only` those (claude_code_hooks.register adds
    the connection flags)."""
    parsers = []
    for event, handler, text in (
        ("pre-compact", run_pre_compact, "send the transcript's learnings as drafts before compaction"),
        (
            "post-tool-use-failure",
            run_tool_failure,
            "send a failed tool call as a draft when it is a learning",
        ),
        (
            "post-tool-use",
            run_tool_use,
            "send a tool call whose result shows a failure as a draft when it is a learning",
        ),
        ("user-prompt-submit", run_prompt_submit, "send a prompt that corrects the agent as a draft"),
    ):
        if only is not None and event not in only:
            continue
        parser = events.add_parser(event, help=text, description=text)
        parser.set_defaults(handler=handler)
        parsers.append(parser)
    return parsers


def run_tool_failure(arguments: argparse.Namespace) -> int:
    event = read_hook_input()
    if enabled():
        capture_tool_failure(arguments, event)
    return 0


def run_tool_use(arguments: argparse.Namespace) -> int:
    event = read_hook_input()
    if enabled():
        capture_tool_result(arguments, event)
    return 0


def run_prompt_submit(arguments: argparse.Namespace) -> int:
    event = read_hook_input()
    if enabled():
        capture_prompt(arguments, event)
    return 0


# The captures, on an event in Claude Code's shape (session_id, tool_name, tool_input,
# tool_use_id, ...): Cursor's and Windsurf's hooks translate theirs to it first.


def capture_tool_failure(arguments: argparse.Namespace, event: dict[str, Any]) -> None:
    """A failed tool call (`error`, `is_interrupt`), when the rules call it a learning."""
    learning = failure_learning(
        event.get("tool_name"),
        event.get("tool_input"),
        event.get("error"),
        is_interrupt=event.get("is_interrupt"),
        source=str(event.get("tool_use_id") or ""),
    )
    _send(arguments, event, [learning] if learning else [], seconds=CAPTURE_SERVER_SECONDS)


def capture_tool_result(arguments: argparse.Namespace, event: dict[str, Any]) -> None:
    """A tool call reported as done whose `tool_response` shows a failure: the same rules."""
    failed = result_failure(event.get("tool_name"), event.get("tool_response"))
    if failed is None:
        return
    error, interrupted = failed
    capture_tool_failure(arguments, {**event, "error": error, "is_interrupt": interrupted})


def capture_prompt(arguments: argparse.Namespace, event: dict[str, Any]) -> None:
    """A user prompt (`prompt`), when it corrects the agent."""
    learning = prompt_learning(event.get("prompt"), event.get("transcript_path"))
    _send(arguments, event, [learning] if learning else [], seconds=CAPTURE_SERVER_SECONDS)


def prompt_learning(prompt: Any, transcript_path: Any) -> Learning | None:
    """The correction rules on one prompt; when they find one, the transcript's tail says
    whether the prompt answers the question the agent just asked (then only a rule counts,
    as on the pre-compact path). Only a prompt that reads as a correction costs a read."""
    learning = correction_learning(prompt)
    if learning is None or not isinstance(transcript_path, str) or not transcript_path:
        return learning
    try:
        asked = agent_asked_before(_tail_records(Path(transcript_path)), str(prompt))
    except OSError:
        return learning
    return correction_learning(prompt, answers_a_question=True) if asked else learning


def _tail_records(path: Path) -> list[Any]:
    """The transcript's last PROMPT_CONTEXT_BYTES as records, a cut or broken line skipped."""
    with path.open("rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        handle.seek(max(0, size - PROMPT_CONTEXT_BYTES))
        lines = handle.read(PROMPT_CONTEXT_BYTES).split(b"\n")
    if size > PROMPT_CONTEXT_BYTES:
        lines = lines[1:]
    records = []
    for line in lines:
        try:
            records.append(json.loads(line))
        except ValueError:
            continue
    return records


def run_pre_compact(arguments: argparse.Namespace) -> int:
    event = read_hook_input()
    if not enabled():
        return 0
    path = event.get("transcript_path")
    learnings: list[Learning] = []
    if isinstance(path, str) and path:
        try:
            learnings = transcript_learnings(transcript_records(Path(path)))
        except OSError as exc:
            print(f"memoryhub: the transcript could not be read: {exc.strerror or exc}", file=sys.stderr)
            return 0
    return _send(arguments, event, learnings, seconds=SERVER_SECONDS)


def enabled() -> bool:
    """False when MEMORYHUB_CAPTURE turns the capture hooks off."""
    return os.environ.get(CAPTURE_ENV, "1").strip().lower() not in ("0", "false", "no")


def _send(
    arguments: argparse.Namespace, event: dict[str, Any], learnings: list[Learning], *, seconds: float
) -> int:
    """Send the learnings not sent before in this session, as drafts; always 0."""
    if not learnings:
        return 0
    session = event.get("session_id")
    state = _state_file(session, getattr(arguments, "source", SOURCE))
    sent = _read_sent(state)
    fresh = [learning for learning in learnings if learning.fingerprint not in sent][:MAX_PER_REQUEST]
    if not fresh:
        print("memoryhub: already sent for review in this session", file=sys.stderr)
        return 0
    source = session[:MAX_SOURCE_SESSION_CHARS] if isinstance(session, str) else ""
    text = "\n\n".join(learning.as_draft_text() for learning in fresh)
    try:
        with MemoryHubApi(load_config(arguments), deadline=time.monotonic() + seconds) as api:
            # Learnings, not a transcript: nothing to keep as a conversation.
            body = {
                "transcript": text,
                "source_session": source,
                "captured": True,
                "keep_conversation": False,
            }
            answer = api.post("drafts/extract/", body)
    except (ApiError, ConfigError) as exc:
        print(f"memoryhub: {_count(fresh)} not sent for review ({exc})", file=sys.stderr)
        return 0
    except Exception as exc:  # a hook never fails the agent
        print(f"memoryhub: {_count(fresh)} not sent for review ({type(exc).__name__})", file=sys.stderr)
        return 0
    _remember(state, sent, [learning.fingerprint for learning in fresh])
    print(f"memoryhub: {_count(fresh)} sent for review; {_outcome(answer)}", file=sys.stderr)
    return 0


def _outcome(answer: Any) -> str:
    """What the server made of it: drafts, and for a team that saves captures straight to
    memory, entries saved and confirmed (the server decides; the hook only reports)."""
    counts = {name: len(answer.get(name) or []) if isinstance(answer, dict) else 0 for name in ANSWER_PARTS}
    to_memory = counts["memories"] or counts["confirmed"]
    return ", ".join(
        text.format(counts[name])
        for name, text in ANSWER_PARTS.items()
        if counts[name] or (name == "drafts" and not to_memory)
    )


ANSWER_PARTS = {
    "drafts": "{} new draft(s)",
    "corroborated": "{} pending draft(s) corroborated",
    "memories": "{} saved to memory",
    "confirmed": "{} saved entry(ies) confirmed",
}


def _count(learnings: list[Learning]) -> str:
    return "1 learning" if len(learnings) == 1 else f"{len(learnings)} learnings"


def _state_file(claude_session_id: Any, source: str = SOURCE) -> Path | None:
    if isinstance(claude_session_id, str) and SAFE_SESSION_ID.match(claude_session_id):
        return config_dir() / "captured" / f"{source}-{claude_session_id}.json"
    return None  # no usable id: nothing remembered, the server's own check still applies


def _read_sent(state: Path | None) -> list[str]:
    if state is None:
        return []
    try:
        sent = json.loads(state.read_text())
    except (OSError, ValueError):
        return []
    return [item for item in sent if isinstance(item, str)] if isinstance(sent, list) else []


def _remember(state: Path | None, sent: list[str], fingerprints: list[str]) -> None:
    if state is None:
        return
    kept = [*sent, *fingerprints][-MAX_REMEMBERED:]
    try:
        state.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_atomically(state, json.dumps(kept).encode(), existed=state.exists())
    except OSError as exc:
        print(f"memoryhub: could not remember what was sent: {exc.strerror or exc}", file=sys.stderr)
