"""The hooks beyond Claude Code's first five, run as their clients run them, with the JSON
each client writes on stdin (docs/agents.md, "Other clients' hooks"), against the real
server:

- Claude Code's PostToolUse on Bash whose `tool_response` (stdout, stderr, interrupted,
  isImage) shows a failure: the failure rules, the same state as PostToolUseFailure;
- Cursor's sessionStart, sessionEnd, beforeSubmitPrompt, postToolUse and
  postToolUseFailure (the common fields conversation_id, generation_id, model,
  hook_event_name, cursor_version, workspace_roots, user_email, transcript_path, then the
  event's own; its hooks reference), answering JSON on stdout;
- Windsurf's pre_user_prompt (agent_action_name, trajectory_id, execution_id, timestamp,
  tool_info.user_prompt; its Cascade hooks reference)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agents.models import AgentSession
from freshness.models import Draft
from memories.models import Memory
from memoryhub_client.claude_code_hooks import GUIDE
from teams.models import Team
from teams.scope import team_scope
from tests.client.conftest import Cli, server_env
from tests.conftest import make_agent
from tests.mcp.conftest import Server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]  # runs `memoryhub`

UNREACHABLE = "http://127.0.0.1:9"
TOKEN = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
OFFLINE = ("--url", UNREACHABLE, "--team", "alpha")


def drafts_of(team: Team) -> list[Draft]:
    with team_scope(team.id):
        return list(Draft.objects.filter(team=team).order_by("created_at"))


def memories_of(team: Team) -> int:
    with team_scope(team.id):
        return Memory.objects.filter(team=team).count()


# ---------------------------------------------------------------------- Claude Code PostToolUse


def post_tool_use(tmp_path: Path, command: str, response: dict[str, Any], session: str = "cc-1") -> str:
    return json.dumps(
        {
            "session_id": session,
            "transcript_path": str(tmp_path / "transcript.jsonl"),
            "cwd": str(tmp_path),
            "permission_mode": "default",
            "hook_event_name": "PostToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": command, "description": "Build it"},
            "tool_response": {"interrupted": False, "isImage": False, **response},
            "tool_use_id": "toolu_01XYZ",
        }
    )


NO_WEBPACK = "node:internal/modules/cjs/loader:1080\n  throw err;\nError: Cannot find module 'webpack'"


def test_a_shell_result_with_an_error_on_stderr_is_captured_once_with_post_tool_use_failure(
    mcp_server: Server, team: Team, cli: Cli, tmp_path: Path
) -> None:
    env = server_env(mcp_server, "alpha", make_agent(team, "claude", ["read", "write"]).token)
    event = post_tool_use(tmp_path, "npm run build", {"stdout": "> build\n", "stderr": NO_WEBPACK})

    ran = cli("hook", "claude-code", "post-tool-use", input=event, **env)

    assert (ran.returncode, ran.stdout) == (0, ""), ran.stderr
    assert "1 learning sent for review; 1 new draft(s)" in ran.stderr
    [draft] = drafts_of(team)
    assert draft.content == (
        "`npm run build` failed: node:internal/modules/cjs/loader:1080 / throw err; / "
        "Error: Cannot find module 'webpack'"
    )
    # One rule set, one memory of what was sent: the same failure as PostToolUseFailure
    # (Claude Code's `error` for it) is not sent again in this session.
    failure = json.dumps(
        {
            **json.loads(event),
            "hook_event_name": "PostToolUseFailure",
            "error": "Exit code 1\n" + NO_WEBPACK,
            "is_interrupt": False,
        }
    )
    again = cli("hook", "claude-code", "post-tool-use-failure", input=failure, **env)
    assert "already sent for review" in again.stderr
    assert len(drafts_of(team)) == 1


@pytest.mark.parametrize(
    ("command", "response"),
    [
        ("npm install", {"stdout": "added 3 packages", "stderr": "npm WARN deprecated inflight@1.0.6"}),
        ("npm run build", {"stdout": "", "stderr": NO_WEBPACK, "interrupted": True}),
        ("grep -r TODO src", {"stdout": "", "stderr": "error: no such pattern", "exitCode": 1}),
        ("pip install x", {"stdout": "", "stderr": "ERROR: Read timed out.", "exitCode": 1}),
        ("make", {"stdout": "built", "stderr": ""}),
    ],
    ids=["a-warning", "interrupted", "probe", "transient", "success"],
)
def test_a_shell_result_that_is_no_learning_never_reaches_the_network(
    cli: Cli, tmp_path: Path, command: str, response: dict[str, Any]
) -> None:
    ran = cli("hook", "claude-code", "post-tool-use", *OFFLINE, input=post_tool_use(tmp_path, command, response),
              MEMORYHUB_TOKEN="mh_any-token-0123")  # fmt: skip
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, "", "")


def test_a_result_with_a_non_zero_exit_status_or_is_error_is_a_failure(cli: Cli, tmp_path: Path) -> None:
    for response in (
        {"stdout": "", "stderr": "fatal: not a git repository", "exitCode": 128},
        {"is_error": True, "stdout": "", "stderr": "Permission denied (publickey)."},
    ):
        event = post_tool_use(tmp_path, "git push origin main", response)
        ran = cli(
            "hook", "claude-code", "post-tool-use", *OFFLINE, input=event, MEMORYHUB_TOKEN="mh_any-0123"
        )
        assert ran.returncode == 0 and "1 learning not sent for review (cannot reach" in ran.stderr, response


# ---------------------------------------------------------------------- Cursor


def cursor(event: str, tmp_path: Path, **fields: Any) -> str:
    return json.dumps(
        {
            "conversation_id": "668320d2-2fd8-4888-b33c-2a466fec86e7",
            "generation_id": "490b90b7-a2ce-4c2c-bb76-cb77b125df2f",
            "model": "claude-sonnet-4-5",
            "hook_event_name": event,
            "cursor_version": "2.0.77",
            "workspace_roots": [str(tmp_path)],
            "user_email": "dev@example.com",
            "transcript_path": None,
            **fields,
        }
    )


def answer(ran: Any) -> dict[str, Any]:
    assert ran.returncode == 0, ran.stderr
    parsed: dict[str, Any] = json.loads(ran.stdout)
    return parsed


def test_cursor_session_start_answers_the_block_as_context_and_session_end_ends_it(
    mcp_server: Server, team: Team, cli: Cli, tmp_path: Path
) -> None:
    env = server_env(mcp_server, "alpha", make_agent(team, "cursor", ["read", "write"]).token)
    session = "668320d2-2fd8-4888-b33c-2a466fec86e7"
    start = {"session_id": session, "is_background_agent": False, "composer_mode": "agent"}

    started = cli("hook", "cursor", "session-start", input=cursor("sessionStart", tmp_path, **start), **env)

    context = answer(started)["additional_context"]
    assert context.endswith(GUIDE)
    with team_scope(team.id):
        [live] = AgentSession.objects.filter(team=team)
    assert (live.source, live.ended_at) == ("cursor", None)
    assert (cli.home / ".config" / "memoryhub" / "sessions" / f"cursor-{session}.json").exists()

    end = {"session_id": session, "reason": "user_close", "duration_ms": 45000, "is_background_agent": False,
           "final_status": "completed"}  # fmt: skip
    ended = cli("hook", "cursor", "session-end", input=cursor("sessionEnd", tmp_path, **end), **env)

    assert answer(ended) == {}
    with team_scope(team.id):
        live.refresh_from_db()
    assert live.ended_at is not None


def test_cursor_session_start_without_a_server_still_answers_valid_json(cli: Cli, tmp_path: Path) -> None:
    start = {"session_id": "s-1", "is_background_agent": False, "composer_mode": "agent"}
    ran = cli("hook", "cursor", "session-start", *OFFLINE, input=cursor("sessionStart", tmp_path, **start),
              MEMORYHUB_TOKEN="mh_any-token-0123")  # fmt: skip
    context = answer(ran)["additional_context"]
    assert context.startswith("MemoryHub: the team's memory could not be loaded (cannot reach")
    assert context.endswith(GUIDE)


def test_cursor_captures_a_correction_and_failed_shell_commands(
    mcp_server: Server, team: Team, cli: Cli, tmp_path: Path
) -> None:
    env = server_env(mcp_server, "alpha", make_agent(team, "cursor", ["read", "write"]).token)
    correction = cursor("beforeSubmitPrompt", tmp_path, prompt="No, we deploy with the Makefile, never by hand.",
                        attachments=[])  # fmt: skip
    shell_result = cursor(
        "postToolUse", tmp_path, tool_name="Shell", tool_input={"command": "cargo build"},
        tool_output=json.dumps({"exitCode": 101, "stdout": "", "stderr": "error[E0432]: unresolved import `tokio`"}),
        tool_use_id="tc-1", cwd=str(tmp_path), duration=5432,
    )  # fmt: skip
    failure = cursor(
        "postToolUseFailure", tmp_path, tool_name="Shell", tool_input={"command": "make deploy"},
        tool_use_id="tc-2", cwd=str(tmp_path), error_message=f"make: *** No rule to make target 'deploy'. {TOKEN}",
        failure_type="error", duration=120, is_interrupt=False,
    )  # fmt: skip

    prompted = cli("hook", "cursor", "before-submit-prompt", input=correction, **env)
    used = cli("hook", "cursor", "post-tool-use", input=shell_result, **env)
    failed = cli("hook", "cursor", "post-tool-use-failure", input=failure, **env)

    assert answer(prompted) == {"continue": True}  # never blocks the prompt
    assert answer(used) == {} and answer(failed) == {}
    contents = sorted(draft.content for draft in drafts_of(team))
    assert contents[0] == "`cargo build` failed: error[E0432]: unresolved import 'tokio'"
    assert contents[1].startswith("`make deploy` failed: make: *** No rule to make target 'deploy'.")
    assert contents[2] == 'the user corrected the agent: "No, we deploy with the Makefile, never by hand."'
    assert TOKEN not in "".join(contents)
    assert {draft.source_session for draft in drafts_of(team)} == {"668320d2-2fd8-4888-b33c-2a466fec86e7"}


@pytest.mark.parametrize(
    ("event", "fields"),
    [
        ("postToolUseFailure", {"tool_name": "Shell", "tool_input": {"command": "npm ci"},
                                "error_message": "Command timed out after 30s", "failure_type": "timeout"}),
        ("postToolUseFailure", {"tool_name": "Shell", "tool_input": {"command": "rm -rf build"},
                                "error_message": "Denied", "failure_type": "permission_denied"}),
        ("postToolUseFailure", {"tool_name": "Shell", "tool_input": {"command": "pytest"},
                                "error_message": "Aborted", "failure_type": "error", "is_interrupt": True}),
        ("postToolUse", {"tool_name": "Shell", "tool_input": {"command": "npm test"},
                         "tool_output": json.dumps({"exitCode": 0, "stdout": "All tests passed"})}),
        ("postToolUse", {"tool_name": "Shell", "tool_input": {"command": "ls"}, "tool_output": "not json {"}),
    ],
    ids=["timeout", "denied", "interrupted", "success", "unparsed-output"],
)  # fmt: skip
def test_cursor_failures_that_are_no_learning_never_reach_the_network(
    cli: Cli, tmp_path: Path, event: str, fields: dict[str, Any]
) -> None:
    handler = "post-tool-use-failure" if event == "postToolUseFailure" else "post-tool-use"
    ran = cli("hook", "cursor", handler, *OFFLINE, input=cursor(event, tmp_path, **fields),
              MEMORYHUB_TOKEN="mh_any-token-0123")  # fmt: skip
    assert (ran.returncode, ran.stderr) == (0, "")
    assert answer(ran) == {}


# ---------------------------------------------------------------------- Windsurf


def windsurf_prompt(text: str) -> str:
    return json.dumps(
        {
            "agent_action_name": "pre_user_prompt",
            "trajectory_id": "",
            "execution_id": "b2e1c3d4-0000-4000-8000-000000000001",
            "timestamp": "2026-11-28T14:00:00Z",
            "tool_info": {"user_prompt": text},
        }
    )


def test_windsurf_sends_a_correction_and_prints_nothing(
    mcp_server: Server, team: Team, cli: Cli, tmp_path: Path
) -> None:
    env = server_env(mcp_server, "alpha", make_agent(team, "windsurf", ["read", "write"]).token)
    ordinary = cli("hook", "windsurf", "pre-user-prompt", input=windsurf_prompt("Add a CSV export."), **env)
    corrected = cli("hook", "windsurf", "pre-user-prompt",
                    input=windsurf_prompt("Don't use moment.js, we use date-fns everywhere."), **env)  # fmt: skip

    assert (ordinary.returncode, ordinary.stdout, ordinary.stderr) == (0, "", "")
    assert (corrected.returncode, corrected.stdout) == (0, ""), corrected.stderr  # exit 2 would block
    [draft] = drafts_of(team)
    assert (
        draft.content == 'the user corrected the agent: "Don\'t use moment.js, we use date-fns everywhere."'
    )
    assert memories_of(team) == 0


# ---------------------------------------------------------------------- captures straight to memory


def turn_on_capture_to_memory(team: Team) -> None:
    from teams.team_settings import update_team_settings

    with team_scope(team.id):
        update_team_settings(team=team, changes={"capture_to_memory": True}, by="test")


@pytest.mark.parametrize("to_memory", [False, True], ids=["setting-off", "setting-on"])
def test_the_team_setting_decides_between_a_draft_and_a_lesson_entry(
    mcp_server: Server, team: Team, cli: Cli, tmp_path: Path, to_memory: bool
) -> None:
    if to_memory:
        turn_on_capture_to_memory(team)
    env = server_env(mcp_server, "alpha", make_agent(team, "claude", ["read", "write"]).token)
    runs = []
    for run, session in enumerate(("one", "one", "two", "three")):  # the first again: a retry
        error = f"fatal: could not read Username for 'https://github.com': terminal prompts disabled {TOKEN}"
        event = post_tool_use(tmp_path, "git push", {"stdout": "", "stderr": error}, session=session)
        # A fresh config folder each time: the client's memory of what it sent is not what is tested.
        ran = cli(
            "hook",
            "claude-code",
            "post-tool-use",
            input=event,
            XDG_CONFIG_HOME=str(tmp_path / str(run)),
            **env,
        )
        assert (ran.returncode, ran.stdout) == (0, ""), ran.stderr
        runs.append(ran.stderr)

    with team_scope(team.id):
        entries = list(Memory.objects.filter(team=team))
    if not to_memory:
        [draft] = drafts_of(team)
        assert (draft.state, draft.corroborated) == ("pending", 2)
        assert entries == []
        assert "1 new draft(s)" in runs[0] and "1 pending draft(s) corroborated" in runs[2]
        return
    assert drafts_of(team) == []
    [entry] = entries
    assert (entry.type, entry.auto_captured, entry.is_active) == ("lesson", True, True)
    assert entry.content.startswith("`git push` failed: fatal: could not read Username")
    assert TOKEN not in entry.content
    assert entry.metadata["capture"]["source_session"] == "one"
    assert entry.confirmed_by_count == 2  # sessions two and three; one's retry is no witness
    assert "1 saved to memory" in runs[0] and "draft" not in runs[0]
    assert "1 saved entry(ies) confirmed" not in runs[1]
    assert "1 saved entry(ies) confirmed" in runs[2] and "1 saved entry(ies) confirmed" in runs[3]


def test_cursor_session_end_sends_a_plain_text_transcript_for_drafts(
    mcp_server: Server, team: Team, cli: Cli, tmp_path: Path
) -> None:
    env = server_env(mcp_server, "alpha", make_agent(team, "cursor", ["read", "write"]).token)
    transcript = tmp_path / "agent-transcript.txt"
    transcript.write_text(
        "user:\nWhich payment provider do we use for the EU shop?\n\n"
        f"assistant:\nWe decided to use Paddle for the EU storefront. The key is {TOKEN}.\n"
    )
    end = {"session_id": "s-9", "reason": "completed", "duration_ms": 1000, "is_background_agent": False,
           "final_status": "completed"}  # fmt: skip
    event = json.loads(cursor("sessionEnd", tmp_path, **end))
    ended = cli("hook", "cursor", "session-end", input=json.dumps({**event, "transcript_path": str(transcript)}),
                **env)  # fmt: skip

    assert answer(ended) == {}
    [draft] = drafts_of(team)
    assert "Paddle" in draft.content and TOKEN not in draft.content + draft.source_excerpt
    assert draft.source_session == "s-9"
