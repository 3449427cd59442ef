"""The markdown of `memoryhub import-markdown` and `export-markdown` (the commands are in
memoryhub_client.transfer): a markdown file cut into memory records of the export
format, and a type's active entries rendered as a file that reads back as they were
(docs/write-path.md, "Markdown round trip")."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from memoryhub_client.section import BEGIN, END

MAX_KEY_CHARS = 200
# What export-markdown writes of each entry, in a marker line `import-markdown` reads back.
ENTRY_BEGIN = "<!-- memoryhub:entry "
ENTRY_MARKER_END = " -->"
ENTRY_END = "<!-- memoryhub:entry-end -->"
ENTRY_FIELDS = (
    "key",
    "type",
    "project",
    "metadata",
    "skill_trigger",
    "anchor",
    "pinned",
    "original_type",
    "auto_captured",
    "updated_by",
    "created_at",
    "last_confirmed_at",
    "upvotes",
    "downvotes",
    "access_count",
    "last_accessed_at",
)
# The closing hashes are stripped in Python: a lazy title before `[ \t#]*$` rescans a
# long run of " #" from every position.
_heading = re.compile(r"^(#{1,6})[ \t]+(\S.*)$")
_fence = re.compile(r"^\s*(```|~~~)")
_not_key_char = re.compile(r"[^a-z0-9]+")


def markdown_records(source: str, text: str, *, project: str) -> list[dict[str, Any]]:
    """The memory records of a markdown file: each entry `export-markdown` wrote (its
    marker says what the entry is, its key included; its text is kept byte for byte),
    then one record per heading section with text of the rest (the text before the first
    heading counts as the file's own section). MemoryHub's injected section is left out:
    re-importing it would save the team's memory as new memories."""
    entries, rest = _exported_entries(text)
    return entries + _section_records(source, "\n".join(rest), project=project)


def _exported_entries(text: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The entries of an exported file, and the lines that are not part of one. An entry
    is its marker line, its text's lines and the end line; a marker inside a code fence
    of the other lines is text."""
    lines = text.split("\n")
    entries: list[dict[str, Any]] = []
    rest: list[str] = []
    in_fence = False
    index = 0
    while index < len(lines):
        entry = None if in_fence else _entry_at(lines, index)
        if entry is None:
            if _fence.match(lines[index]):
                in_fence = not in_fence
            rest.append(lines[index])
            index += 1
            continue
        record, index = entry
        entries.append(record)
    return entries, rest


def _entry_at(lines: list[str], index: int) -> tuple[dict[str, Any], int] | None:
    """The entry whose marker is lines[index], and the index after its end line; None
    when that line is no marker (or one whose entry does not end)."""
    line = lines[index]
    if not (line.startswith(ENTRY_BEGIN) and line.endswith(ENTRY_MARKER_END)):
        return None
    try:
        said = json.loads(line[len(ENTRY_BEGIN) : -len(ENTRY_MARKER_END)])
    except ValueError:
        return None
    if not isinstance(said, dict) or not isinstance(said.get("key"), str):
        return None
    start = index + 1
    end = start + said["lines"] if isinstance(said.get("lines"), int) and said["lines"] >= 0 else -1
    if not 0 <= end < len(lines) or lines[end] != ENTRY_END:
        # Edited by hand since: the text runs to the end line.
        end = next((i for i in range(start, len(lines)) if lines[i] == ENTRY_END), -1)
        if end < 0:
            return None
    record = {name: said[name] for name in ENTRY_FIELDS if name in said}
    return {"record": "memory", **record, "content": "\n".join(lines[start:end])}, end + 1


def _section_records(source: str, text: str, *, project: str) -> list[dict[str, Any]]:
    """One memory record per heading section with text."""
    records: list[dict[str, Any]] = []
    path: list[str] = []
    body: list[str] = []
    used: set[str] = set()

    def flush() -> None:
        content = "\n".join(body).strip()
        body.clear()
        if not content:
            return
        key = _unique(_section_key(source, path), used)
        record = {
            "record": "memory",
            "key": key,
            "content": content,
            "project": project,
            "heading": " > ".join(path),
            # No updated_by: the server writes an import as the importing token.
            "metadata": {"source": {"file": source, "heading": " > ".join(path)}},
        }
        records.append(record)

    in_fence = False
    for line in _without_injected_section(text).splitlines():
        if _fence.match(line):
            in_fence = not in_fence
        heading = None if in_fence else _heading.match(line)
        if heading is None:
            body.append(line)
            continue
        flush()
        level = len(heading.group(1))
        del path[level - 1 :]
        path.extend([""] * (level - 1 - len(path)))
        title = heading.group(2)
        path.append((title.rstrip(" \t#") or title).strip())
    flush()
    return records


def _without_injected_section(text: str) -> str:
    begin, end = BEGIN.decode(), END.decode()
    kept, inside = [], False
    for line in text.splitlines():
        if line.strip() == begin:
            inside = True
        elif line.strip() == end and inside:
            inside = False
        elif not inside:
            kept.append(line)
    return "\n".join(kept)


def _slug(text: str) -> str:
    return _not_key_char.sub("-", text.lower()).strip("-")


def _section_key(source: str, path: list[str]) -> str:
    parts = [_slug(part) for part in [source.replace("/", "-"), *path]]
    key = ":".join(part for part in parts if part) or "note"
    if len(key) > MAX_KEY_CHARS:
        digest = hashlib.sha256(key.encode()).hexdigest()[:10]
        key = f"{key[: MAX_KEY_CHARS - 11].rstrip(':-')}-{digest}"
    return key


def _unique(key: str, used: set[str]) -> str:
    candidate, number = key, 2
    while candidate in used:
        suffix = f"-{number}"
        candidate, number = key[: MAX_KEY_CHARS - len(suffix)] + suffix, number + 1
    used.add(candidate)
    return candidate


def render_type_file(type_name: str, memories: list[dict[str, Any]]) -> str:
    """The type's active entries, sorted by key: each under a heading of its key, with a
    marker line saying what the entry is (hidden when the markdown is rendered) and its
    text as it is, so that `import-markdown` reads the entry back under its own key."""
    lines = [f"# {type_name.capitalize()}", ""]
    for memory in sorted(memories, key=lambda m: str(m.get("key"))):
        text = str(memory.get("content", "")).split("\n")
        said = {name: memory[name] for name in ENTRY_FIELDS if name in memory}
        said["lines"] = len(text)
        # "-->" can only be inside a JSON string, where \u003e reads back as ">".
        marker = json.dumps(said, ensure_ascii=False, sort_keys=True).replace("-->", "--\\u003e")
        lines += [
            f"## {memory.get('key')}",
            "",
            f"{ENTRY_BEGIN}{marker}{ENTRY_MARKER_END}",
            *text,
            ENTRY_END,
            "",
        ]
    return "\n".join(lines)
