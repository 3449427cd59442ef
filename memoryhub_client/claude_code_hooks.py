"""`memoryhub hook claude-code session-start | session-end`: Claude Code's SessionStart and
SessionEnd hooks (`memoryhub connect claude-code` writes them into .claude/settings.json;
the capture hooks, PreCompact, PostToolUseFailure and UserPromptSubmit, are in
memoryhub_client.capture_hooks).

session-start prints what Claude Code adds to the model's context (a SessionStart hook's
stdout): the team's memory block for the project and a short guide to MemoryHub's tools.
It also boots a MemoryHub session, so other agents see this one live, and keeps its id
in a state file keyed by Claude Code's session id; session-end ends it.

A hook never blocks the agent: when the server cannot be reached, the context says so in
one line and the command still exits 0. Its time is bounded: stdin is read for at most
STDIN_SECONDS (a client that never closes it cannot hold the hook) and MAX_STDIN_BYTES,
and every request to the server shares one budget of SERVER_SECONDS; `memoryhub
connect` gives the client CLIENT_TIMEOUT_SECONDS, above both, to kill a hook that still
runs (docs/agents.md, "Hooks that cannot hurt the client")."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from memoryhub_client.api import ApiError, MemoryHubApi, quote_key
from memoryhub_client.config import ClientConfig, ConfigError, add_connection_flags, config_dir, load_config
from memoryhub_client.drafts import send_session_transcript
from memoryhub_client.section import write_atomically

SOURCE = "claude-code"
# Codex CLI runs the same hooks: its SessionStart and UserPromptSubmit inputs have Claude
# Code's fields and its SessionStart stdout enters the context (docs/agents.md, "Other
# clients' hooks"). Its sessions are registered, and their state kept, under its name.
CODEX = "codex"
CODEX_EVENTS = ("session-start", "user-prompt-submit")
SAFE_SESSION_ID = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
MAX_STDIN_BYTES = 1_000_000
# Claude Code writes the hook's JSON and closes stdin at once; more waiting is a stuck pipe.
STDIN_SECONDS = 3.0
SERVER_SECONDS = 20.0
# What `memoryhub connect` writes as the client's timeout for each hook: past the hook's
# own bounds (stdin, the server, the interpreter's start), so it only ever stops a hook
# that something unforeseen holds.
CLIENT_TIMEOUT_SECONDS = 40
MAX_PROJECT_CHARS = 200  # the session API's limit
HOOK_ANCHOR_PAGES = 1  # file anchors the session-start hook checks: one page (200)

# The core MCP tools only: the full list is an opt-in (docs/agents.md, "Tool surfaces").
GUIDE = """\
## Using MemoryHub (the team's shared memory)

The block above is what the team already knows. While you work:
- Before deciding something the team may have settled, search: the `memory_search` MCP tool
  (or `memoryhub search "..."` in the shell); `memory_get` reads an entry in full.
- When you learn something the next agent should know (a lesson, a decision, a fact about this
  project), save it with `memory_save` (`memoryhub save KEY "text" --type lesson`). Saving an
  existing key needs a `supersede_reason`: say what changed. Never save secrets.
"""


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    hook = commands.add_parser(
        "hook",
        help="coding-agent hooks (Claude Code's, Codex's, Cursor's and Windsurf's)",
    )
    clients = hook.add_subparsers(dest="client", required=True)
    claude = clients.add_parser("claude-code", help="Claude Code hooks")
    events = claude.add_subparsers(dest="event", required=True)
    for event, handler, text in (
        ("session-start", run_session_start, "print the memory block and a guide; register the session"),
        (
            "session-end",
            run_session_end,
            "send the transcript for extraction drafts; end the session that session-start registered",
        ),
    ):
        parser = events.add_parser(event, help=text, description=text)
        parser.add_argument(
            "--project", default=None, help="the project (default: the worktree's folder name)"
        )
        add_connection_flags(parser)
        parser.set_defaults(handler=handler)
    from memoryhub_client.capture_hooks import add_events

    for parser in add_events(events):
        parser.add_argument("--project", default=None, help=argparse.SUPPRESS)
        add_connection_flags(parser)
    claude.set_defaults(source=SOURCE)
    codex = clients.add_parser(CODEX, help="Codex CLI hooks (SessionStart, UserPromptSubmit)")
    codex_events = codex.add_subparsers(dest="event", required=True)
    start = codex_events.add_parser("session-start", help="print the memory block and a guide")
    start.set_defaults(handler=run_session_start)
    for parser in [start, *add_events(codex_events, only=CODEX_EVENTS)]:
        parser.add_argument(
            "--project", default=None, help="the project (default: the worktree's folder name)"
        )
        add_connection_flags(parser)
    codex.set_defaults(source=CODEX)
    from memoryhub_client import cursor_hooks

    cursor_hooks.register(clients)


def run_session_start(arguments: argparse.Namespace) -> int:
    print(session_start_text(arguments, read_hook_input()), end="")
    return 0


def session_start_text(arguments: argparse.Namespace, event: dict[str, Any]) -> str:
    """What session-start adds to the model's context (`session_id`, `cwd` of the event):
    the memory block and the guide, or one line saying why the block is missing."""
    cwd = str(event.get("cwd") or os.getcwd())
    source = getattr(arguments, "source", SOURCE)
    state = state_file(event.get("session_id"), cwd, source)
    try:
        config = load_config(arguments)
        project = config.project or project_name(Path(cwd))
        with MemoryHubApi(config, deadline=time.monotonic() + SERVER_SECONDS) as api:
            block = _start(api, config, state, project=project, cwd=cwd, source=source)
            _report_file_anchors(api, Path(cwd))
    except (ApiError, ConfigError) as exc:
        return f"MemoryHub: the team's memory could not be loaded ({exc}).\n" + GUIDE
    return (block.rstrip("\n") + "\n\n" + GUIDE) if block else GUIDE


def _report_file_anchors(api: MemoryHubApi, cwd: Path) -> None:
    """Tell the server which of the team's file anchors exist in this worktree (one page
    of them: bounded). Best effort: whatever goes wrong, the hook goes on."""
    from memoryhub_client.verify import report_worktree

    try:
        report_worktree(api, cwd, max_pages=HOOK_ANCHOR_PAGES)
    except Exception as exc:  # a hook never fails on this
        print(f"memoryhub: file anchors not reported: {type(exc).__name__}", file=sys.stderr)


def run_session_end(arguments: argparse.Namespace) -> int:
    end_session(arguments, read_hook_input())
    return 0


def end_session(arguments: argparse.Namespace, event: dict[str, Any]) -> None:
    """Send the transcript for drafts, then end the session session-start registered
    (`session_id`, `cwd`, `transcript_path` of the event). Never raises."""
    deadline = time.monotonic() + SERVER_SECONDS
    # The session's transcript goes to drafts/extract/ first, best effort (memoryhub_client.drafts).
    send_session_transcript(arguments, event, deadline=deadline)
    source = getattr(arguments, "source", SOURCE)
    state = state_file(event.get("session_id"), str(event.get("cwd") or os.getcwd()), source)
    saved = _read_state(state)
    if saved is None:
        return
    try:
        with MemoryHubApi(load_config(arguments), deadline=deadline) as api:
            api.delete(f"sessions/{quote_key(saved['session_id'])}/")
    except (ApiError, ConfigError) as exc:
        print(f"memoryhub: could not end the session: {exc}", file=sys.stderr)
        if getattr(exc, "status", None) != 404:
            return  # keep the state: a later session-end may succeed
    except Exception as exc:  # a hook never fails the agent
        print(f"memoryhub: could not end the session: {type(exc).__name__}", file=sys.stderr)
        return
    state.unlink(missing_ok=True)


def _start(
    api: MemoryHubApi, config: ClientConfig, state: Path, *, project: str, cwd: str, source: str = SOURCE
) -> str:
    """Boot (or, on a resume or compaction, keep alive) the session; answer the memory block."""
    saved = _read_state(state)
    if saved is not None and saved.get("team") == api.team and saved.get("url") == config.url:
        try:
            api.patch(f"sessions/{quote_key(saved['session_id'])}/", {"project": project})
        except ApiError as exc:
            if exc.status not in (404, 409):  # gone or ended: boot a new one below
                raise
        else:
            return str(api.get("injection/", project=project).get("text") or "")
    booted = api.post(
        "sessions/",
        {"source": source, "project": project, "cwd": cwd, "pid": os.getppid(), "host": socket.gethostname()},
    )
    state.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    record = {"session_id": booted["session"]["id"], "team": api.team, "url": config.url}
    write_atomically(state, json.dumps(record).encode(), existed=state.exists())
    injection = booted.get("injection")
    if injection is None:  # the boot could not build it; ask once more
        injection = api.get("injection/", project=project).get("text")
    return str(injection or "")


def read_hook_input() -> dict[str, Any]:
    """The hook's JSON on stdin (session_id, cwd, ...); {} when there is none, or none
    complete within the bounds."""
    if sys.stdin is None or sys.stdin.isatty():
        return {}
    raw = read_bounded(sys.stdin.fileno(), max_bytes=MAX_STDIN_BYTES, seconds=STDIN_SECONDS)
    try:
        event = json.loads(raw) if raw.strip() else {}
    except (json.JSONDecodeError, UnicodeDecodeError):
        return {}
    return event if isinstance(event, dict) else {}


def read_bounded(fd: int, *, max_bytes: int, seconds: float) -> bytes:
    """What the file descriptor gives until its end, `max_bytes` or `seconds`, whichever
    comes first. The read runs in a daemon thread, so a writer that never closes the pipe
    holds neither the hook nor its exit (os.read is the one blocking call that works on
    a pipe on every platform)."""
    chunks: list[bytes] = []
    lock = threading.Lock()
    finished = threading.Event()

    def read() -> None:
        size = 0
        try:
            while size < max_bytes:
                chunk = os.read(fd, min(65536, max_bytes - size))
                if not chunk:
                    break
                with lock:
                    chunks.append(chunk)
                size += len(chunk)
        except OSError:
            pass
        finally:
            finished.set()

    threading.Thread(target=read, name="hook-stdin", daemon=True).start()
    finished.wait(seconds)
    with lock:
        return b"".join(chunks)


def state_file(claude_session_id: Any, cwd: str, source: str = SOURCE) -> Path:
    """Where session-start keeps the MemoryHub session id for session-end."""
    if isinstance(claude_session_id, str) and SAFE_SESSION_ID.match(claude_session_id):
        name = claude_session_id
    else:  # no usable id: one state per worktree
        name = "cwd-" + hashlib.sha256(cwd.encode()).hexdigest()[:32]
    return config_dir() / "sessions" / f"{source}-{name}.json"


def project_name(cwd: Path) -> str:
    """The worktree's folder name (the repository's top folder when inside one)."""
    for folder in (cwd, *cwd.parents):
        if (folder / ".git").exists():
            return folder.name[:MAX_PROJECT_CHARS]
    return cwd.name[:MAX_PROJECT_CHARS]


def _read_state(state: Path) -> dict[str, Any] | None:
    try:
        record = json.loads(state.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or not isinstance(record.get("session_id"), str):
        return None
    return record
