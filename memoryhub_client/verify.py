"""`memoryhub verify [--worktree DIR]`: check the team's file anchors in a worktree.

The server cannot see a worktree, so the client checks it: it lists the team's active
entries with a `file` anchor (`GET anchors/?type=file`), looks whether each path exists
inside the worktree's root (git's top level, or DIR outside git), and reports the answer
(`POST anchors/report/`); the server records the checks and flags entries whose file is
gone. A path that is absolute, or resolves outside the root (`..`, a symlink out), is
reported as missing with the reason: a team's anchor names a file of the repository.

The session-start hook runs `report_worktree` too, bounded and never failing the hook."""

from __future__ import annotations

import argparse
import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from memoryhub_client.api import MemoryHubApi
from memoryhub_client.config import add_connection_flags, load_config
from memoryhub_client.types import AnchoredEntry

PAGE_SIZE = 200
MAX_PAGES = 50  # 10,000 anchors: more than any team has
REPORT_CHUNK = 500  # the server's limit on one report
GIT_TIMEOUT_SECONDS = 10


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    verify = commands.add_parser(
        "verify",
        help="check the team's file anchors in this worktree and report them",
        description="List the team's entries anchored to a file, check each path exists in the "
        "worktree (its git top level), and report to the server, which flags entries whose file is gone.",
    )
    verify.add_argument("--worktree", default=None, help="the worktree (default: the current folder)")
    verify.add_argument("--json", action="store_true", help="print the outcome as JSON")
    add_connection_flags(verify)
    verify.set_defaults(handler=run_verify)


@dataclass
class Verified:
    root: str
    checked: int = 0
    missing: list[dict[str, str]] = field(default_factory=list)
    server: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "worktree": self.root,
            "checked": self.checked,
            "missing": self.missing,
            "server": self.server,
        }


def run_verify(arguments: argparse.Namespace) -> int:
    folder = Path(arguments.worktree or ".").expanduser()
    with MemoryHubApi(load_config(arguments)) as api:
        outcome = report_worktree(api, folder, max_pages=MAX_PAGES)
    if arguments.json:
        print(json.dumps(outcome.as_dict(), indent=2, ensure_ascii=False))
        return 0
    present = outcome.checked - len(outcome.missing)
    missing = len(outcome.missing)
    print(f"{outcome.checked} file anchors checked in {outcome.root}: {present} exist, {missing} missing")
    for item in outcome.missing:
        print(f"  missing  {item['key']}  {item['path']}  ({item['reason']})")
    flagged = outcome.server.get("flagged", 0)
    if flagged:
        print(f"{flagged} entries flagged anchor_broken (see `nudges`)")
    return 0


def report_worktree(api: MemoryHubApi, folder: Path, *, max_pages: int) -> Verified:
    """Check every file anchor (at most max_pages pages) and report them."""
    root = worktree_root(folder)
    outcome = Verified(root=str(root))
    results: list[dict[str, Any]] = []
    for entry in file_anchors(api, max_pages=max_pages):
        key, path = entry["key"], entry["anchor"]["value"]
        exists, reason = path_exists(root, path)
        item: dict[str, Any] = {"key": key, "exists": exists}
        if not exists:
            item["reason"] = reason
            outcome.missing.append({"key": key, "path": path, "reason": reason})
        results.append(item)
    outcome.checked = len(results)
    totals = {"recorded": 0, "flagged": 0, "unflagged": 0}
    for start in range(0, len(results), REPORT_CHUNK):
        answer = api.hub.report_file_anchors(results[start : start + REPORT_CHUNK])
        for name in totals:
            totals[name] += int(answer.get(name) or 0)
    outcome.server = totals
    return outcome


def file_anchors(api: MemoryHubApi, *, max_pages: int) -> list[AnchoredEntry]:
    entries: list[AnchoredEntry] = []
    cursor: str | None = None
    for _page in range(max_pages):
        page = api.hub.anchors(type="file", limit=PAGE_SIZE, cursor=cursor)
        entries.extend(page.results)
        cursor = page.next_cursor
        if cursor is None:
            break
    return entries


def worktree_root(folder: Path) -> Path:
    """git's top level of `folder`; the folder itself outside a git worktree."""
    try:
        done = subprocess.run(  # noqa: S603 (fixed arguments, no shell)
            ["git", "-C", str(folder), "rev-parse", "--show-toplevel"],  # noqa: S607 (git from PATH)
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        done = None
    if done is not None and done.returncode == 0 and done.stdout.strip():
        return Path(done.stdout.strip()).resolve()
    return folder.resolve()


def path_exists(root: Path, value: str) -> tuple[bool, str]:
    """Whether the anchor's path names something inside `root`, and if not, why."""
    if not value or "\x00" in value:
        return False, "not a path"
    if PurePosixPath(value).is_absolute() or PureWindowsPath(value).is_absolute() or value.startswith("~"):
        return False, "absolute path"
    try:
        target = (root / value).resolve()
    except (OSError, RuntimeError, ValueError):
        return False, "not a path"
    if target != root and root not in target.parents:
        return False, "outside the worktree"
    try:
        return (True, "") if target.exists() else (False, "not found")
    except OSError:
        return False, "not readable"
