"""`manage.py inject SLUG --into CLAUDE.md`: write the team's injection block into a
file an agent reads at start-up (CLAUDE.md, AGENTS.md), as one marked section.

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

from django.core.management.base import CommandError

from agents.injection import build_injection
from core.errors import DomainError
from teams.management.commands._base import TeamCommand
from teams.scope import team_scope
from teams.scrubber import scrub
from teams.selectors import team_secret_values

BEGIN = b"<!-- memoryhub:begin -->"
END = b"<!-- memoryhub:end -->"


class Command(TeamCommand):
    help = (
        "Write or replace the MemoryHub section (between <!-- memoryhub:begin --> and "
        "<!-- memoryhub:end -->) of a CLAUDE.md or AGENTS.md, leaving the rest of the file as it is."
    )

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        super().add_arguments(parser)
        parser.add_argument("--into", required=True, help="the file to write (created if missing)")
        parser.add_argument("--project", default=None, help="entries of this project and of no project")
        parser.add_argument("--max-tokens", type=int, default=None, help="token budget (default: the team's)")

    def handle(
        self, *args, slug: str, into: str, project: str | None, max_tokens: int | None, **options
    ) -> None:  # type: ignore[no-untyped-def]
        team = self.team(slug)
        path = Path(into)
        if path.is_symlink():
            path = path.resolve()  # write the file the link points to, keep the link
        if path.is_dir():
            raise CommandError(f"{into} is a folder")
        if not path.parent.is_dir():
            raise CommandError(f"no folder {path.parent}")
        try:
            with team_scope(team.id):
                result = build_injection(team=team, project=project, max_tokens=max_tokens)
                secrets = team_secret_values(team_id=team.id)
        except DomainError as exc:
            raise CommandError(exc.detail) from None
        # Contents were scrubbed when saved; scrub again for vault secrets added since,
        # as the API's renderer does for every response.
        text = scrub(result.text, secrets).text

        old = path.read_bytes() if path.exists() else None
        new = replace_section(old, text)
        for warning in result.warnings:
            self.stderr.write(f"warning: {warning}")
        summary = f"{len(result.included)} entries, {result.tokens_used} of {result.token_budget} tokens"
        if new == old:
            self.stdout.write(f"{into} unchanged ({summary})")
            return
        _write(path, new, existed=old is not None)
        self.stdout.write(f"{'updated' if old is not None else 'created'} {into} ({summary})")


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
        raise CommandError(
            f"the file has {len(begins)} begin and {len(ends)} end markers of the MemoryHub section; "
            "expected one of each, begin first: fix it by hand"
        )
    start = begins[0][0]
    stop = ends[0][1]
    return old[:start] + section + old[stop:]


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


def _write(path: Path, data: bytes, *, existed: bool) -> None:
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
