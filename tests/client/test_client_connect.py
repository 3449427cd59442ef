"""`memoryhub connect`: each client's configuration printed, and merged into its files with
everything else in them kept; a second write changes nothing; the token is never written;
the README shows exactly what the command prints."""

from __future__ import annotations

import json
import os
import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

from agents.mcp.tools import CORE_TOOLS
from memoryhub_client.capture_hooks import CAPTURE_CLIENT_TIMEOUT_SECONDS
from memoryhub_client.claude_code_hooks import CLIENT_TIMEOUT_SECONDS
from memoryhub_client.connect import HOOK_EVENTS
from tests.client.conftest import COMMAND, Cli

pytestmark = pytest.mark.slow  # runs the `memoryhub` command

REPO = Path(__file__).resolve().parents[2]
URL = "http://127.0.0.1:8000"
TOKEN = "mh_must-never-be-written-0123456789"
# The installed command by its absolute path (the README shows it as README_COMMAND).
HOOK = f"{COMMAND} hook claude-code session-start --url http://127.0.0.1:8000 --team my-team"
README_COMMAND = "/path/to/.venv/bin/memoryhub"


def checkout() -> dict[str, str]:
    """PYTHONPATH when the tests run a worktree's checkout rather than the installed package."""
    return {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}


def hook(command: str) -> dict[str, Any]:
    return {"type": "command", "command": command, "timeout": CLIENT_TIMEOUT_SECONDS}


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
    assert settings["hooks"]["SessionStart"] == [other_hook, {"hooks": [hook(HOOK)]}]
    assert settings["hooks"]["SessionEnd"] == [
        {"hooks": [hook(HOOK.replace("session-start", "session-end"))]}
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
    assert (first, second) == (
        ".cursor/mcp.json created\n.cursor/hooks.json created\n",
        ".cursor/mcp.json unchanged\n.cursor/hooks.json unchanged\n",
    )
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

    assert first == f"{config} updated\n.codex/hooks.json created\n"
    assert second == f"{config} unchanged\n.codex/hooks.json unchanged\n"
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


def test_codex_gets_its_session_start_and_prompt_hooks_beside_its_own(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / ".codex").mkdir()
    theirs = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify-done", "timeout": 5}]}]}}
    (tmp_path / ".codex" / "hooks.json").write_text(json.dumps(theirs))

    write_twice(cli, tmp_path, "codex")

    hooks = json.loads((tmp_path / ".codex" / "hooks.json").read_text())["hooks"]
    assert hooks["Stop"] == theirs["hooks"]["Stop"]
    assert hooks["SessionStart"] == [
        {"hooks": [hook(f"{COMMAND} hook codex session-start --url {URL} --team my-team")]}
    ]
    assert hooks["UserPromptSubmit"] == [
        {
            "hooks": [
                {
                    "type": "command",
                    "command": f"{COMMAND} hook codex user-prompt-submit --url {URL} --team my-team",
                    "timeout": CAPTURE_CLIENT_TIMEOUT_SECONDS,
                }
            ]
        }
    ]
    assert sorted(hooks) == ["SessionStart", "Stop", "UserPromptSubmit"]  # no session end in Codex
    assert TOKEN not in json.dumps(hooks)


def cursor_hook(handler: str, timeout: int, **extra: Any) -> dict[str, Any]:
    return {
        "command": f"{COMMAND} hook cursor {handler} --url {URL} --team my-team",
        "timeout": timeout,
        **extra,
    }


def test_cursor_gets_its_hooks_merged_beside_its_own_once(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / ".cursor").mkdir()
    older = f"memoryhub hook cursor before-submit-prompt --url {URL}"  # an older connect's, bare name
    theirs = {
        "version": 1,
        "hooks": {
            "afterFileEdit": [{"command": "./hooks/format.sh"}],
            "beforeSubmitPrompt": [{"command": "./hooks/audit.sh"}, {"command": older}],
        },
    }
    (tmp_path / ".cursor" / "hooks.json").write_text(json.dumps(theirs))

    first, second = write_twice(cli, tmp_path, "cursor")

    assert ".cursor/hooks.json updated" in first and ".cursor/hooks.json unchanged" in second
    written = json.loads((tmp_path / ".cursor" / "hooks.json").read_text())
    assert written["version"] == 1
    hooks = written["hooks"]
    assert hooks["afterFileEdit"] == [{"command": "./hooks/format.sh"}]
    assert hooks["beforeSubmitPrompt"] == [
        {"command": "./hooks/audit.sh"},
        cursor_hook("before-submit-prompt", CAPTURE_CLIENT_TIMEOUT_SECONDS),
    ]
    assert hooks["sessionStart"] == [cursor_hook("session-start", CLIENT_TIMEOUT_SECONDS)]
    assert hooks["sessionEnd"] == [cursor_hook("session-end", CLIENT_TIMEOUT_SECONDS)]
    assert hooks["postToolUse"] == [
        cursor_hook("post-tool-use", CAPTURE_CLIENT_TIMEOUT_SECONDS, matcher="Shell")
    ]
    assert hooks["postToolUseFailure"] == [
        cursor_hook("post-tool-use-failure", CAPTURE_CLIENT_TIMEOUT_SECONDS)
    ]
    # Cursor's afterShellExecution carries no exit status, its preCompact no transcript the
    # rules read, and stop ends a turn, not the session: none of them is installed.
    assert sorted(hooks) == [
        "afterFileEdit", "beforeSubmitPrompt", "postToolUse", "postToolUseFailure", "sessionEnd", "sessionStart"
    ]  # fmt: skip
    assert TOKEN not in json.dumps(written)


def test_windsurf_gets_its_prompt_hook_beside_its_own(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / ".windsurf").mkdir()
    theirs = {"hooks": {"pre_user_prompt": [{"command": "python3 /hooks/block.py"}]}}
    (tmp_path / ".windsurf" / "hooks.json").write_text(json.dumps(theirs))

    first, second = write_twice(cli, tmp_path, "windsurf")

    assert (first, second) == (".windsurf/hooks.json updated\n", ".windsurf/hooks.json unchanged\n")
    hooks = json.loads((tmp_path / ".windsurf" / "hooks.json").read_text())
    assert hooks == {
        "hooks": {
            "pre_user_prompt": [
                {"command": "python3 /hooks/block.py"},
                {
                    "command": f"{COMMAND} hook windsurf pre-user-prompt --url {URL} --team my-team",
                    "show_output": False,
                },
            ]
        }
    }


def test_claude_code_runs_post_tool_use_after_the_shell_only(cli: Cli, tmp_path: Path) -> None:
    write_twice(cli, tmp_path, "claude-code")
    hooks = json.loads((tmp_path / ".claude" / "settings.json").read_text())["hooks"]
    command = f"{COMMAND} hook claude-code post-tool-use --url {URL} --team my-team"
    assert hooks["PostToolUse"] == [
        {"matcher": "Bash", "hooks": [{"type": "command", "command": command, "timeout": CAPTURE_CLIENT_TIMEOUT_SECONDS}]}
    ]  # fmt: skip


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
    for client in ("claude-code", "cursor", "codex", "windsurf", "generic"):
        printed = cli("connect", client, "--url", URL, "--team", "my-team")
        assert printed.returncode == 0, printed.stderr
        assert f"memoryhub connect {client}" in section
        shown = printed.stdout.replace(COMMAND, README_COMMAND)
        if shown.startswith("# "):  # two files: each under its name
            bodies = [snippet.split("\n", 1)[1] for snippet in shown.split("\n# ")]
        else:  # one file: its name on stderr
            bodies = [shown]
            assert printed.stderr.startswith("# ")
        for body in bodies:
            assert body in blocks, (client, body)


def test_a_one_file_client_prints_a_snippet_that_is_valid_on_its_own(cli: Cli, tmp_path: Path) -> None:
    for client, parse in (("windsurf", json.loads), ("generic", json.loads)):
        printed = cli("connect", client, "--url", URL)
        assert printed.returncode == 0, printed.stderr
        assert "memoryhub" in str(parse(printed.stdout)), client


def test_the_tool_list_is_the_core_one_unless_asked_and_connect_says_so(cli: Cli) -> None:
    core = cli("connect", "cursor", "--url", URL)
    mcp_json = core.stdout.split("\n", 1)[1].split("# .cursor/hooks.json", 1)[0]
    assert json.loads(mcp_json)["mcpServers"]["memoryhub"]["url"] == f"{URL}/mcp/"
    names = core.stderr.split("lists the core tools (", 1)[1].split(")", 1)[0].split(", ")
    assert set(names) == set(CORE_TOOLS)
    assert "--tools full connects to /mcp/full/, every tool" in core.stderr
    for asked in (("--url", URL, "--tools", "full"), ("--url", f"{URL}/mcp/full/")):
        full = cli("connect", "codex", *asked)
        config_toml = full.stdout.split("# .codex/hooks.json", 1)[0]
        assert tomllib.loads(config_toml)["mcp_servers"]["memoryhub"]["url"] == f"{URL}/mcp/full/"
        assert f"{URL}/mcp/full/ lists every tool" in full.stderr
    generic = json.loads(cli("connect", "generic", "--url", f"{URL}/mcp/full/").stdout)["mcpServers"][
        "memoryhub"
    ]
    assert generic == {
        "command": COMMAND, "args": ["mcp", "--url", f"{URL}/mcp/full/", "--token-env", "MEMORYHUB_TOKEN"]
    }  # fmt: skip


def test_a_hook_written_by_an_older_connect_gets_the_timeout(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / ".claude").mkdir()
    older = {"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": HOOK}]}]}}
    (tmp_path / ".claude" / "settings.json").write_text(json.dumps(older))
    cli("connect", "claude-code", "--write", "--url", URL, "--team", "my-team", "--dir", str(tmp_path))
    settings = json.loads((tmp_path / ".claude" / "settings.json").read_text())
    assert settings["hooks"]["SessionStart"] == [{"hooks": [hook(HOOK)]}]


def test_the_hooks_run_without_memoryhub_on_the_path(cli: Cli, tmp_path: Path) -> None:
    cli(
        "connect",
        "claude-code",
        "--write",
        "--url",
        "http://127.0.0.1:9",
        "--team",
        "my-team",
        "--dir",
        str(tmp_path),
    )
    settings = json.loads((tmp_path / ".claude" / "settings.json").read_text())
    assert sorted(settings["hooks"]) == sorted(HOOK_EVENTS)
    for event in HOOK_EVENTS:
        [group] = settings["hooks"][event]
        [written] = group["hooks"]
        # The hooks in the agent's loop (the user waits for UserPromptSubmit) get the shorter one.
        in_the_loop = event in ("PostToolUseFailure", "PostToolUse", "UserPromptSubmit")
        assert written["timeout"] == (
            CAPTURE_CLIENT_TIMEOUT_SECONDS if in_the_loop else CLIENT_TIMEOUT_SECONDS
        )
        # As Claude Code runs a command hook: through the shell, here with an empty PATH.
        ran = subprocess.run(  # noqa: S603
            ["/bin/sh", "-c", written["command"]],
            env={"PATH": "", "HOME": str(cli.home), "MEMORYHUB_TOKEN": "mh_any-token-0123", **checkout()},
            input="{}", capture_output=True, text=True, timeout=60, cwd=tmp_path,
        )  # fmt: skip
        assert ran.returncode == 0, (event, ran.stderr)
        if event == "SessionStart":
            assert ran.stdout.startswith("MemoryHub: the team's memory could not be loaded (cannot reach")
