"""`memoryhub hook claude-code session-start | session-end`, run as Claude Code runs them
(the hook's JSON on stdin), against the real server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agents.models import AgentSession
from memories import writes
from teams.models import Team
from teams.scope import team_scope
from tests.client.conftest import Cli, server_env
from tests.conftest import make_agent
from tests.mcp.conftest import Server

pytestmark = pytest.mark.django_db(transaction=True)


def hook_input(session_id: str, cwd: Path, event: str = "SessionStart") -> str:
    return json.dumps(
        {"session_id": session_id, "cwd": str(cwd), "hook_event_name": event, "source": "startup"}
    )


def sessions_of(team: Team) -> list[AgentSession]:
    with team_scope(team.id):
        return list(AgentSession.objects.filter(team=team).order_by("started_at"))


def test_session_start_prints_the_block_and_the_guide_and_registers_the_session_until_session_end(
    mcp_server: Server, team: Team, cli: Cli, tmp_path: Path
) -> None:
    with team_scope(team.id):
        writes.save_memory(
            team=team, key="stack", content="We deploy with Kubernetes.", type_name="identity", updated_by="t"
        )
        writes.save_memory(
            team=team, key="shop-only", content="Prices are in euros.", project="shop", updated_by="t"
        )
        writes.save_memory(
            team=team, key="blog-only", content="Posts are in markdown.", project="blog", updated_by="t"
        )
    worktree = tmp_path / "shop"
    (worktree / ".git").mkdir(parents=True)
    (worktree / "src").mkdir()
    env = server_env(mcp_server, "alpha", make_agent(team, "claude", ["read", "write"]).token)

    started = cli(
        "hook", "claude-code", "session-start", input=hook_input("abc-123", worktree / "src"), **env
    )

    assert started.returncode == 0, started.stderr
    assert "We deploy with Kubernetes." in started.stdout
    assert "Prices are in euros." in started.stdout  # the project: the repository's folder name
    assert "Posts are in markdown." not in started.stdout
    assert "## Using MemoryHub" in started.stdout and "memory_search" in started.stdout
    [session] = sessions_of(team)
    assert (session.source, session.project, session.cwd, session.ended_at) == (
        "claude-code", "shop", str(worktree / "src"), None
    )  # fmt: skip
    state = cli.home / ".config" / "memoryhub" / "sessions" / "claude-code-abc-123.json"
    assert json.loads(state.read_text())["session_id"] == str(session.id)

    # Claude Code runs SessionStart again on a resume or after compaction: same session.
    resumed = cli(
        "hook", "claude-code", "session-start", input=hook_input("abc-123", worktree / "src"), **env
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "We deploy with Kubernetes." in resumed.stdout
    assert [s.id for s in sessions_of(team)] == [session.id]

    ended = cli(
        "hook", "claude-code", "session-end", input=hook_input("abc-123", worktree, "SessionEnd"), **env
    )
    assert ended.returncode == 0, ended.stderr
    [session] = sessions_of(team)
    assert session.ended_at is not None
    assert not state.exists()


def test_session_start_never_blocks_the_agent_and_shows_no_other_team(
    mcp_server: Server, team: Team, other_team: Team, cli: Cli, tmp_path: Path
) -> None:
    with team_scope(team.id):
        writes.save_memory(
            team=team, key="secret-plan", content="Alpha ships Zorblax.", type_name="identity", updated_by="t"
        )
    intruder = make_agent(other_team, "bravo-claude", ["read", "write"]).token

    wrong_team = cli(
        "hook", "claude-code", "session-start", input=hook_input("s-1", tmp_path), **server_env(mcp_server, "alpha", intruder)
    )  # fmt: skip
    unreachable = cli(
        "hook", "claude-code", "session-start", input=hook_input("s-2", tmp_path),
        **{**server_env(mcp_server, "bravo", intruder), "MEMORYHUB_URL": "http://127.0.0.1:9"},
    )  # fmt: skip

    for run in (wrong_team, unreachable):
        assert run.returncode == 0, run.stderr
        assert run.stdout.startswith("MemoryHub: the team's memory could not be loaded (")
        assert "## Using MemoryHub" in run.stdout
        assert intruder not in run.stdout + run.stderr
        assert "Zorblax" not in run.stdout + run.stderr
    assert "not found (404 not_found)" in wrong_team.stdout
    assert sessions_of(team) == [] and sessions_of(other_team) == []
