"""The capture hooks (`memoryhub hook claude-code post-tool-use-failure |
user-prompt-submit | pre-compact`), run as Claude Code runs them: the JSON Claude Code
writes on stdin for PostToolUseFailure, UserPromptSubmit and PreCompact (its hooks
reference: the common fields session_id, transcript_path, cwd, permission_mode and
hook_event_name, then the event's own), against the real server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from freshness.models import Draft, DraftState
from memories.models import Memory
from teams.models import Team
from teams.scope import team_scope
from tests.client.conftest import Cli, server_env
from tests.conftest import make_agent
from tests.mcp.conftest import Server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]  # runs `memoryhub`

TOKEN = "ghp_" + "Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8"
UNREACHABLE = "http://127.0.0.1:9"


def common(event: str, tmp_path: Path, session: str = "cc-session-1") -> dict[str, Any]:
    return {
        "session_id": session,
        "transcript_path": str(tmp_path / "transcript.jsonl"),
        "cwd": str(tmp_path),
        "permission_mode": "default",
        "hook_event_name": event,
    }


def tool_failure(tmp_path: Path, command: str, error: str, **extra: Any) -> str:
    return json.dumps(
        {
            **common("PostToolUseFailure", tmp_path),
            "tool_name": "Bash",
            "tool_input": {"command": command, "description": "Run it"},
            "tool_use_id": "toolu_01ABC123",
            "error": error,
            "is_interrupt": False,
            **extra,
        }
    )


def prompt(tmp_path: Path, text: str) -> str:
    return json.dumps({**common("UserPromptSubmit", tmp_path), "prompt": text})


def pre_compact(tmp_path: Path, session: str = "cc-session-1") -> str:
    return json.dumps(
        {**common("PreCompact", tmp_path, session), "trigger": "auto", "custom_instructions": ""}
    )


def drafts_of(team: Team) -> list[Draft]:
    with team_scope(team.id):
        return list(Draft.objects.filter(team=team).order_by("created_at"))


def memories_of(team: Team) -> int:
    with team_scope(team.id):
        return Memory.objects.filter(team=team).count()


MIGRATE_ERROR = (
    "Exit code 1\n"
    'django.db.utils.OperationalError: connection to server at "localhost" failed\n'
    f"    DATABASE_URL=postgres://app:{TOKEN}@localhost/app\n"
)


def test_a_tool_failure_becomes_one_scrubbed_pending_draft(
    mcp_server: Server, team: Team, cli: Cli, tmp_path: Path
) -> None:
    env = server_env(mcp_server, "alpha", make_agent(team, "claude", ["read", "write"]).token)
    event = tool_failure(tmp_path, "python manage.py migrate", MIGRATE_ERROR)

    first = cli("hook", "claude-code", "post-tool-use-failure", input=event, **env)
    again = cli("hook", "claude-code", "post-tool-use-failure", input=event, **env)

    assert (first.returncode, first.stdout) == (0, ""), first.stderr
    assert "1 learning sent for review; 1 new draft(s)" in first.stderr
    assert (again.returncode, again.stdout) == (0, "")
    assert "already sent for review" in again.stderr
    [draft] = drafts_of(team)
    assert draft.state == DraftState.PENDING and draft.type == "lesson"
    assert draft.content.startswith("`python manage.py migrate` failed: django.db.utils.OperationalError")
    assert draft.source_session == "cc-session-1"
    assert TOKEN not in draft.content + draft.source_excerpt
    assert memories_of(team) == 0  # a draft for a person, never an active memory


def test_other_sessions_meeting_the_same_failure_corroborate_the_one_pending_draft(
    mcp_server: Server, team: Team, cli: Cli, tmp_path: Path
) -> None:
    env = server_env(mcp_server, "alpha", make_agent(team, "claude", ["read", "write"]).token)
    runs = []
    # The same failure three times, the third at another line of the Makefile.
    for session, line in (("one", 12), ("two", 12), ("three", 31)):
        error = f"Exit code 2\nmake: *** [Makefile:{line}: build] Error 127\nmake: protoc: No such file or directory"
        event = json.loads(tool_failure(tmp_path, "make build", error))
        ran = cli(
            "hook",
            "claude-code",
            "post-tool-use-failure",
            input=json.dumps({**event, "session_id": session}),
            **env,
        )
        assert (ran.returncode, ran.stdout) == (0, ""), ran.stderr
        runs.append(ran.stderr)

    [draft] = drafts_of(team)
    assert "Makefile:12" in draft.content and draft.source_session == "one"
    assert draft.corroborated == 2 and draft.last_corroborated_at is not None
    assert "1 new draft(s)" in runs[0] and "corroborated" not in runs[0]
    assert "0 new draft(s), 1 pending draft(s) corroborated" in runs[1]
    assert "0 new draft(s), 1 pending draft(s) corroborated" in runs[2]


@pytest.mark.parametrize(
    "event",
    [
        {"tool_name": "Read", "tool_input": {"file_path": "/nope.py"}, "error": "File does not exist."},
        {
            "tool_name": "Bash",
            "tool_input": {"command": "pytest"},
            "error": "Interrupted",
            "is_interrupt": True,
        },
        {"tool_name": "Bash", "tool_input": {"command": "grep -r foo ."}, "error": "Exit code 1"},
        {"tool_name": "Bash", "tool_input": {"command": "pip install x"}, "error": "Read timed out."},
    ],
    ids=["lookup", "interrupt", "probe", "transient"],
)
def test_a_failure_that_is_no_learning_never_reaches_the_network(
    cli: Cli, tmp_path: Path, event: dict[str, Any]
) -> None:
    payload = json.dumps({**common("PostToolUseFailure", tmp_path), "tool_use_id": "toolu_x", **event})
    ran = cli(
        "hook", "claude-code", "post-tool-use-failure", "--url", UNREACHABLE, "--team", "alpha",
        input=payload, MEMORYHUB_TOKEN="mh_any-token-0123",
    )  # fmt: skip
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, "", "")


def test_a_correction_becomes_a_draft_and_an_ordinary_prompt_does_not(
    mcp_server: Server, team: Team, cli: Cli, tmp_path: Path
) -> None:
    env = server_env(mcp_server, "alpha", make_agent(team, "claude", ["read", "write"]).token)
    ordinary = cli(
        "hook", "claude-code", "user-prompt-submit", input=prompt(tmp_path, "Add a CSV export."), **env
    )
    corrected = cli(
        "hook", "claude-code", "user-prompt-submit",
        input=prompt(tmp_path, f"No, we use pnpm here, not npm. The registry token is {TOKEN}."), **env,
    )  # fmt: skip

    assert (ordinary.returncode, ordinary.stdout, ordinary.stderr) == (0, "", "")
    # UserPromptSubmit's stdout would enter the model's context: the hook prints nothing there.
    assert (corrected.returncode, corrected.stdout) == (0, ""), corrected.stderr
    [draft] = drafts_of(team)
    assert draft.content.startswith('the user corrected the agent: "No, we use pnpm here, not npm.')
    assert TOKEN not in draft.content + draft.source_excerpt
    assert memories_of(team) == 0


def transcript_line(role: str, content: Any) -> str:
    return json.dumps(
        {"type": role, "sessionId": "cc-session-1", "message": {"role": role, "content": content}}
    )


def write_transcript(path: Path) -> None:
    call = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "npm test"}}
    retry = {
        "type": "tool_use",
        "id": "toolu_2",
        "name": "Bash",
        "input": {"command": "npm test -- --runInBand"},
    }
    path.write_text(
        "\n".join(
            [
                transcript_line("user", "Run the tests please."),
                transcript_line("assistant", [call]),
                transcript_line(
                    "user",
                    [
                        {
                            "type": "tool_result",
                            "tool_use_id": "toolu_1",
                            "is_error": True,
                            "content": "Exit code 1\nError: ENOSPC: System limit for number of file watchers reached",
                        }
                    ],
                ),
                transcript_line("assistant", [retry]),
                transcript_line(
                    "user", [{"type": "tool_result", "tool_use_id": "toolu_2", "content": "Tests: 40 passed"}]
                ),
                transcript_line("user", "Don't run the whole suite again, it takes ten minutes."),
                "not JSON {",
            ]
        )
        + "\n"
    )


def test_pre_compact_sends_the_transcripts_learnings_with_the_fix_once(
    mcp_server: Server, team: Team, cli: Cli, tmp_path: Path
) -> None:
    env = server_env(mcp_server, "alpha", make_agent(team, "claude", ["read", "write"]).token)
    write_transcript(tmp_path / "transcript.jsonl")

    first = cli("hook", "claude-code", "pre-compact", input=pre_compact(tmp_path), **env)
    again = cli("hook", "claude-code", "pre-compact", input=pre_compact(tmp_path), **env)

    assert (first.returncode, first.stdout) == (0, ""), first.stderr
    assert "2 learnings sent for review" in first.stderr
    assert "already sent" in again.stderr
    contents = sorted(d.content for d in drafts_of(team))
    assert contents == [
        "`npm test` failed: Error: ENOSPC: System limit for number of file watchers reached; "
        "then `npm test -- --runInBand` worked",
        'the user corrected the agent: "Don\'t run the whole suite again, it takes ten minutes."',
    ]


@pytest.mark.parametrize(
    ("event", "payload"),
    [
        (
            "post-tool-use-failure",
            lambda p: tool_failure(p, "cargo build", "error[E0432]: unresolved import"),
        ),
        ("user-prompt-submit", lambda p: prompt(p, "No, never edit the generated files by hand.")),
        ("pre-compact", pre_compact),
    ],
)
def test_each_hook_exits_0_with_a_clear_message_when_the_server_cannot_be_reached(
    cli: Cli, tmp_path: Path, event: str, payload: Any
) -> None:
    write_transcript(tmp_path / "transcript.jsonl")
    ran = cli(
        "hook", "claude-code", event, "--url", UNREACHABLE, "--team", "alpha",
        input=payload(tmp_path), MEMORYHUB_TOKEN="mh_any-token-0123",
    )  # fmt: skip
    assert (ran.returncode, ran.stdout) == (0, "")
    assert "not sent for review (cannot reach" in ran.stderr
    # Not remembered as sent: a later run, with the server back, sends it.
    assert not (cli.home / ".config" / "memoryhub" / "captured").exists()


def test_another_teams_token_drafts_nothing_in_either_team(
    mcp_server: Server, team: Team, other_team: Team, cli: Cli, tmp_path: Path
) -> None:
    intruder = make_agent(other_team, "bravo-claude", ["read", "write"]).token
    ran = cli(
        "hook", "claude-code", "user-prompt-submit",
        input=prompt(tmp_path, "No, deploys go through the release branch only."),
        **server_env(mcp_server, "alpha", intruder),
    )  # fmt: skip
    assert (ran.returncode, ran.stdout) == (0, "")
    assert "not found (404 not_found)" in ran.stderr and intruder not in ran.stderr
    assert drafts_of(team) == [] and drafts_of(other_team) == []


def test_a_no_that_answers_the_agents_question_is_no_draft(
    mcp_server: Server, team: Team, cli: Cli, tmp_path: Path
) -> None:
    env = server_env(mcp_server, "alpha", make_agent(team, "claude", ["read", "write"]).token)
    answer = "No, keep them separate, it's easier to review that way."
    asked = transcript_line("assistant", [{"type": "text", "text": "Shall I squash the six commits?"}])
    (tmp_path / "transcript.jsonl").write_text(asked + "\n" + transcript_line("user", answer) + "\n")

    ran = cli("hook", "claude-code", "user-prompt-submit", input=prompt(tmp_path, answer), **env)

    assert (ran.returncode, ran.stdout) == (0, ""), ran.stderr
    assert drafts_of(team) == []
    # The same words with no question before them correct the agent.
    (tmp_path / "transcript.jsonl").write_text(
        transcript_line("assistant", [{"type": "text", "text": "Done."}])
    )
    again = cli("hook", "claude-code", "user-prompt-submit", input=prompt(tmp_path, answer), **env)
    assert again.returncode == 0, again.stderr
    [draft] = drafts_of(team)
    assert draft.content.startswith('the user corrected the agent: "No, keep them separate')
