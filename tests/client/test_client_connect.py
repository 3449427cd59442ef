"""`memoryhub connect`: each client's configuration printed, and merged into its files with
everything else in them kept; a second write changes nothing; the token is never written;
the README shows exactly what the command prints."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from tests.client.conftest import Cli

pytestmark = pytest.mark.slow  # runs the `memoryhub` command

REPO = Path(__file__).resolve().parents[2]
URL = "http://127.0.0.1:8000"
TOKEN = "mh_must-never-be-written-0123456789"
HOOK = "memoryhub hook claude-code session-start --url http://127.0.0.1:8000 --team my-team"


def write_twice(cli: Cli, project: Path, client: str) -> tuple[str, str]:
    first = cli("connect", client, "--write", "--url", URL, "--team", "my-team", "--dir", str(project),
                MEMORYHUB_TOKEN=TOKEN, CODEX_HOME=str(cli.home / "codex"))  # fmt: skip
    second = cli("connect", client, "--write", "--url", URL, "--team", "my-team", "--dir", str(project),
                 MEMORYHUB_TOKEN=TOKEN, CODEX_HOME=str(cli.home / "codex"))  # fmt: skip
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert TOKEN not in first.stdout + first.stderr
    return first.stdout, second.stdout


def test_claude_code_merges_the_server_and_the_hooks_keeping_the_rest(cli: Cli, tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / ".claude").mkdir(parents=True)
    (project / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"github": {"command": "gh-mcp"}, "memoryhub": {"url": "http://old/mcp/"}}})
    )
    other_hook = {"matcher": "startup", "hooks": [{"type": "command", "command": "echo hello"}]}
    stale_hook = {
        "hooks": [{"type": "command", "command": "memoryhub hook claude-code session-start --url http://old"}]
    }
    (project / ".claude" / "settings.json").write_text(
        json.dumps(
            {
                "permissions": {"allow": ["Bash(ls)"]},
                "hooks": {"SessionStart": [other_hook, stale_hook], "PreToolUse": [other_hook]},
            }
        )
    )

    first, second = write_twice(cli, project, "claude-code")

    assert first == ".mcp.json updated\n.claude/settings.json updated\n"
    assert second == ".mcp.json unchanged\n.claude/settings.json unchanged\n"
    servers = json.loads((project / ".mcp.json").read_text())["mcpServers"]
    assert servers == {
        "github": {"command": "gh-mcp"},
        "memoryhub": {
            "type": "http",
            "url": f"{URL}/mcp/",
            "headers": {"Authorization": "Bearer ${MEMORYHUB_TOKEN}"},
        },
    }
    settings = json.loads((project / ".claude" / "settings.json").read_text())
    assert settings["permissions"] == {"allow": ["Bash(ls)"]}
    assert settings["hooks"]["PreToolUse"] == [other_hook]
    assert settings["hooks"]["SessionStart"] == [
        other_hook,
        {"hooks": [{"type": "command", "command": HOOK}]},
    ]
    assert settings["hooks"]["SessionEnd"] == [
        {"hooks": [{"type": "command", "command": HOOK.replace("session-start", "session-end")}]}
    ]
    for path in (project / ".mcp.json", project / ".claude" / "settings.json"):
        assert TOKEN not in path.read_text()

    # A hook the user adds after ours stays after it: connecting again moves nothing.
    settings["hooks"]["SessionStart"].append({"hooks": [{"type": "command", "command": "echo later"}]})
    (project / ".claude" / "settings.json").write_text(json.dumps(settings, indent=2) + "\n")
    again = cli("connect", "claude-code", "--write", "--url", URL, "--team", "my-team", "--dir", str(project))
    assert again.stdout == ".mcp.json unchanged\n.claude/settings.json unchanged\n"


def test_cursor_creates_its_file_and_keeps_other_servers(cli: Cli, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    first, second = write_twice(cli, project, "cursor")
    assert (first, second) == (".cursor/mcp.json created\n", ".cursor/mcp.json unchanged\n")
    created = json.loads((project / ".cursor" / "mcp.json").read_text())
    assert created == {
        "mcpServers": {
            "memoryhub": {"url": f"{URL}/mcp/", "headers": {"Authorization": "Bearer ${env:MEMORYHUB_TOKEN}"}}
        }
    }

    created["mcpServers"]["linear"] = {"url": "https://mcp.linear.app/sse"}
    (project / ".cursor" / "mcp.json").write_text(json.dumps(created))
    cli("connect", "cursor", "--write", "--url", "https://memory.example", "--dir", str(project))
    servers = json.loads((project / ".cursor" / "mcp.json").read_text())["mcpServers"]
    assert servers["linear"] == {"url": "https://mcp.linear.app/sse"}
    assert servers["memoryhub"]["url"] == "https://memory.example/mcp/"


def test_codex_keeps_the_toml_comments_and_layout(cli: Cli, tmp_path: Path) -> None:
    config = cli.home / "codex" / "config.toml"
    config.parent.mkdir()
    original = (
        '# my codex settings\nmodel = "o3"  # the model I like\n\n'
        '[mcp_servers.docs]\ncommand = "docs-mcp"\nargs = ["--fast"]\n\n[profiles.quick]\nmodel = "mini"\n'
    )
    config.write_text(original)

    first, second = write_twice(cli, tmp_path, "codex")

    assert first == f"{config} updated\n" and second == f"{config} unchanged\n"
    text = config.read_text()
    assert text.startswith(original.split("[profiles.quick]")[0])  # every byte before ours kept
    assert text.endswith('[profiles.quick]\nmodel = "mini"\n')
    parsed = tomllib.loads(text)
    assert parsed["mcp_servers"] == {
        "docs": {"command": "docs-mcp", "args": ["--fast"]},
        "memoryhub": {"url": f"{URL}/mcp/", "bearer_token_env_var": "MEMORYHUB_TOKEN"},
    }
    assert parsed["model"] == "o3" and parsed["profiles"] == {"quick": {"model": "mini"}}
    assert TOKEN not in text


def test_files_that_are_not_valid_are_left_alone(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / ".cursor").mkdir()
    (tmp_path / ".cursor" / "mcp.json").write_text("{not json")
    broken = cli("connect", "cursor", "--write", "--dir", str(tmp_path))
    assert broken.returncode == 1
    assert broken.stderr.startswith("memoryhub connect: .cursor/mcp.json is not valid JSON")
    assert (tmp_path / ".cursor" / "mcp.json").read_text() == "{not json"
    generic = cli("connect", "generic", "--write")
    assert generic.returncode == 2


def test_the_readme_shows_exactly_what_connect_prints(cli: Cli) -> None:
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Connect your agents", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```(?:json|toml)\n(.*?)```", section, flags=re.DOTALL)
    for client in ("claude-code", "cursor", "codex", "generic"):
        printed = cli("connect", client, "--url", URL, "--team", "my-team")
        assert printed.returncode == 0, printed.stderr
        assert f"memoryhub connect {client}" in section
        if printed.stdout.startswith("# "):  # two files: each under its name
            bodies = [snippet.split("\n", 1)[1] for snippet in printed.stdout.split("\n# ")]
        else:  # one file: its name on stderr
            bodies = [printed.stdout]
            assert printed.stderr.startswith("# ")
        for body in bodies:
            assert body in blocks, (client, body)


def test_a_one_file_client_prints_a_snippet_that_is_valid_on_its_own(cli: Cli, tmp_path: Path) -> None:
    for client, parse in (("cursor", json.loads), ("generic", json.loads), ("codex", tomllib.loads)):
        printed = cli("connect", client, "--url", URL)
        assert printed.returncode == 0, printed.stderr
        assert "memoryhub" in str(parse(printed.stdout)), client
