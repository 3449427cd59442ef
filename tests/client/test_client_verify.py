"""`memoryhub verify` and the session-start hook's file-anchor report, run as an agent runs
them, against the real server: paths inside the worktree are checked, absolute paths and
paths leading out of it are reported missing with the reason, the server flags entries
whose file is gone."""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

import pytest

from freshness.models import AnchorCheck, Nudge, NudgeKind
from memories import writes
from memories.models import Memory
from memoryhub_client import claude_code_hooks
from memoryhub_client.api import MemoryHubApi
from memoryhub_client.config import ClientConfig
from teams.models import Team
from teams.scope import team_scope
from tests.client.conftest import Cli, server_env
from tests.client.test_client_hooks import hook_input
from tests.conftest import make_agent
from tests.mcp.conftest import Server

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.slow,
]  # runs the `memoryhub` command and git

ANCHORS = {
    "runbook": "docs/runbook.md",
    "gone-doc": "docs/gone.md",
    "escape": "../outside.txt",
    "absolute": "/etc/hostname",
    "sneaky-link": "docs/link-out",
}


def anchored(team: Team) -> None:
    with team_scope(team.id):
        for key, path in ANCHORS.items():
            writes.save_memory(
                team=team,
                key=key,
                content=f"See {key}.",
                anchor={"type": "file", "value": path},
                updated_by="t",
            )
        writes.save_memory(
            team=team,
            key="site",
            content="The status page.",
            anchor={"type": "url", "value": "https://example.com/"},
            updated_by="t",
        )


def worktree(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "docs" / "deep").mkdir(parents=True)
    (root / "docs" / "runbook.md").write_text("# Runbook\n")
    (tmp_path / "outside.txt").write_text("not the repository's\n")
    (root / "docs" / "link-out").symlink_to(tmp_path / "outside.txt")
    subprocess.run(["git", "init", "-q", str(root)], check=True, timeout=30)  # noqa: S603, S607
    return root


def checks_of(team: Team) -> dict[str, list[tuple[str, bool, str]]]:
    with team_scope(team.id):
        rows = AnchorCheck.objects.filter(team=team).order_by("checked_at", "id")
        found: dict[str, list[tuple[str, bool, str]]] = {}
        for check in rows.select_related("memory"):
            found.setdefault(check.memory.key, []).append((check.source, check.ok, check.detail))
        return found


def test_verify_checks_file_anchors_in_the_worktree_and_the_server_flags_the_missing(
    mcp_server: Server, team: Team, cli: Cli, tmp_path: Path
) -> None:
    anchored(team)
    root = worktree(tmp_path)
    env = server_env(mcp_server, "alpha", make_agent(team, "laptop", ["read", "write"]).token)

    first = cli("verify", "--worktree", str(root / "docs" / "deep"), "--json", **env)

    assert first.returncode == 0, first.stderr
    outcome = json.loads(first.stdout)
    assert outcome["worktree"] == str(root.resolve()) and outcome["checked"] == 5
    assert {m["key"]: m["reason"] for m in outcome["missing"]} == {
        "gone-doc": "not found",
        "escape": "outside the worktree",
        "absolute": "absolute path",
        "sneaky-link": "outside the worktree",
    }
    assert outcome["server"] == {"recorded": 5, "flagged": 0, "unflagged": 0}
    assert checks_of(team)["runbook"] == [("client", True, "")]
    assert checks_of(team)["escape"] == [("client", False, "outside the worktree")]
    assert "site" not in checks_of(team)

    second = cli("verify", cwd=root, **env)  # the current folder, in words

    assert second.returncode == 0, second.stderr
    assert "5 file anchors checked" in second.stdout and "1 exist, 4 missing" in second.stdout
    assert "missing  gone-doc  docs/gone.md  (not found)" in second.stdout
    assert "4 entries flagged anchor_broken" in second.stdout
    with team_scope(team.id):
        flagged = set(
            Memory.objects.filter(team=team, anchor_broken_at__isnull=False).values_list("key", flat=True)
        )
        nudged = set(
            Nudge.objects.filter(team=team, kind=NudgeKind.ANCHOR_BROKEN).values_list(
                "memory__key", flat=True
            )
        )
    assert flagged == nudged == {"gone-doc", "escape", "absolute", "sneaky-link"}


def test_verify_with_a_read_only_token_fails_in_one_line_and_records_nothing(
    mcp_server: Server, team: Team, cli: Cli, tmp_path: Path
) -> None:
    anchored(team)
    root = worktree(tmp_path)
    env = server_env(mcp_server, "alpha", make_agent(team, "reader", ["read"]).token)

    done = cli("verify", "--worktree", str(root), **env)

    assert done.returncode == 1
    assert "forbidden" in done.stderr and env["MEMORYHUB_TOKEN"] not in done.stderr
    assert checks_of(team) == {}


def test_the_session_start_hook_reports_the_worktrees_file_anchors(
    mcp_server: Server, team: Team, cli: Cli, tmp_path: Path
) -> None:
    anchored(team)
    root = worktree(tmp_path)
    writer = server_env(mcp_server, "alpha", make_agent(team, "claude", ["read", "write"]).token)

    started = cli("hook", "claude-code", "session-start", input=hook_input("s-1", root / "docs"), **writer)

    assert started.returncode == 0, started.stderr
    assert "## Using MemoryHub" in started.stdout
    assert checks_of(team)["runbook"] == [("client", True, "")]
    assert checks_of(team)["gone-doc"] == [("client", False, "not found")]


def test_the_hooks_report_never_raises_when_the_server_cannot_be_reached(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = ClientConfig(url=f"http://127.0.0.1:{port}", team="alpha", project=None, token="t")

    with MemoryHubApi(config) as api:
        claude_code_hooks._report_file_anchors(api, worktree(tmp_path))

    assert "file anchors not reported: ServerUnreachable" in capsys.readouterr().err
