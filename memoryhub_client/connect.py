"""`memoryhub connect claude-code | cursor | codex | windsurf | generic [--write]`: the
client's MCP configuration and hooks for this server.

Without --write it prints each file's snippet; with --write it merges them into the files,
keeping everything else in them (JSON is loaded, merged and written back; TOML goes
through tomlkit, which keeps comments and layout). A second write changes nothing.
The token itself is never written: each client reads it from an environment variable.

Formats (checked against each client's documentation, docs/agents.md, "connect"):
- Claude Code, `.mcp.json` (project scope): `"type": "http"`, `${VAR}` expanded in headers;
  hooks in `.claude/settings.json` (SessionStart's stdout is added to the context).
- Cursor, `.cursor/mcp.json`: `url` and `headers`, `${env:VAR}` expanded; its hooks in
  `.cursor/hooks.json` (`{"version": 1, "hooks": {event: [{"command", "timeout",
  "matcher"}]}}`; sessionStart answers `additional_context` as JSON).
- Codex, `~/.codex/config.toml` (`$CODEX_HOME`): `[mcp_servers.memoryhub]` with `url` and
  `bearer_token_env_var` (Codex refuses an inline token in this file); its SessionStart and
  UserPromptSubmit hooks in the project's `.codex/hooks.json` (Claude Code's shape).
- Windsurf, `.windsurf/hooks.json`: `{"hooks": {"pre_user_prompt": [{"command",
  "show_output"}]}}` (its hooks take no timeout and give the model no context).
- generic: any client that launches a command: `memoryhub mcp` over stdio.

The MCP URL is the core tool list (`/mcp/`) unless `--tools full` (or a `--url` naming
`/mcp/full/`) asks for every tool. Commands (the hooks, the generic server) name the
installed `memoryhub` by its absolute path, so they work whatever the client's PATH, and
each hook carries a timeout (docs/agents.md, "Hooks that cannot hurt the client").
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit

from memoryhub_client.capture_hooks import CAPTURE_CLIENT_TIMEOUT_SECONDS
from memoryhub_client.claude_code_hooks import CLIENT_TIMEOUT_SECONDS
from memoryhub_client.config import TOKEN_ENV, TOOL_LISTS, load_config, mcp_endpoint, tool_list_of
from memoryhub_client.section import write_atomically

SERVER_NAME = "memoryhub"
HOOK_WORDS = ["hook", "claude-code"]
CODEX_HOOK_WORDS = ["hook", "codex"]
CURSOR_HOOK_WORDS = ["hook", "cursor"]
WINDSURF_HOOK_WORDS = ["hook", "windsurf"]
OUR_HOOK_WORDS = (HOOK_WORDS, CODEX_HOOK_WORDS, CURSOR_HOOK_WORDS, WINDSURF_HOOK_WORDS)
CLIENTS = ("claude-code", "cursor", "codex", "windsurf", "generic")
# What `connect` says of the tool lists (agents.mcp.tools.CORE_TOOLS; a test compares).
CORE_TOOL_NAMES = (
    "memory_context",
    "memory_search",
    "memory_save",
    "memory_get",
    "memory_list",
    "memory_history",
)
TOOLS_NOTES = {
    "core": "# MCP tools: {url} lists the core tools ({names}); "
    "--tools full connects to /mcp/full/, every tool.",
    "full": "# MCP tools: {url} lists every tool; without --tools full, /mcp/ lists the core ones ({names}).",
}
HOOKS_NOTE = (
    "# Hooks: {command} (an absolute path: no PATH needed), each with a timeout: "
    "{timeout} s, {capture_timeout} s for the capture hooks in the agent's loop."
)
WINDSURF_NOTE = (
    "# Hooks: {command} (an absolute path: no PATH needed). Windsurf's hooks take no timeout; "
    "the hook bounds its own time. For the memory block, run `memoryhub inject --into AGENTS.md`."
)


class ConnectError(Exception):
    """A file that cannot be merged safely (not JSON, not an object, ...): left untouched."""


@dataclass(frozen=True)
class Target:
    """One file of a client's configuration: where it goes and what to merge into it."""

    shown_path: str  # as the user writes it (~ and relative paths kept)
    path: Path
    kind: str  # "mcp-json", "claude-settings", "codex-toml" or "flat-hooks" (Cursor's, Windsurf's)
    snippet: dict[str, Any]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    connect = commands.add_parser(
        "connect",
        help="print (or --write) an agent client's MCP configuration for this server",
        description="Print the MCP configuration and the hooks that connect a client to this server; "
        "--write merges them into the files, keeping everything else.",
    )
    connect.add_argument("client", choices=CLIENTS)
    connect.add_argument("--write", action="store_true", help="merge into the client's files")
    connect.add_argument("--url", help="the server (default: MEMORYHUB_URL, the config file, or local)")
    connect.add_argument(
        "--tools",
        choices=sorted(TOOL_LISTS),
        default=None,
        help="the core tools (/mcp/, the default) or every tool (/mcp/full/)",
    )
    connect.add_argument("--team", help="the team's slug, for the hooks (or MEMORYHUB_TEAM)")
    connect.add_argument(
        "--token-env",
        default=TOKEN_ENV,
        help=f"the variable the client reads the token from (default {TOKEN_ENV})",
    )
    connect.add_argument("--dir", default=".", help="the project folder (default: the current one)")
    connect.set_defaults(handler=run_connect)


def run_connect(arguments: argparse.Namespace) -> int:
    config = load_config(arguments)
    tools = arguments.tools or tool_list_of(arguments.url or "") or "core"
    targets = client_targets(
        arguments.client,
        url=config.url,
        team=config.team,
        token_env=arguments.token_env,
        project_dir=Path(arguments.dir),
        tools=tools,
    )
    note = TOOLS_NOTES[tools].format(url=mcp_endpoint(config.url, tools), names=", ".join(CORE_TOOL_NAMES))
    command = shlex.join(memoryhub_command())
    if arguments.client in ("claude-code", "codex", "cursor"):
        note += "\n" + HOOKS_NOTE.format(
            command=command, timeout=CLIENT_TIMEOUT_SECONDS, capture_timeout=CAPTURE_CLIENT_TIMEOUT_SECONDS
        )
    elif arguments.client == "windsurf":
        note = WINDSURF_NOTE.format(command=command)
    if not arguments.write:
        if len(targets) == 1:
            # One file: its name on stderr, so that `connect cursor > .cursor/mcp.json` is valid.
            print(f"# {targets[0].shown_path}", file=sys.stderr)
            print(snippet_text(targets[0]), end="")
        else:
            print(render(targets), end="")
        print(note, file=sys.stderr)
        return 0
    if arguments.client == "generic":
        print("memoryhub connect: generic has no file of its own: copy the snippet", file=sys.stderr)
        return 2
    for target in targets:
        outcome = merge_into_file(target)
        print(f"{target.shown_path} {outcome}")
    print(note, file=sys.stderr)
    return 0


def memoryhub_command() -> list[str]:
    """The installed `memoryhub` by its absolute path: the console script next to the
    interpreter running this one (the same installation), else `python -m` of the
    package with this interpreter. Never a bare name a client's PATH may lack."""
    interpreter = Path(sys.executable).absolute()
    installed = interpreter.parent / ("memoryhub.exe" if os.name == "nt" else "memoryhub")
    if installed.is_file():
        return [str(installed)]
    return [str(interpreter), "-m", "memoryhub_client.cli"]


def client_targets(
    client: str, *, url: str, team: str | None, token_env: str, project_dir: Path, tools: str = "core"
) -> list[Target]:
    mcp_url = mcp_endpoint(url, tools)
    if client == "claude-code":
        server = {"type": "http", "url": mcp_url, "headers": {"Authorization": f"Bearer ${{{token_env}}}"}}
        return [
            _json_target(".mcp.json", project_dir, "mcp-json", {"mcpServers": {SERVER_NAME: server}}),
            _json_target(
                ".claude/settings.json",
                project_dir,
                "claude-settings",
                {
                    "hooks": {
                        event: [_group(event, _hook(event, url, team, token_env))] for event in HOOK_EVENTS
                    }
                },
            ),
        ]
    if client == "cursor":
        server = {"url": mcp_url, "headers": {"Authorization": f"Bearer ${{env:{token_env}}}"}}
        hooks = {event: [_cursor_hook(event, url, team, token_env)] for event in CURSOR_HOOK_EVENTS}
        return [
            _json_target(".cursor/mcp.json", project_dir, "mcp-json", {"mcpServers": {SERVER_NAME: server}}),
            _json_target(".cursor/hooks.json", project_dir, "flat-hooks", {"version": 1, "hooks": hooks}),
        ]
    if client == "windsurf":
        command = _command(WINDSURF_HOOK_WORDS, "pre-user-prompt", url, team, token_env)
        hook = {"command": command, "show_output": False}
        return [
            _json_target(
                ".windsurf/hooks.json", project_dir, "flat-hooks", {"hooks": {"pre_user_prompt": [hook]}}
            )
        ]
    if client == "codex":
        codex_home = os.environ.get("CODEX_HOME", "").strip()
        path = Path(codex_home) / "config.toml" if codex_home else Path.home() / ".codex" / "config.toml"
        shown = str(path) if codex_home else "~/.codex/config.toml"
        table = {"url": mcp_url, "bearer_token_env_var": token_env}
        hooks = {
            event: [{"hooks": [_hook(event, url, team, token_env, CODEX_HOOK_WORDS)]}]
            for event in CODEX_HOOK_EVENTS
        }
        return [
            Target(shown, path, "codex-toml", {"mcp_servers": {SERVER_NAME: table}}),
            _json_target(".codex/hooks.json", project_dir, "claude-settings", {"hooks": hooks}),
        ]
    program, *prefix = memoryhub_command()
    server = {"command": program, "args": [*prefix, "mcp", "--url", mcp_url, "--token-env", token_env]}
    return [
        Target("your client's MCP configuration", Path(), "generic", {"mcpServers": {SERVER_NAME: server}})
    ]


HOOK_EVENTS = {
    "SessionStart": "session-start",
    "SessionEnd": "session-end",
    "PreCompact": "pre-compact",
    "PostToolUseFailure": "post-tool-use-failure",
    "PostToolUse": "post-tool-use",
    "UserPromptSubmit": "user-prompt-submit",
}
# PostToolUse runs after every call of the tools it matches: only the shell, whose
# result can show a failure the call did not report (a non-zero exit, an error on stderr).
HOOK_MATCHERS = {"PostToolUse": "Bash"}
# Cursor (docs/agents.md, "Other clients' hooks"): its events, our handlers, and the
# matcher that keeps postToolUse to its Shell tool. Not installed: afterShellExecution
# (its input has the output but no exit status), preCompact (its transcript is not the
# format the capture rules read), stop (every turn, not the session's end).
CURSOR_HOOK_EVENTS = {
    "sessionStart": "session-start",
    "sessionEnd": "session-end",
    "beforeSubmitPrompt": "before-submit-prompt",
    "postToolUse": "post-tool-use",
    "postToolUseFailure": "post-tool-use-failure",
}
CURSOR_MATCHERS = {"postToolUse": "Shell"}
CURSOR_CAPTURE_EVENTS = ("beforeSubmitPrompt", "postToolUse", "postToolUseFailure")
# Codex CLI has no session end, and its transcript is not Claude Code's (docs/agents.md,
# "Other clients' hooks"): the context at start and the corrections.
CODEX_HOOK_EVENTS = {"SessionStart": "session-start", "UserPromptSubmit": "user-prompt-submit"}
# The two hooks in the agent's loop (the user waits for UserPromptSubmit) get a shorter one.
HOOK_TIMEOUTS = {
    event: CAPTURE_CLIENT_TIMEOUT_SECONDS
    if event in ("PostToolUseFailure", "PostToolUse", "UserPromptSubmit")
    else CLIENT_TIMEOUT_SECONDS
    for event in HOOK_EVENTS
}


def _command(words: list[str], handler: str, url: str, team: str | None, token_env: str) -> str:
    command = [*memoryhub_command(), *words, handler, "--url", url]
    if team:
        command += ["--team", team]
    if token_env != TOKEN_ENV:
        command += ["--token-env", token_env]
    return shlex.join(command)


def _hook(
    event: str, url: str, team: str | None, token_env: str, words: list[str] = HOOK_WORDS
) -> dict[str, Any]:
    # Claude Code's and Codex's `timeout` is in seconds; past it the client stops the hook
    # and goes on.
    command = _command(words, HOOK_EVENTS[event], url, team, token_env)
    return {"type": "command", "command": command, "timeout": HOOK_TIMEOUTS[event]}


def _group(event: str, hook: dict[str, Any]) -> dict[str, Any]:
    """A matcher group of Claude Code's settings holding our one hook."""
    matcher = HOOK_MATCHERS.get(event)
    return {"matcher": matcher, "hooks": [hook]} if matcher else {"hooks": [hook]}


def _cursor_hook(event: str, url: str, team: str | None, token_env: str) -> dict[str, Any]:
    # Cursor's `timeout` is in seconds too (its hooks reference, "Hook definition").
    timeout = CAPTURE_CLIENT_TIMEOUT_SECONDS if event in CURSOR_CAPTURE_EVENTS else CLIENT_TIMEOUT_SECONDS
    hook: dict[str, Any] = {
        "command": _command(CURSOR_HOOK_WORDS, CURSOR_HOOK_EVENTS[event], url, team, token_env),
        "timeout": timeout,
    }
    if event in CURSOR_MATCHERS:
        hook["matcher"] = CURSOR_MATCHERS[event]
    return hook


def _json_target(relative: str, project_dir: Path, kind: str, snippet: dict[str, Any]) -> Target:
    return Target(relative, project_dir / relative, kind, snippet)


def render(targets: list[Target]) -> str:
    """What `connect` prints: each file's name as a comment, then its snippet."""
    return "\n".join(f"# {target.shown_path}\n{snippet_text(target)}" for target in targets)


def snippet_text(target: Target) -> str:
    return toml_text(target.snippet) if target.kind == "codex-toml" else json_text(target.snippet)


def json_text(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def toml_text(snippet: dict[str, Any]) -> str:
    return merge_toml("", snippet)


def merge_into_file(target: Target) -> str:
    """Merge the target's snippet into its file; "created", "updated" or "unchanged"."""
    path = target.path
    old = path.read_text(encoding="utf-8") if path.exists() else None
    if target.kind == "codex-toml":
        new = merge_toml(old or "", target.snippet)
    else:
        data = _load_json_object(old, target.shown_path)
        merge = {"claude-settings": merge_settings, "flat-hooks": merge_flat_hooks}.get(
            target.kind, merge_mcp
        )
        merged = merge(data, target.snippet)
        new = old if (old is not None and old.strip() and merged == json.loads(old)) else json_text(merged)
    if new == old:
        return "unchanged"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, new.encode("utf-8"), existed=old is not None)
    return "updated" if old is not None else "created"


def merge_mcp(data: dict[str, Any], snippet: dict[str, Any]) -> dict[str, Any]:
    """Our server's entry replaces any earlier one of that name; other servers stay."""
    merged = json.loads(json.dumps(data))
    servers = merged.setdefault("mcpServers", {})
    if not isinstance(servers, dict):
        raise ConnectError("`mcpServers` is not an object: fix the file by hand")
    servers[SERVER_NAME] = snippet["mcpServers"][SERVER_NAME]
    return merged


def merge_settings(data: dict[str, Any], snippet: dict[str, Any]) -> dict[str, Any]:
    """Each event gets our hook once; an older memoryhub hook of that event (another URL,
    team, path or timeout) is replaced; every other hook and setting stays as it was."""
    merged = json.loads(json.dumps(data))
    hooks = merged.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise ConnectError("`hooks` is not an object: fix the file by hand")
    for event, groups in snippet["hooks"].items():
        our_group = groups[0]
        existing = hooks.setdefault(event, [])
        if not isinstance(existing, list):
            raise ConnectError(f"`hooks.{event}` is not a list: fix the file by hand")
        if our_group in existing:
            continue
        kept = []
        for group in existing:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                others = [hook for hook in group["hooks"] if not _is_ours(hook)]
                if not others and group["hooks"]:
                    continue  # a group of ours only: replaced below
                group = {**group, "hooks": others}
            kept.append(group)
        hooks[event] = [*kept, our_group]
    return merged


def merge_flat_hooks(data: dict[str, Any], snippet: dict[str, Any]) -> dict[str, Any]:
    """Cursor's and Windsurf's hooks.json: each event a list of hooks, no matcher groups.
    Each event gets our hook once; an older memoryhub hook of that event is replaced;
    every other hook, event and key stays (Cursor's `version` is set only when absent)."""
    merged = json.loads(json.dumps(data))
    for name, value in snippet.items():
        if name != "hooks":
            merged.setdefault(name, value)
    hooks = merged.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise ConnectError("`hooks` is not an object: fix the file by hand")
    for event, (ours,) in snippet["hooks"].items():
        existing = hooks.setdefault(event, [])
        if not isinstance(existing, list):
            raise ConnectError(f"`hooks.{event}` is not a list: fix the file by hand")
        if ours in existing:
            continue
        hooks[event] = [*(hook for hook in existing if not _is_ours(hook)), ours]
    return merged


def _is_ours(hook: Any) -> bool:
    """A memoryhub Claude Code hook, whichever way it names the command: `memoryhub`, a
    path to it, or `python -m memoryhub_client.cli`."""
    if not isinstance(hook, dict):
        return False
    try:
        words = shlex.split(str(hook.get("command", "")))
    except ValueError:
        return False
    if words[:1] and Path(words[0]).name in ("memoryhub", "memoryhub.exe"):
        return words[1:3] in OUR_HOOK_WORDS
    return words[1:3] == ["-m", "memoryhub_client.cli"] and words[3:5] in OUR_HOOK_WORDS


def merge_toml(text: str, snippet: dict[str, Any]) -> str:
    try:
        document = tomlkit.parse(text)
    except tomlkit.exceptions.ParseError as exc:
        raise ConnectError(f"not valid TOML ({exc}): fix the file by hand") from None
    ours = snippet["mcp_servers"][SERVER_NAME]
    servers = document.get("mcp_servers")
    if servers is None:
        servers = tomlkit.table(is_super_table=True)
        document["mcp_servers"] = servers
    elif not isinstance(servers, dict):
        raise ConnectError("`mcp_servers` is not a table: fix the file by hand")
    current = servers.get(SERVER_NAME)
    if current is not None and _plain(current) == ours:
        return text
    table = tomlkit.table()
    for name, value in ours.items():
        table[name] = value
    if text.strip():
        table.add(tomlkit.nl())  # a blank line before whatever follows
    servers[SERVER_NAME] = table
    return tomlkit.dumps(document)


def _plain(value: Any) -> Any:
    return value.unwrap() if hasattr(value, "unwrap") else value


def _load_json_object(text: str | None, shown: str) -> dict[str, Any]:
    if text is None or not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConnectError(f"{shown} is not valid JSON ({exc}): fix it by hand") from None
    if not isinstance(data, dict):
        raise ConnectError(f"{shown} is not a JSON object: fix it by hand")
    return data
