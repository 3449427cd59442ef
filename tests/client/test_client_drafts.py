"""Extraction drafts from the client, run as Claude Code and a person run it, against the
real server: the session-end hook sends the session's JSON Lines transcript (user and
assistant text only) to drafts/extract/ and never fails; `memoryhub extract FILE` sends
notes by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from freshness.models import Draft
from teams.models import Team
from teams.scope import team_scope
from tests.client.conftest import Cli, server_env
from tests.conftest import make_agent
from tests.mcp.conftest import Server

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN = "ghp_" + "M1n2B3v4C5x6Z7l8K9j0H1g2F3d4S5a6P7o8"


def line(kind: str, content: Any, **extra: Any) -> str:
    return json.dumps(
        {"type": kind, "sessionId": "claude-77", "message": {"role": kind, "content": content}, **extra}
    )


def write_transcript(path: Path) -> Path:
    path.write_text(
        "\n".join(
            [
                json.dumps({"type": "summary", "summary": "We decided to rewrite everything in Rust."}),
                line("user", "We decided to keep the monolith and split billing out later."),
                line("user", "Never force-push to main.", isMeta=True),
                line(
                    "assistant",
                    [
                        {"type": "thinking", "thinking": "We decided to delete the database."},
                        {
                            "type": "text",
                            "text": "Lesson learned: the flaky test was a timezone bug in the fixtures.",
                        },
                        {
                            "type": "tool_use",
                            "id": "t1",
                            "name": "Bash",
                            "input": {"command": "We decided rm -rf"},
                        },
                    ],
                ),
                line(
                    "user",
                    [{"type": "tool_result", "tool_use_id": "t1", "content": "We decided to drop prod."}],
                ),
                line("user", f"Our token is {TOKEN}, we always rotate it monthly."),
                "this line is not JSON {",
            ]
        )
        + "\n"
    )
    return path


def drafts_of(team: Team) -> list[Draft]:
    with team_scope(team.id):
        return list(Draft.objects.filter(team=team).order_by("source_start"))


def session_end(cli: Cli, transcript: Path | str, env: dict[str, str], cwd: Path) -> Any:
    event = {"session_id": "claude-77", "cwd": str(cwd), "hook_event_name": "SessionEnd",
             "transcript_path": str(transcript)}  # fmt: skip
    return cli("hook", "claude-code", "session-end", input=json.dumps(event), **env)


def test_session_end_sends_the_transcripts_conversation_text_for_drafts(
    mcp_server: Server, team: Team, cli: Cli, tmp_path: Path
) -> None:
    transcript = write_transcript(tmp_path / "claude-77.jsonl")
    env = server_env(mcp_server, "alpha", make_agent(team, "claude", ["read", "write"]).token)

    ended = session_end(cli, transcript, env, tmp_path)

    assert ended.returncode == 0, ended.stderr
    assert "draft(s) from this session wait for review" in ended.stderr
    drafts = drafts_of(team)
    contents = " ".join(d.content for d in drafts)
    assert "keep the monolith" in contents and "timezone bug" in contents
    for never in ("Rust", "force-push", "delete the database", "rm -rf", "drop prod", TOKEN):
        assert never not in contents and all(never not in d.source_excerpt for d in drafts), never
    assert {d.source_session for d in drafts} == {"claude-77"}
    assert {d.created_by for d in drafts} == {"claude"}


def test_session_end_never_fails_the_hook(mcp_server: Server, team: Team, cli: Cli, tmp_path: Path) -> None:
    transcript = write_transcript(tmp_path / "t.jsonl")
    reader = server_env(mcp_server, "alpha", make_agent(team, "reader", ["read"]).token)
    unreachable = {**reader, "MEMORYHUB_URL": "http://127.0.0.1:9"}

    refused = session_end(cli, transcript, reader, tmp_path)
    down = session_end(cli, transcript, unreachable, tmp_path)
    missing = session_end(cli, tmp_path / "nope.jsonl", reader, tmp_path)
    opted_out = cli("hook", "claude-code", "session-end",
                    input=json.dumps({"session_id": "x", "transcript_path": str(transcript)}),
                    **reader, MEMORYHUB_EXTRACT_ON_SESSION_END="0")  # fmt: skip
    garbage = cli("hook", "claude-code", "session-end", input="{not json", **reader)

    for result in (refused, down, missing, opted_out, garbage):
        assert result.returncode == 0, result.stderr
        assert "Traceback" not in result.stderr
    assert "the transcript was not sent for drafts: forbidden" in refused.stderr and "(403" in refused.stderr
    assert "the transcript was not sent for drafts: cannot reach" in down.stderr
    assert "the transcript was not sent for drafts: FileNotFoundError" in missing.stderr
    assert opted_out.stderr == ""
    assert drafts_of(team) == []


def test_a_huge_transcript_is_read_from_its_tail(
    mcp_server: Server, team: Team, cli: Cli, tmp_path: Path
) -> None:
    transcript = tmp_path / "big.jsonl"
    filler = line("user", "Just chatting about the weather and nothing in particular here. " * 50)
    with transcript.open("w") as handle:
        handle.write(line("user", "We decided to use Oracle for everything.") + "\n")
        for _ in range(4000):  # about 13 MB, over the client's read bound
            handle.write(filler + "\n")
        handle.write(line("user", "We decided to use Postgres for the ledger.") + "\n")
    env = server_env(mcp_server, "alpha", make_agent(team, "claude", ["read", "write"]).token)

    ended = session_end(cli, transcript, env, tmp_path)

    assert ended.returncode == 0, ended.stderr
    contents = [d.content for d in drafts_of(team)]
    assert any("Postgres for the ledger" in c for c in contents)
    assert not any("Oracle" in c for c in contents)


def test_extract_sends_a_notes_file_by_hand(mcp_server: Server, team: Team, cli: Cli, tmp_path: Path) -> None:
    notes = tmp_path / "notes.md"
    notes.write_text(
        "# Retro\n\nWe decided to freeze deploys on Fridays.\n\n```\nWe decided to ignore this code.\n```\n"
    )
    env = server_env(mcp_server, "alpha", make_agent(team, "ann", ["read", "write"]).token)

    done = cli("extract", str(notes), "--session", "retro-12", **env)
    empty = cli("extract", str(tmp_path / "missing.md"), **env)

    assert done.returncode == 0, done.stderr
    assert "1 draft(s) waiting for review" in done.stdout and "freeze deploys on Fridays" in done.stdout
    assert empty.returncode == 2 and "cannot read" in empty.stderr
    (draft,) = drafts_of(team)
    assert draft.source_session == "retro-12" and "ignore this code" not in draft.content
