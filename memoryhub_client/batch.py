"""`memoryhub save --batch FILE.jsonl`: save every line of a JSON Lines file through
`POST memories/batch/`, up to 500 entries (and under the body limit) a request.

Each line is one object with the fields of a save (`key`, `content`, `type`, `project`,
`supersede_reason`, `metadata`, ...). A line that is not a JSON object stops the command
before anything is sent. The server answers each entry with its status; the command
prints one line per entry refused or found a duplicate (`entry N` counts the file's
objects from 1), then a summary, and exits 1 when an
entry was refused (`error`), so a script notices. Sending the same file again changes
nothing: entries already stored come back `unchanged`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from typing import Any

from memoryhub_client.api import ApiError, hub_for
from memoryhub_client.config import ConfigError, load_config

MAX_ENTRIES = 500  # the server's limit per request (memories.writes.MAX_BATCH_ENTRIES)
MAX_BYTES = 900 * 1024  # under the server's default body limit (MEMORYHUB_MAX_BODY_BYTES, 1 MiB)
STATUSES = ("created", "superseded", "unchanged", "duplicate", "error")


def read_entries(path: str) -> list[dict[str, Any]]:
    """The file's objects, in order (blank lines skipped); '-' reads stdin."""
    try:
        if path == "-":
            text = sys.stdin.read()
        else:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    entries = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError as exc:
            raise ConfigError(f"line {number} of {path} is not JSON: {exc}") from None
        if not isinstance(entry, dict):
            raise ConfigError(f"line {number} of {path} is not a JSON object")
        entries.append(entry)
    if not entries:
        raise ConfigError(f"{path} holds no entries")
    return entries


def requests_of(entries: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The entries as requests of at most MAX_ENTRIES and about MAX_BYTES each."""
    chunks: list[list[dict[str, Any]]] = [[]]
    size = 0
    for entry in entries:
        entry_size = len(json.dumps(entry).encode()) + 2
        if chunks[-1] and (len(chunks[-1]) >= MAX_ENTRIES or size + entry_size > MAX_BYTES):
            chunks.append([])
            size = 0
        chunks[-1].append(entry)
        size += entry_size
    return chunks


def run_save_batch(arguments: argparse.Namespace) -> int:
    if arguments.key is not None:
        raise ConfigError("give either a key (and its text) or --batch FILE, not both")
    entries = read_entries(arguments.batch)
    results: list[dict[str, Any]] = []
    with hub_for(load_config(arguments)) as hub:
        for chunk in requests_of(entries):
            offset = len(results)
            try:
                answer = hub.save_batch(chunk)
            except ApiError as exc:
                raise type(exc)(
                    f"entries {offset + 1}-{offset + len(chunk)}: {exc}", status=exc.status, body=exc.body
                ) from None
            for answered in answer["results"]:
                results.append({**answered, "index": offset + answered["index"]})
    counts = Counter(str(result.get("status")) for result in results)
    if arguments.json:
        print(json.dumps({"results": results, "counts": {s: counts[s] for s in STATUSES}}, indent=2))
    else:
        for result in results:
            status = result.get("status")
            if status == "error":
                error = result.get("error") or {}
                where = f"entry {result['index'] + 1}: {result.get('key')}"
                print(f"{where}: {error.get('error')}: {error.get('detail')}")
            elif status == "duplicate":
                holder = (result.get("duplicate_of") or {}).get("key")
                print(
                    f"entry {result['index'] + 1}: {result.get('key')}: not saved, '{holder}' holds the text"
                )
        print(", ".join(f"{counts[s]} {s}" for s in STATUSES))
    return 1 if counts["error"] else 0
