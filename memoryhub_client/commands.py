"""`memoryhub search | save | get | inject`: the REST API from an agent's shell."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from memoryhub_client.api import ApiError, hub_for
from memoryhub_client.config import ConfigError, add_connection_flags, load_config
from memoryhub_client.operations import is_duplicate
from memoryhub_client.section import SectionError, write_section

MAX_QUERY_CHARS = 8000  # the server's limit on a search query (search.selectors)
RECENT_COMMITS = 10
GIT_TIMEOUT_SECONDS = 10


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    search = commands.add_parser(
        "search", help="search the team's memory", description="Search by meaning and keyword."
    )
    search.add_argument("query", help="what to look for, in plain words")
    search.add_argument("--max-results", type=int, default=None)
    search.add_argument("--type", dest="types", action="append", help="only this type (repeat for several)")
    search.add_argument("--project", default=None, help="only entries of this project and of no project")
    search.add_argument("--mode", choices=["hybrid", "keyword", "vector"], default=None)
    search.add_argument(
        "--include-superseded",
        action="store_true",
        help="also list replaced versions, each right after the current entry of its key",
    )
    # The default since superseded versions are asked for; kept so that old scripts still run.
    search.add_argument("--active-only", action="store_true", help=argparse.SUPPRESS)
    search.add_argument("--json", action="store_true", help="print the server's JSON answer")
    add_connection_flags(search)
    search.set_defaults(handler=run_search)

    save = commands.add_parser("save", help="save a memory under a key", description="Save a memory.")
    save.add_argument("key", nargs="?", default=None, help="the memory's key, e.g. deploy-friday")
    save.add_argument("content", nargs="?", default="-", help="the text; '-' or left out: read stdin")
    save.add_argument("--type", default=None, help="identity, lesson, decision, context, reference, ...")
    save.add_argument("--project", default=None)
    save.add_argument("--reason", default=None, help="supersede the key's active entry, for this reason")
    save.add_argument("--json", action="store_true", help="print the server's JSON answer")
    save.add_argument(
        "--batch",
        metavar="FILE.jsonl",
        default=None,
        help="save every line of a JSON Lines file (one object per line with a save's fields), "
        "500 a request; '-': stdin",
    )
    add_connection_flags(save)
    save.set_defaults(handler=run_save)

    get = commands.add_parser("get", help="print a memory's active entry", description="Print a memory.")
    get.add_argument("key")
    get.add_argument("--json", action="store_true", help="print the whole entry as JSON")
    add_connection_flags(get)
    get.set_defaults(handler=run_get)

    inject = commands.add_parser(
        "inject",
        help="write the team's memory block into CLAUDE.md or AGENTS.md",
        description="Write or replace the MemoryHub section (between <!-- memoryhub:begin --> and "
        "<!-- memoryhub:end -->) of a file an agent reads at start-up; the rest of the file is kept.",
    )
    inject.add_argument("--into", required=True, help="the file to write (created if missing)")
    inject.add_argument("--project", default=None, help="entries of this project and of no project")
    inject.add_argument("--max-tokens", type=int, default=None, help="token budget (default: the team's)")
    inject.add_argument(
        "--query",
        nargs="?",
        const="",
        default=None,
        help="add the most relevant memories: to this text, or, given alone, to the worktree's "
        "branch name and recent commit messages",
    )
    add_connection_flags(inject)
    inject.set_defaults(handler=run_inject)


def run_search(arguments: argparse.Namespace) -> int:
    with hub_for(load_config(arguments)) as hub:
        answer = hub.search(
            arguments.query,
            max_results=arguments.max_results,
            types=arguments.types,
            project=arguments.project,
            mode=arguments.mode,
            include_superseded=True if arguments.include_superseded else None,
        )
    if arguments.json:
        _print_json(answer)
        return 0
    for warning in answer.get("warnings", []):
        print(f"warning: {warning}", file=sys.stderr)
    results = answer.get("results", [])
    if not results:
        print("no results")
    for result in results:
        state = _state(result)
        snippet = " ".join(str(result.get("snippet", "")).split())
        print(f"{result.get('score', 0):.3f}  {result.get('key')}  [{result.get('type')}]{state}  {snippet}")
    return 0


def _state(result: Mapping[str, Any]) -> str:
    """How a search result stands, when it is not the current entry of its key."""
    if result.get("superseded"):
        successor = result.get("superseded_by") or {}
        return f" (superseded by {successor.get('id', 'a newer version')})"
    return "" if result.get("is_active") else " (archived)"


def run_save(arguments: argparse.Namespace) -> int:
    if arguments.batch is not None:
        from memoryhub_client.batch import run_save_batch

        return run_save_batch(arguments)
    if arguments.key is None:
        raise ConfigError("give the memory's key (or --batch FILE.jsonl)")
    content = sys.stdin.read() if arguments.content == "-" else arguments.content
    with hub_for(load_config(arguments)) as hub:
        answer = hub.save(
            arguments.key,
            content,
            type=arguments.type,
            project=arguments.project,
            supersede_reason=arguments.reason,
        )
    if arguments.json:
        _print_json(answer)
    elif is_duplicate(answer):
        print(f"not saved: {answer['detail']} ({answer['duplicate_of']['key']})")
    else:
        superseded = " (superseded the previous entry)" if answer["supersedes_id"] else ""
        print(f"saved {answer['key']} as {answer['type']}{superseded}")
    return 0


def run_get(arguments: argparse.Namespace) -> int:
    with hub_for(load_config(arguments)) as hub:
        answer = hub.get(arguments.key)
    if arguments.json:
        _print_json(answer)
    else:
        content = str(answer.get("content", ""))
        print(content, end="" if content.endswith("\n") else "\n")
    return 0


def run_inject(arguments: argparse.Namespace) -> int:
    config = load_config(arguments)
    query = arguments.query
    if query == "":  # --query given alone
        query = worktree_query(Path(arguments.into).resolve().parent) or None
    with hub_for(config) as hub:
        answer = hub.context(project=config.project, query=query, max_tokens=arguments.max_tokens)
    for warning in answer["warnings"]:
        print(f"warning: {warning}", file=sys.stderr)
    outcome = write_section(arguments.into, answer["text"])
    counts, tokens = answer["counts"], answer["tokens"]
    summary = f"{counts['included']} entries, {tokens['used']} of {tokens['budget']} tokens"
    print(
        f"{arguments.into} unchanged ({summary})"
        if outcome == "unchanged"
        else f"{outcome} {arguments.into} ({summary})"
    )
    return 0


def worktree_query(folder: Path) -> str:
    """What the worktree is about: its branch name (words, not separators) and its recent
    commit subjects, newest first. Empty outside a git worktree. Local git only, no network."""
    branch = _git(folder, "rev-parse", "--abbrev-ref", "HEAD")
    subjects = _git(folder, "log", f"-n{RECENT_COMMITS}", "--format=%s")
    words = []
    if branch and branch != "HEAD":  # a detached HEAD names no branch
        words.append(" ".join(branch.replace("/", " ").replace("-", " ").replace("_", " ").split()))
    words.extend(line.strip() for line in subjects.splitlines() if line.strip())
    return "\n".join(words)[:MAX_QUERY_CHARS]


def _git(folder: Path, *arguments: str) -> str:
    try:
        done = subprocess.run(  # noqa: S603 (fixed arguments, no shell)
            ["git", "-C", str(folder), *arguments],  # noqa: S607 (git from PATH, as a user runs it)
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def _print_json(answer: Mapping[str, Any]) -> None:
    print(json.dumps(answer, indent=2, ensure_ascii=False))


def register_all(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """search, save, get, inject, hook, connect and verify (cli.py adds them to its parser)."""
    from memoryhub_client import claude_code_hooks, connect, drafts, verify

    register(commands)
    claude_code_hooks.register(commands)
    connect.register(commands)
    verify.register(commands)
    drafts.register(commands)


def run(arguments: argparse.Namespace) -> int:
    """Run a subcommand; a failure is one line on stderr (never the token), exit status 1."""
    from memoryhub_client.connect import ConnectError

    try:
        result: int = arguments.handler(arguments)
    except (ApiError, ConfigError, SectionError, ConnectError) as exc:
        print(f"memoryhub {arguments.command}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return result
