"""Extraction drafts from the client: `memoryhub extract FILE` sends notes or a transcript
to POST drafts/extract/, and the Claude Code session-end hook sends the session's
transcript (hooks.run_session_end calls `send_session_transcript`).

A Claude Code transcript is a JSON Lines file (`transcript_path` in the hook's input):
one object a line, the conversation's turns with `type` "user" or "assistant" and a
`message` whose `content` is a string or a list of parts. Only the text parts of user and
assistant turns are kept (tool calls, tool results, thinking and meta lines are not),
as "user: ..." / "assistant: ..." paragraphs. The file is read bounded: at most its
last MAX_READ_BYTES, and the text sent is at most its last MAX_TRANSCRIPT_CHARS
characters, cut at a turn. The server scrubs credentials and drops code before any
extractor reads it; nothing is scrubbed here (the server is the one place that knows
the team's secrets)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memoryhub_client.api import ApiError, MemoryHubApi, hub_for
from memoryhub_client.config import ConfigError, add_connection_flags, load_config
from memoryhub_client.operations import MAX_SOURCE_SESSION_CHARS, MAX_TRANSCRIPT_CHARS

MAX_READ_BYTES = 8 * 1024 * 1024
MAX_LINE_CHARS = 2_000_000
SPEAKERS = ("user", "assistant")
# Set to 0 to keep the session-end hook from sending the transcript.
EXTRACT_ENV = "MEMORYHUB_EXTRACT_ON_SESSION_END"


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    text = "propose memories from notes or a transcript (drafts for review)"
    parser = commands.add_parser("extract", help=text, description=text)
    parser.add_argument("file", help="a text file, or a Claude Code transcript (.jsonl); - for stdin")
    parser.add_argument("--session", default="", help="where it came from (a session id or a label)")
    add_connection_flags(parser)
    parser.set_defaults(handler=run_extract)


def run_extract(arguments: argparse.Namespace) -> int:
    try:
        text = _read_input(arguments.file)
    except OSError as exc:
        print(f"memoryhub extract: cannot read {arguments.file}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    if not text.strip():
        print("memoryhub extract: nothing to extract", file=sys.stderr)
        return 2
    try:
        with hub_for(load_config(arguments)) as hub:
            answer = hub.extract_drafts(text, source_session=arguments.session[:MAX_SOURCE_SESSION_CHARS])
    except (ApiError, ConfigError) as exc:
        print(f"memoryhub extract: {exc}", file=sys.stderr)
        return 1
    drafts = answer["drafts"]
    print(f"{len(drafts)} draft(s) waiting for review")
    for draft in drafts:
        conflict = f" [{draft['conflict']}]" if draft["conflict"] else ""
        print(f"- {draft['type']}: {draft['content']}{conflict}")
    return 0


def _read_input(name: str) -> str:
    if name == "-":
        return sys.stdin.read(MAX_READ_BYTES)
    return session_text(Path(name))


def session_text(path: Path) -> str:
    """A session's text: a JSON Lines transcript's turns (transcript_text), or, for any
    other file (a transcript in another client's format), its last MAX_READ_BYTES as they are."""
    if path.suffix == ".jsonl":
        return transcript_text(path)
    with path.open("rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > MAX_READ_BYTES:
            handle.seek(size - MAX_READ_BYTES)
        raw = handle.read(MAX_READ_BYTES)
    return _tail(raw.decode("utf-8", "replace").replace("\x00", ""))


def send_session_transcript(
    arguments: argparse.Namespace, event: dict[str, Any], *, deadline: float | None = None
) -> None:
    """The session-end hook's part: the transcript at `transcript_path` to drafts/extract/,
    before `deadline` (MemoryHubApi's). Never raises: what goes wrong is one line on
    stderr, and the hook goes on."""
    if os.environ.get(EXTRACT_ENV, "1").strip() in ("0", "false", "no"):
        return
    path = event.get("transcript_path")
    if not isinstance(path, str) or not path:
        return
    try:
        text = session_text(Path(path))
        if not text.strip():
            return
        session = event.get("session_id")
        source = session[:MAX_SOURCE_SESSION_CHARS] if isinstance(session, str) else ""
        with MemoryHubApi(load_config(arguments), deadline=deadline) as api:
            answer = api.post(
                "drafts/extract/", {"transcript": text, "source_session": source, "source": "hook"}
            )
        made = len(answer.get("drafts") or [])
        if made:
            print(f"memoryhub: {made} draft(s) from this session wait for review", file=sys.stderr)
    except (ApiError, ConfigError) as exc:
        print(f"memoryhub: the transcript was not sent for drafts: {exc}", file=sys.stderr)
    except Exception as exc:  # a hook never fails on this
        print(f"memoryhub: the transcript was not sent for drafts: {type(exc).__name__}", file=sys.stderr)


def transcript_text(path: Path) -> str:
    """The user and assistant text of a Claude Code JSON Lines transcript, bounded (the
    module docstring)."""
    turns = (_turn(record) for record in transcript_records(path))
    return _tail("\n\n".join(turn for turn in turns if turn))


def transcript_records(path: Path) -> Iterator[Any]:
    """A Claude Code transcript's records, bounded: its last MAX_READ_BYTES, lines over
    MAX_LINE_CHARS and broken lines skipped."""
    with path.open("rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        start = max(0, size - MAX_READ_BYTES)
        handle.seek(start)
        raw = handle.read(MAX_READ_BYTES)
    lines = raw.split(b"\n")
    if start > 0:
        lines = lines[1:]  # the first line was cut by the seek
    for line in lines:
        if not line.strip() or len(line) > MAX_LINE_CHARS:
            continue
        try:
            yield json.loads(line)
        except ValueError:
            continue


def _turn(record: Any) -> str:
    if not isinstance(record, dict) or record.get("isMeta"):
        return ""
    message = record.get("message")
    role = record.get("type") or record.get("role")  # Claude Code's `type`; others' `role`
    if isinstance(message, dict):
        role = message.get("role", role)
        content = message.get("content")
    else:
        content = record.get("content")
    if role not in SPEAKERS:
        return ""
    parts: list[str] = []
    if isinstance(content, str):
        parts.append(content)
    elif isinstance(content, list):
        for part in content[:1000]:
            if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
                parts.append(part["text"])
    text = "\n".join(p.strip() for p in parts if p.strip()).replace("\x00", "")
    return f"{role}: {text}" if text else ""


def _tail(text: str) -> str:
    """The last MAX_TRANSCRIPT_CHARS characters, from the start of a paragraph."""
    if len(text) <= MAX_TRANSCRIPT_CHARS:
        return text
    tail = text[-MAX_TRANSCRIPT_CHARS:]
    cut = tail.find("\n\n")
    return tail[cut + 2 :] if 0 <= cut < MAX_TRANSCRIPT_CHARS // 2 else tail
