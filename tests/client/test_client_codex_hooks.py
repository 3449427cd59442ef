"""`memoryhub hook codex session-start | user-prompt-submit`, run as Codex CLI runs them:
the JSON its hooks engine writes on stdin (its published input schemas: the common fields
session_id, transcript_path, cwd, hook_event_name, model, then SessionStart's `source`
and UserPromptSubmit's `turn_id` and `prompt`), against the real server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agents.models import AgentSession
from freshness.models import Draft
from memories import writes
from teams.models import Team
from teams.scope import team_scope
from tests.client.conftest import Cli, server_env
from tests.conftest import make_agent
from tests.mcp.conftest import Server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def codex_input(event: str, cwd: Path, **fields: Any) -> str:
    return json.dumps(
        {
            "session_id": "019a2b3c-codex-thread",
            "transcript_path": None,
            "cwd": str(cwd),
            "hook_event_name": event,
            "model": "gpt-5-codex",
            **fields,
        }
    )


def test_codex_session_start_prints_the_block_and_registers_a_codex_session(
    mcp_server: Server, team: Team, cli: Cli, tmp_path: Path
) -> None:
    with team_scope(team.id):
        writes.save_memory(
            team=team, key="stack", content="We deploy with Kubernetes.", type_name="identity", updated_by="t"
        )
    worktree = tmp_path / "shop"
    (worktree / ".git").mkdir(parents=True)
    env = server_env(mcp_server, "alpha", make_agent(team, "codex", ["read", "write"]).token)
    event = codex_input("SessionStart", worktree, source="startup")

    started = cli("hook", "codex", "session-start", input=event, **env)
    resumed = cli("hook", "codex", "session-start", input=event.replace("startup", "resume"), **env)

    # Codex adds SessionStart's plain stdout to the model's context.
    assert started.returncode == 0, started.stderr
    assert "We deploy with Kubernetes." in started.stdout and "## Using MemoryHub" in started.stdout
    assert resumed.returncode == 0 and "We deploy with Kubernetes." in resumed.stdout
    with team_scope(team.id):
        [session] = AgentSession.objects.filter(team=team)  # resumed: the same session
    assert (session.source, session.project, session.ended_at) == ("codex", "shop", None)
    state = cli.home / ".config" / "memoryhub" / "sessions" / "codex-019a2b3c-codex-thread.json"
    assert json.loads(state.read_text())["session_id"] == str(session.id)


def test_codex_user_prompt_submit_drafts_a_correction_and_prints_nothing(
    mcp_server: Server, team: Team, cli: Cli, tmp_path: Path
) -> None:
    env = server_env(mcp_server, "alpha", make_agent(team, "codex", ["read", "write"]).token)

    def submit(prompt: str) -> Any:
        event = codex_input("UserPromptSubmit", tmp_path, turn_id="turn-7", prompt=prompt)
        return cli("hook", "codex", "user-prompt-submit", input=event, **env)

    ordinary = submit("Add a CSV export to the orders page.")
    corrected = submit("No, we open PRs against develop, never main.")
    again = submit("No, we open PRs against develop, never main.")

    # UserPromptSubmit's stdout would enter the context: nothing goes there.
    assert [(r.returncode, r.stdout) for r in (ordinary, corrected, again)] == [(0, "")] * 3
    assert "1 learning sent for review; 1 new draft(s)" in corrected.stderr
    assert "already sent for review" in again.stderr
    with team_scope(team.id):
        [draft] = Draft.objects.filter(team=team)
    assert draft.content == 'the user corrected the agent: "No, we open PRs against develop, never main."'
    assert draft.source_session == "019a2b3c-codex-thread"
    assert (cli.home / ".config" / "memoryhub" / "captured" / "codex-019a2b3c-codex-thread.json").exists()
