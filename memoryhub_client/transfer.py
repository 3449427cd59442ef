"""`memoryhub export | import | import-markdown | export-markdown`: a team's memory in and
out of files, over the REST API (docs/write-path.md, "Export and import").

`export` streams `GET export/` to a file, `import` posts a file to `POST import/`.
`import-markdown` turns CLAUDE.md, AGENTS.md, MEMORY.md and folders of notes into
records of the same format (one per heading section) and posts them to the same
endpoint, so it is idempotent, has a dry run and reports bad sections the same way.
`export-markdown` writes the team's active memories as one file per type, each entry
marked so that `import-markdown` reads it back as it was.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from tqdm import tqdm

from memoryhub_client.api import ApiError, hub_for
from memoryhub_client.config import ClientConfig, ConfigError, add_connection_flags, load_config
from memoryhub_client.hub import MemoryHub
from memoryhub_client.markdown import markdown_records, render_type_file

EXPORT_FORMAT = "memoryhub-export"  # memories.exporting (the client imports no server code)
EXPORT_VERSION = 2
# An import is applied before the server answers; a big file takes a while.
IMPORT_TIMEOUT_SECONDS = 600.0
# Under the server's default body limit (MEMORYHUB_MAX_BODY_BYTES, 1 MiB) with room to spare.
DEFAULT_BATCH_BYTES = 900 * 1024
MARKDOWN_SUFFIXES = (".md", ".markdown")


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    export = commands.add_parser(
        "export",
        help="write the team's whole memory as JSON Lines (admin token)",
        description="Every version with every field it has, every note and confirmation; imported "
        "into an empty team it reproduces the team. Never the vault (unless --with-vault).",
    )
    export.add_argument("--output", "-o", default="-", help="the file to write ('-', the default: stdout)")
    export.add_argument(
        "--with-vault",
        action="store_true",
        help="include the vault, every value sealed under a passphrase (asked for, or --passphrase-env)",
    )
    _add_passphrase_flag(export)
    add_connection_flags(export)
    export.set_defaults(handler=run_export)

    load = commands.add_parser(
        "import",
        help="apply an export file to the team (admin token)",
        description="New keys get their whole history; keys the team has are superseded with the "
        "reason 'imported' (or left alone with --skip-existing); importing twice changes nothing. "
        "Every version is written as your token; the file's authors are kept in metadata.imported_from.",
    )
    load.add_argument("file", help="a file of `memoryhub export` ('-': stdin)")
    _add_import_flags(load)
    _add_passphrase_flag(load)
    add_connection_flags(load)
    load.set_defaults(handler=run_import)

    markdown_in = commands.add_parser(
        "import-markdown",
        help="import CLAUDE.md, AGENTS.md, MEMORY.md or folders of notes, one memory per section",
        description="Each heading section becomes a memory: its key from the file and heading path, "
        "its type from the heading's words or the text. MemoryHub's own injected section is skipped.",
    )
    markdown_in.add_argument("paths", nargs="+", help="markdown files or folders of them")
    markdown_in.add_argument("--project", default=None, help="the project of every imported memory")
    _add_import_flags(markdown_in)
    add_connection_flags(markdown_in)
    markdown_in.set_defaults(handler=run_import_markdown)

    markdown_out = commands.add_parser(
        "export-markdown",
        help="write the team's active memories as a folder of markdown, one file per type",
        description="One file per type, entries sorted by key: a stable copy to review in git, which "
        "import-markdown reads back under the same keys.",
    )
    markdown_out.add_argument("directory", help="the folder to write (created if missing)")
    add_connection_flags(markdown_out)
    markdown_out.set_defaults(handler=run_export_markdown)


def _add_import_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--skip-existing", action="store_true", help="leave keys the team has as they are")
    parser.add_argument("--dry-run", action="store_true", help="report what would change; change nothing")
    parser.add_argument("--strict", action="store_true", help="refuse the whole file if any line is bad")
    parser.add_argument(
        "--batch-bytes",
        type=int,
        default=DEFAULT_BATCH_BYTES,
        help="the most sent in one request (keep it under the server's MEMORYHUB_MAX_BODY_BYTES)",
    )


def _add_passphrase_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--passphrase-env",
        metavar="VAR",
        default=None,
        help="the environment variable holding the vault's passphrase (else it is asked for; "
        "an import without one skips the file's vault)",
    )


def _passphrase(arguments: argparse.Namespace, *, required: bool, confirm: bool) -> str | None:
    """From --passphrase-env, else asked on the terminal (never a command-line argument:
    those show in `ps` and shell history)."""
    if arguments.passphrase_env:
        value = os.environ.get(arguments.passphrase_env, "")
        if not value:
            raise ConfigError(f"the environment variable {arguments.passphrase_env} is empty or not set")
        return value
    if not sys.stdin.isatty():
        if required:
            raise ConfigError("--with-vault needs a passphrase: set --passphrase-env or run it in a terminal")
        return None
    value = getpass.getpass("vault passphrase (12 characters or more; empty: skip the vault): ")
    if not value:
        if required:
            raise ConfigError("--with-vault needs a passphrase")
        return None
    if confirm and getpass.getpass("the same passphrase again: ") != value:
        raise ConfigError("the two passphrases differ")
    return value


# ----- export -----


def run_export(arguments: argparse.Namespace) -> int:
    config = load_config(arguments)
    passphrase = _passphrase(arguments, required=True, confirm=True) if arguments.with_vault else None
    with (
        hub_for(config) as hub,
        hub.export(with_vault=arguments.with_vault, vault_passphrase=passphrase) as lines,
    ):
        if arguments.output == "-":
            return _write_export(lines, sys.stdout.buffer)
        target = Path(arguments.output)
        # Into a temporary file first: an export cut short never replaces a good one.
        with tempfile.NamedTemporaryFile(
            dir=target.parent, prefix=f".{target.name}.", delete=False
        ) as handle:
            try:
                status = _write_export(lines, handle)
            except BaseException:
                os.unlink(handle.name)
                raise
        if status == 0:
            os.replace(handle.name, target)
        else:
            os.unlink(handle.name)
    if status == 0:
        print(f"exported to {target}", file=sys.stderr)
    return status


def _write_export(lines: Iterator[bytes], out: IO[bytes]) -> int:
    last = b""
    with tqdm(desc="export", unit=" records", disable=None, file=sys.stderr) as progress:
        for line in lines:
            out.write(line + b"\n")
            progress.update(1)
            last = line
    out.flush()
    try:
        trailer = json.loads(last)
    except ValueError:
        trailer = None
    if not isinstance(trailer, dict) or trailer.get("record") != "end":
        print("memoryhub export: the export was cut short (no end record); try again", file=sys.stderr)
        return 1
    return 0


# ----- import -----


def run_import(arguments: argparse.Namespace) -> int:
    if arguments.file == "-":
        raw = sys.stdin.buffer.read()
    else:
        try:
            raw = Path(arguments.file).read_bytes()
        except OSError as exc:
            raise ConfigError(f"cannot read {arguments.file}: {exc.strerror}") from None
    vault = _passphrase(arguments, required=False, confirm=False) if b'"record": "vault"' in raw else None
    return _post_import(load_config(arguments), raw, arguments, vault_passphrase=vault)


def _post_import(
    config: ClientConfig, raw: bytes, arguments: argparse.Namespace, vault_passphrase: str | None = None
) -> int:
    """Post the file in batches (import_batches) and print one summary of them all.

    Each batch is applied on its own; keys never span two, so the rules per key hold.
    With --strict and several batches, every batch is first tried as a strict dry run
    and nothing is applied unless all pass."""
    batches = import_batches(raw, getattr(arguments, "batch_bytes", DEFAULT_BATCH_BYTES))
    flags = {name for name in ("skip_existing", "dry_run", "strict") if getattr(arguments, name, False)}
    with hub_for(config, timeout=IMPORT_TIMEOUT_SECONDS) as hub:
        if "strict" in flags and "dry_run" not in flags and len(batches) > 1:
            _post_batches(hub, batches, {*flags, "dry_run"}, vault_passphrase, desc="check")
        reports = _post_batches(hub, batches, flags, vault_passphrase, desc="import")
    errors = sorted((bad for report in reports for bad in report["errors"]), key=lambda bad: bad["line"])
    for bad in errors:
        print(f"line {bad['line']}: {bad.get('error')}: {bad.get('detail')} (skipped)", file=sys.stderr)
    counts = ", ".join(
        f"{sum(r.get(name, 0) for r in reports)} {name}"
        for name in ("created", "superseded", "unchanged", "skipped")
    )
    vault = {
        name: sum((r.get("vault") or {}).get(name, 0) for r in reports)
        for name in ("created", "replaced", "unchanged", "skipped")
    }
    vault_line = (
        "; vault entries: " + ", ".join(f"{n} {name}" for name, n in vault.items())
        if any(vault.values())
        else ""
    )
    prefix = "dry run, nothing changed: would be " if "dry_run" in flags else ""
    print(f"{prefix}{counts} keys{vault_line}; {len(errors)} bad lines")
    return 1 if errors else 0


def _post_batches(
    hub: MemoryHub, batches: list[ImportBatch], flags: set[str], vault_passphrase: str | None, desc: str
) -> list[dict[str, Any]]:
    reports = []
    total = sum(batch.records for batch in batches)
    with tqdm(desc=desc, total=total, unit=" records", disable=None, file=sys.stderr) as bar:
        for batch in batches:
            # The length is known: sent with Content-Length, never chunked (WSGI needs it).
            try:
                report = hub.import_export_file(
                    batch.body,
                    dry_run="dry_run" in flags,
                    skip_existing="skip_existing" in flags,
                    strict="strict" in flags,
                    vault_passphrase=vault_passphrase,
                )
            except ApiError as error:
                lines = error.body.get("lines")
                for bad in lines if isinstance(lines, list) else []:
                    line = batch.original_line(bad.get("line"))
                    print(f"line {line}: {bad.get('error')}: {bad.get('detail')}", file=sys.stderr)
                raise
            for bad in report.get("errors", []):
                bad["line"] = batch.original_line(bad.get("line"))
            reports.append(report)
            bar.update(batch.records)
    return reports


@dataclass
class ImportBatch:
    body: bytes
    lines: list[int]  # the file's line number of each line of the body after its header
    records: int

    def original_line(self, line: object) -> int:
        """The file's line number of the body's line `line` (the header being 1)."""
        if isinstance(line, int) and 2 <= line <= len(self.lines) + 1:
            return self.lines[line - 2]
        return 1


def import_batches(raw: bytes, batch_bytes: int = 0) -> list[ImportBatch]:
    """The file cut into bodies of at most `batch_bytes` (a server takes 1 MiB by
    default), each led by the file's header. A key's versions, notes and confirmations
    always go together, with the keys whose versions name each other's (a longer
    duplicate saved under another key, an unsupersede that gave another key its entry
    back), a fact's versions too, and the vault with the first batch; a group bigger than a batch goes alone
    (and the server reports it too large). Lines that do not parse go with the first
    batch, so the server reports them with their number."""
    batch_bytes = batch_bytes or DEFAULT_BATCH_BYTES
    lines = raw.split(b"\n")
    header = lines[0]
    parsed: list[tuple[int, bytes, dict[str, Any] | None]] = []
    key_of_id: dict[str, str] = {}
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        record = record if isinstance(record, dict) else None
        if record is not None and record.get("record") == "end":
            continue
        parsed.append((number, line, record))
        if record is not None and record.get("record") == "memory":
            key, memory_id = record.get("key"), record.get("id")
            if isinstance(key, str) and isinstance(memory_id, str):
                key_of_id[memory_id] = key
    together = _KeyGroups()
    for _, _, record in parsed:
        if record is not None and record.get("record") == "memory" and isinstance(record.get("key"), str):
            for link in ("supersedes", "restored_from"):
                other = key_of_id.get(str(record.get(link)))
                if other is not None:
                    together.join(record["key"], other)
    groups: dict[str, list[tuple[int, bytes]]] = {"": []}  # "" : the first batch's
    for number, line, record in parsed:
        key = None
        if record is not None and record.get("record") == "memory" and isinstance(record.get("key"), str):
            key = record["key"]
        elif record is not None and record.get("record") in ("annotation", "confirmation"):
            key = key_of_id.get(str(record.get("memory")))
        group = "" if key is None else "key:" + together.root(key)
        if record is not None and record.get("record") == "fact":
            # A fact's versions go together, apart from the memories' keys.
            group = f"fact:{record.get('entity')}\n{record.get('key')}"
        groups.setdefault(group, []).append((number, line))
    batches: list[ImportBatch] = []
    body: list[bytes] = [header]
    numbers: list[int] = []
    size = len(header)
    for group, members in groups.items():
        group_size = sum(len(line) + 1 for _, line in members)
        if numbers and group and size + group_size > batch_bytes:
            batches.append(ImportBatch(b"\n".join(body) + b"\n", numbers, len(numbers)))
            body, numbers, size = [header], [], len(header)
        body += [line for _, line in members]
        numbers += [number for number, _ in members]
        size += group_size
    if numbers or not batches:
        batches.append(ImportBatch(b"\n".join(body) + b"\n", numbers, len(numbers)))
    return batches


class _KeyGroups:
    """Keys that must travel together (union-find)."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def root(self, key: str) -> str:
        self.parent.setdefault(key, key)
        while self.parent[key] != key:
            self.parent[key] = self.parent[self.parent[key]]
            key = self.parent[key]
        return key

    def join(self, one: str, other: str) -> None:
        first, second = self.root(one), self.root(other)
        if first != second:
            self.parent[second] = first


# ----- markdown in -----


def run_import_markdown(arguments: argparse.Namespace) -> int:
    records: list[dict[str, Any]] = []
    for path in _markdown_files([Path(p) for p in arguments.paths]):
        try:
            # Read as it is (no newline translation): an exported entry's text is kept exactly.
            text = path.read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read {path}: {exc}") from None
        records += markdown_records(
            _source_name(path, arguments.paths), text, project=arguments.project or ""
        )
    if not records:
        print("no sections with text found", file=sys.stderr)
        return 1
    header = {"record": "header", "format": EXPORT_FORMAT, "version": EXPORT_VERSION}
    raw = "\n".join(json.dumps(record, ensure_ascii=False) for record in [header, *records]).encode() + b"\n"
    return _post_import(load_config(arguments), raw, arguments)


def _markdown_files(paths: list[Path]) -> list[Path]:
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found += sorted(
                p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in MARKDOWN_SUFFIXES
            )
        elif path.is_file():
            found.append(path)
        else:
            raise ConfigError(f"{path}: no such file or folder")
    return found


def _source_name(path: Path, given: list[str]) -> str:
    """The file's name as the key starts with: relative to the folder given, if any."""
    for root in (Path(p) for p in given):
        if root.is_dir() and path.is_relative_to(root):
            return str(path.relative_to(root).with_suffix(""))
    return path.stem


# ----- markdown out -----


def run_export_markdown(arguments: argparse.Namespace) -> int:
    config = load_config(arguments)
    by_type: dict[str, list[dict[str, Any]]] = {}
    with hub_for(config) as hub, tqdm(desc="export", unit=" memories", disable=None, file=sys.stderr) as bar:
        for memory in hub.iter_memories(limit=200):
            by_type.setdefault(memory["type"], []).append(dict(memory))
            bar.update(1)
    directory = Path(arguments.directory)
    directory.mkdir(parents=True, exist_ok=True)
    for type_name, memories in sorted(by_type.items()):
        # newline="": the text is written as it is (an entry's text may hold "\r").
        (directory / f"{type_name}.md").write_text(
            render_type_file(type_name, memories), encoding="utf-8", newline=""
        )
    print(f"wrote {sum(map(len, by_type.values()))} memories to {directory}/ ({len(by_type)} files)")
    return 0
