"""The MemoryHub section of a CLAUDE.md or AGENTS.md: one writer, shared by the client's
`memoryhub inject` and the server's `manage.py inject` (which imports it from here, so the
client package stays free of any server code).

The section runs from the line `<!-- memoryhub:begin -->` to the line
`<!-- memoryhub:end -->`; it is replaced in place on every run, and every byte
outside it is kept as it was (line endings, a missing final newline, any encoding).
A file without the section gets it appended; a missing file is created. When
nothing changed, the file is not written at all (its mtime stays).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

BEGIN = b"<!-- memoryhub:begin -->"
END = b"<!-- memoryhub:end -->"


class SectionError(ValueError):
    """The file cannot take the section (bad markers, a folder, no parent folder)."""


def replace_section(old: bytes | None, text: str) -> bytes:
    """The file's new bytes: `old` with its section replaced by `text` (markdown with
    "\\n" line ends), or with the section appended when it has none."""
    if not old:
        return _section(text, b"\n") + b"\n"
    eol = _line_ending(old)
    section = _section(text, eol)
    begins, ends = _markers(old)
    if not begins and not ends:
        separator = (b"" if old.endswith((b"\n", b"\r")) else eol) + eol
        return old + separator + section + eol
    if len(begins) != 1 or len(ends) != 1 or ends[0][0] < begins[0][0]:
        raise SectionError(
            f"the file has {len(begins)} begin and {len(ends)} end markers of the MemoryHub section; "
            "expected one of each, begin first: fix it by hand"
        )
    start = begins[0][0]
    stop = ends[0][1]
    return old[:start] + section + old[stop:]


def write_section(into: str | Path, text: str) -> str:
    """Write `text` as the section of the file `into`; answers what happened:
    "created", "updated" or "unchanged"."""
    path = Path(into)
    if path.is_symlink():
        path = path.resolve()  # write the file the link points to, keep the link
    if path.is_dir():
        raise SectionError(f"{into} is a folder")
    if not path.parent.is_dir():
        raise SectionError(f"no folder {path.parent}")
    old = path.read_bytes() if path.exists() else None
    new = replace_section(old, text)
    if new == old:
        return "unchanged"
    write_atomically(path, new, existed=old is not None)
    return "updated" if old is not None else "created"


def _section(text: str, eol: bytes) -> bytes:
    body = text.rstrip("\n").encode("utf-8").replace(b"\n", eol)
    return BEGIN + eol + body + eol + END


def _line_ending(data: bytes) -> bytes:
    """The file's own line ending: that of its first line (LF for a one-line file)."""
    first = data.find(b"\n")
    if first > 0 and data[first - 1 : first] == b"\r":
        return b"\r\n"
    if first == -1 and b"\r" in data:
        return b"\r"
    return b"\n"


def _markers(data: bytes) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(start, end) offsets of each marker line, the end before its line ending."""
    begins, ends = [], []
    offset = 0
    for line in data.splitlines(keepends=True):
        content = line.rstrip(b"\r\n")
        marker = content.rstrip(b" \t")
        if marker == BEGIN:
            begins.append((offset, offset + len(content)))
        elif marker == END:
            ends.append((offset, offset + len(content)))
        offset += len(line)
    return begins, ends


def write_atomically(path: Path, data: bytes, *, existed: bool) -> None:
    """Replace the file atomically (a reader never sees half a file), keeping its mode."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        if existed:
            os.chmod(temporary, path.stat().st_mode & 0o7777)
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(temporary, 0o666 & ~umask)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
