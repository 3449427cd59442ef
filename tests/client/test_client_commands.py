"""`memoryhub search | save | get | inject` against the real server: the REST API from an
agent's shell, one-line errors, another team's memory out of reach, and the token never
printed."""

from __future__ import annotations

import json
import subprocess
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from memories import writes
from teams.models import Team
from teams.scope import team_scope
from tests.client.conftest import Cli, server_env
from tests.conftest import make_agent
from tests.mcp.conftest import Server

pytestmark = pytest.mark.django_db(transaction=True)


def test_save_get_and_search_round_trip(mcp_server: Server, team: Team, cli: Cli) -> None:
    env = server_env(mcp_server, "alpha", make_agent(team, "shell-bot", ["read", "write"]).token)

    saved = cli("save", "deploy-friday", "Never deploy on Fridays.", "--type", "warning", **env)
    assert saved.returncode == 0, saved.stderr
    assert saved.stdout == "saved deploy-friday as lesson\n"

    piped = cli(
        "save",
        "deploy-friday",
        "--reason",
        "holiday freeze",
        input="Never deploy on Fridays or holidays.\n",
        **env,
    )
    assert piped.returncode == 0, piped.stderr
    assert "superseded the previous entry" in piped.stdout

    got = cli("get", "deploy-friday", **env)
    assert got.returncode == 0, got.stderr
    assert got.stdout == "Never deploy on Fridays or holidays.\n"
    as_json = json.loads(cli("get", "deploy-friday", "--json", **env).stdout)
    assert as_json["supersede_reason"] == "holiday freeze" and as_json["updated_by"] == "shell-bot"

    found = cli("search", "deploy fridays", "--mode", "keyword", **env)
    assert found.returncode == 0, found.stderr
    assert len(found.stdout.splitlines()) == 1  # the key once, as its current entry
    assert found.stdout.splitlines()[0].split()[1:3] == ["deploy-friday", "[lesson]"]
    assert "superseded" not in found.stdout
    with_old = cli("search", "deploy fridays", "--mode", "keyword", "--include-superseded", **env).stdout
    lines = with_old.splitlines()
    assert len(lines) == 2 and "superseded" not in lines[0]
    assert f"(superseded by {as_json['id']})" in lines[1]
    # The old flag still runs: the current entries only, as by default.
    assert cli("search", "deploy fridays", "--mode", "keyword", "--active-only", **env).stdout == found.stdout
    answer = json.loads(cli("search", "deploy fridays", "--mode", "keyword", "--json", **env).stdout)
    assert answer["search_mode"] == "keyword" and answer["results"][0]["key"] == "deploy-friday"


def test_errors_are_one_line_with_the_servers_code_and_never_show_the_token(
    mcp_server: Server, team: Team, cli: Cli
) -> None:
    writer = make_agent(team, "writer-bot", ["read", "write"]).token
    reader = make_agent(team, "reader-bot", ["read"]).token
    wrong = "mh_not-a-real-token-0123456789"

    runs: dict[str, subprocess.CompletedProcess[str]] = {
        "unauthenticated": cli("get", "any", **server_env(mcp_server, "alpha", wrong)),
        "forbidden": cli("save", "k", "text", **server_env(mcp_server, "alpha", reader)),
        "missing": cli("get", "not-there", **server_env(mcp_server, "alpha", writer)),
        "invalid": cli("save", "bad key!", "text", **server_env(mcp_server, "alpha", writer)),
        "unreachable": cli(
            "get", "k", **{**server_env(mcp_server, "alpha", writer), "MEMORYHUB_URL": "http://127.0.0.1:9"}
        ),
        "no team": cli("get", "k", MEMORYHUB_TOKEN=writer),
    }

    for name, run in runs.items():
        assert run.returncode == 1, (name, run.stdout, run.stderr)
        assert run.stdout == "", name
        assert len(run.stderr.splitlines()) == 1, (name, run.stderr)
        for token in (writer, reader, wrong):
            assert token not in run.stderr, name
    assert runs["unauthenticated"].stderr.startswith(
        "memoryhub get: the server refused the token (check MEMORYHUB_TOKEN) (401 unauthenticated)"
    )
    assert runs["forbidden"].stderr.startswith(
        "memoryhub save: forbidden: the token lacks the scope for this (403 forbidden)"
    )
    assert (
        runs["missing"].stderr
        == "memoryhub get: not found (404 not_found): no active memory under this key\n"
    )
    assert runs["invalid"].stderr.startswith("memoryhub save: invalid request (400 invalid)")
    assert "key:" in runs["invalid"].stderr
    assert runs["unreachable"].stderr.startswith(
        "memoryhub get: cannot reach http://127.0.0.1:9: ConnectError"
    )
    assert runs["no team"].stderr.startswith("memoryhub get: no team: pass --team, set MEMORYHUB_TEAM")


def test_another_teams_token_gets_not_found_and_no_byte_of_the_other_team(
    mcp_server: Server, team: Team, other_team: Team, cli: Cli, tmp_path: Path
) -> None:
    with team_scope(team.id):
        writes.save_memory(
            team=team, updated_by="test", key="launch-plan", content="Alpha launches on the ninth of Zorblax."
        )
    intruder = make_agent(other_team, "bravo-bot", ["read", "write"]).token

    as_alpha = server_env(mcp_server, "alpha", intruder)
    as_bravo = server_env(mcp_server, "bravo", intruder)
    into = tmp_path / "CLAUDE.md"
    runs = [
        cli("get", "launch-plan", **as_alpha),
        cli("get", "launch-plan", **as_bravo),
        cli("search", "launch ninth Zorblax", "--mode", "keyword", **as_alpha),
        cli("inject", "--into", str(into), **as_alpha),
    ]
    found_in_own_team = cli("search", "launch ninth Zorblax", "--mode", "keyword", **as_bravo)

    for run in runs:
        assert run.returncode == 1, run
        assert "not found (404 not_found)" in run.stderr
        assert run.stdout == ""
    assert found_in_own_team.stdout == "no results\n"
    assert not into.exists()
    for output in [*runs, found_in_own_team]:
        assert "Zorblax" not in output.stdout + output.stderr
        assert "Alpha" not in output.stdout + output.stderr


def test_inject_writes_the_same_section_as_manage_py_inject(
    mcp_server: Server, team: Team, cli: Cli, tmp_path: Path
) -> None:
    with team_scope(team.id):
        writes.save_memory(
            team=team,
            updated_by="test",
            key="stack",
            content="We use Django and PostgreSQL.",
            type_name="identity",
        )
        writes.save_memory(
            team=team,
            updated_by="test",
            key="web-port",
            content="The web app listens on 8080.",
            project="web",
        )
        writes.save_memory(
            team=team, updated_by="test", key="api-port", content="The API listens on 9090.", project="api"
        )
    env = server_env(mcp_server, "alpha", make_agent(team, "inject-bot", ["read"]).token)
    over_http, on_server = tmp_path / "http" / "CLAUDE.md", tmp_path / "server" / "CLAUDE.md"
    for path in (over_http, on_server):
        path.parent.mkdir()
        path.write_bytes(b"# Project notes\r\n\r\nKeep this line.\r\n")

    first = cli("inject", "--into", str(over_http), "--project", "web", **env)
    call_command("inject", "alpha", into=str(on_server), project="web", stdout=StringIO())
    again = cli("inject", "--into", str(over_http), "--project", "web", **env)

    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith(f"updated {over_http} (2 entries, ")
    assert again.stdout.startswith(f"{over_http} unchanged (2 entries, ")
    text = over_http.read_bytes()
    assert text == on_server.read_bytes()
    assert text.startswith(b"# Project notes\r\n\r\nKeep this line.\r\n\r\n<!-- memoryhub:begin -->\r\n")
    assert b"listens on 8080" in text and b"9090" not in text


def test_inject_query_adds_what_is_relevant_to_the_branch_and_recent_commits(
    mcp_server: Server, team: Team, cli: Cli, tmp_path: Path
) -> None:
    with team_scope(team.id):
        # Reference entries are never in the core block: only the query brings them in.
        writes.save_memory(
            team=team,
            key="billing-retries",
            content="Stripe webhook retries come back for three days.",
            type_name="reference",
            updated_by="test",
        )
        writes.save_memory(
            team=team,
            updated_by="test",
            key="fonts",
            content="Headings use the serif font.",
            type_name="reference",
        )
    worktree = tmp_path / "repo"
    worktree.mkdir()
    git = ["git", "-C", str(worktree), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q", "-b", "fix/stripe-webhook"], check=True)  # noqa: S603
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "Handle webhook retries"], check=True)  # noqa: S603
    env = server_env(mcp_server, "alpha", make_agent(team, "query-bot", ["read"]).token)

    plain = cli("inject", "--into", "AGENTS.md", cwd=worktree, **env)
    assert plain.returncode == 0, plain.stderr
    assert "Stripe" not in (worktree / "AGENTS.md").read_text()

    queried = cli("inject", "--into", "AGENTS.md", "--query", cwd=worktree, **env)
    assert queried.returncode == 0, queried.stderr
    written = (worktree / "AGENTS.md").read_text()
    assert "Stripe webhook retries" in written
    assert "serif" not in written

    explicit = cli("inject", "--into", "AGENTS.md", "--query", "serif headings", cwd=worktree, **env)
    assert explicit.returncode == 0, explicit.stderr
    assert "serif" in (worktree / "AGENTS.md").read_text()
