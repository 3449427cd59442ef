"""Import an export file (memories.exporting) into a team, through the write services.

Conflict rules (docs/decisions.md, "Export and import"), per key of the file:
- the team has never had the key: its whole history is replayed oldest first through
  save_memory (each version scrubbed like every write; supersede reasons, deletions,
  notes and votes as in the file) → "created";
- the team's latest version of the key already holds what the file's last version
  would store (same content after scrubbing, type, project, metadata, skill; or both
  deleted) → "unchanged": importing the same file twice changes nothing;
- otherwise, with `skip_existing` → "skipped"; without it, the file's last version
  supersedes the team's entry with the reason "imported" (or is saved again under a
  deleted key) → "superseded". A key deleted in the file never deletes the team's
  entry: "skipped".

Each key is applied in a savepoint of its own: a line the services refuse is reported
with its line number and its key is left as it was. `strict` refuses the whole file,
with nothing applied, when any line is bad. `dry_run` applies everything and rolls it
back, so it reports exactly what an import would do. Indexing is left to the workers:
enqueued after commit (never, for a dry run).

Keys the team has never had and that carry no skill take a bulk path (_BulkWriter): the
same replay, built in Python with what save_memory would store (services.unsaved_version),
inserted with bulk_create a thousand keys at a time, under the keys' locks and the
memory quota, and handed to indexing in batches (hooks.memories_written). Every other
key goes through the services, one version at a time. The file's latest versions and the
team's secrets are read once per import.

Every version an import writes is the importer's (`actor`: the token, or `name/session`):
its updated_by, deleted_by and archived_by. What the file said (its team, who wrote each
version and when) is kept in the version's metadata under PROVENANCE_KEY; a version that
carries one already (imported before) keeps it, so it names the first origin. Provenance
is not content: "unchanged" ignores it.

A file exported with its vault restores it, first (so that memories are scrubbed of its
secrets as they are written), when the import is given the passphrase: a key the team
does not have is created, one holding the same value is unchanged, another is replaced
(or skipped with `skip_existing`). Without the passphrase the vault is skipped; with a
wrong one the file is refused before anything is applied.
"""

from __future__ import annotations

import json
import logging
import math
import re
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

from django.conf import settings
from django.db import DataError, IntegrityError, transaction
from django.db.models import F
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from core.errors import DomainError, InvalidInput
from memories import hooks
from memories.exporting import EXPORT_FORMAT, EXPORT_VERSION
from memories.extraction import with_extracted_metadata
from memories.feedback import annotate_memory
from memories.locks import lock_keys
from memories.models import MAX_NOTE_LENGTH, Annotation, Memory, MemoryState, SupersedeKind
from memories.services import archive_memory, delete_memory, save_memory, unsaved_version
from memories.skills import normalise_skill_trigger
from memories.types import ACCEPTED_TYPE_NAMES, DEFAULT_TYPE, resolve_type, suggest_type
from teams.models import AuditEvent, Team, VaultEntry
from teams.scrubber import scrub, scrub_json
from teams.selectors import reveal_vault_value, team_secret_values
from teams.services import check_quota, record_event, set_vault_entry
from teams.validators import check_key
from teams.vault_crypto import PassphraseSeal, WrongPassphrase, check_passphrase

logger = logging.getLogger(__name__)

IMPORTED_REASON = "imported"
# The metadata key holding where an imported version came from (docs/decisions.md,
# "Imports are written by the importer").
PROVENANCE_KEY = "imported_from"
# A version the key ended on without being active: deleted or archived (put aside).
PUT_ASIDE = frozenset({MemoryState.DELETED, MemoryState.ARCHIVED})
# As the API's JSON parser (core.api_errors): metadata needs a handful of levels at most.
MAX_JSON_DEPTH = 32
# The columns' own limits (project, updated_by, deleted_by, created_by): checked per line,
# since save_memory leaves them to the API's serializers.
MAX_NAME_CHARS = 200
Outcome = Literal["created", "superseded", "unchanged", "skipped"]
OUTCOMES: tuple[Outcome, ...] = ("created", "superseded", "unchanged", "skipped")
VAULT_OUTCOMES = ("created", "replaced", "unchanged", "skipped")
PASSPHRASE_FIELD = "X-MemoryHub-Vault-Passphrase"  # noqa: S105 (a header name)
# Django computes an enum's `values` on every access; checked once per line here.
_STATES = frozenset(MemoryState.values)
_SUPERSEDE_KINDS = frozenset(SupersedeKind.values)


class ImportRefused(DomainError):
    """A strict import with bad lines: nothing was applied."""

    code = "import_refused"
    status = 400


@dataclass
class LineError:
    line: int
    error: str
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return {"line": self.line, "error": self.error, "detail": self.detail}


@dataclass
class MemoryLine:
    line: int
    id: str
    key: str
    content: str
    type: str
    project: str
    metadata: dict[str, Any]
    skill_trigger: dict[str, Any] | None
    state: str
    deleted_by: str
    archived_by: str
    supersede_reason: str
    supersede_kind: str
    restored_from: str | None
    updated_by: str
    created_at: str
    upvotes: int
    downvotes: int
    notes: list[tuple[str, str]] = field(default_factory=list)  # (note, created_by)


@dataclass
class VaultLine:
    line: int
    key: str
    is_secret: bool
    sealed: str


@dataclass
class ParsedFile:
    header: dict[str, Any] = field(default_factory=dict)
    keys: dict[str, list[MemoryLine]] = field(default_factory=dict)
    vault: list[VaultLine] = field(default_factory=list)
    errors: list[LineError] = field(default_factory=list)


@dataclass
class ImportReport:
    dry_run: bool
    keys: Counter[str] = field(default_factory=Counter)
    versions_written: int = 0
    notes_written: int = 0
    errors: list[LineError] = field(default_factory=list)
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    vault: Counter[str] = field(default_factory=Counter)

    def as_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            **{outcome: self.keys[outcome] for outcome in OUTCOMES},
            "versions_written": self.versions_written,
            "notes_written": self.notes_written,
            "vault": {outcome: self.vault[outcome] for outcome in VAULT_OUTCOMES},
            "errors": [error.as_dict() for error in self.errors],
            "keys": dict(sorted(self.outcomes.items())),
        }


class _BadLine(Exception):
    def __init__(self, error: str, detail: str) -> None:
        super().__init__(detail)
        self.error, self.detail = error, detail


# ----- parsing: no database -----


def parse_export(raw: bytes) -> ParsedFile:
    """Every line of the file checked on its own; the header must be the first line.
    A missing or unknown header refuses the file (InvalidInput): it is not an export."""
    lines = raw.split(b"\n")
    parsed = ParsedFile(header=_check_header(lines[0] if lines else b""))
    by_id: dict[str, MemoryLine] = {}
    notes: list[tuple[int, dict[str, Any]]] = []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        try:
            record = _json_object(line)
            kind = record.get("record")
            if kind == "memory":
                memory = _memory_line(number, record)
                if memory.id in by_id:
                    raise _BadLine("invalid", f"memory id {memory.id} appears twice")
                by_id[memory.id] = memory
                parsed.keys.setdefault(memory.key, []).append(memory)
            elif kind == "annotation":
                notes.append((number, record))
            elif kind == "vault":
                parsed.vault.append(_vault_line(number, record))
            elif kind not in ("end", "header"):
                raise _BadLine("invalid", f"unknown record {str(kind)[:40]!r}")
        except _BadLine as bad:
            parsed.errors.append(LineError(number, bad.error, bad.detail))
    for number, record in notes:
        try:
            memory_id, note, created_by = _annotation_line(record)
            if memory_id not in by_id:
                raise _BadLine("invalid", f"the note's memory {memory_id[:40]} is not in the file")
            by_id[memory_id].notes.append((note, created_by))
        except _BadLine as bad:
            parsed.errors.append(LineError(number, bad.error, bad.detail))
    return parsed


def _check_header(line: bytes) -> dict[str, Any]:
    try:
        header = _json_object(line)
    except _BadLine as bad:
        raise InvalidInput(f"line 1 is not an export header: {bad.detail}", field="body") from None
    if header.get("record") != "header" or header.get("format") != EXPORT_FORMAT:
        raise InvalidInput(f"line 1 must be the header of a {EXPORT_FORMAT} file", field="body")
    if header.get("version") != EXPORT_VERSION:
        raise InvalidInput(
            f"export format version {str(header.get('version'))[:20]} is not supported; "
            f"this server reads version {EXPORT_VERSION}",
            field="body",
        )
    return header


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("number out of range")
    return value


def _json_object(line: bytes) -> dict[str, Any]:
    try:
        value = json.loads(line.decode("utf-8"), parse_constant=_reject_constant, parse_float=_finite)
    except UnicodeDecodeError:
        raise _BadLine("malformed_json", "the line is not valid UTF-8") from None
    except RecursionError:
        raise _BadLine("too_deeply_nested", f"JSON is limited to {MAX_JSON_DEPTH} levels") from None
    except ValueError as exc:
        raise _BadLine("malformed_json", f"malformed JSON: {str(exc)[:200]}") from None
    if not isinstance(value, dict):
        raise _BadLine("invalid", "each line is one JSON object")
    _check_strings(value, 0)
    return value


def _check_strings(node: Any, depth: int) -> None:
    """PostgreSQL holds neither NUL bytes nor lone surrogates (core.api_errors)."""
    if isinstance(node, str):
        if "\x00" in node:
            raise _BadLine("invalid_characters", "NUL bytes are not allowed")
        try:
            node.encode("utf-8")
        except UnicodeEncodeError:
            raise _BadLine("invalid_characters", "characters that are not valid UTF-8") from None
        return
    if depth >= MAX_JSON_DEPTH:
        raise _BadLine("too_deeply_nested", f"JSON is limited to {MAX_JSON_DEPTH} levels")
    if isinstance(node, dict):
        for name, value in node.items():
            _check_strings(name, depth)
            _check_strings(value, depth + 1)
    elif isinstance(node, list):
        for value in node:
            _check_strings(value, depth + 1)


def _memory_line(number: int, record: dict[str, Any]) -> MemoryLine:
    def text(name: str, *, required: bool = False, limit: int | None = None) -> str:
        value = record.get(name, "")
        if value is None and not required:
            value = ""
        if not isinstance(value, str):
            raise _BadLine("invalid", f"'{name}' must be a string")
        if limit is not None and len(value) > limit:
            raise _BadLine("invalid", f"'{name}' is limited to {limit} characters")
        if required and not value.strip():
            raise _BadLine("invalid", f"'{name}' must not be empty")
        return value

    def count(name: str) -> int:
        value = record.get(name, 0)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0 or value >= 2**31:
            raise _BadLine("invalid", f"'{name}' must be a count (a whole number, 0 or more)")
        return value

    def optional_id(name: str) -> str | None:
        value = record.get(name)
        if value is not None and not isinstance(value, str):
            raise _BadLine("invalid", f"'{name}' must be a string or null")
        return value

    key = text("key", required=True)
    try:
        check_key(key)
    except InvalidInput as exc:
        raise _BadLine("invalid", f"key: {exc.detail}") from None
    content = text("content", required=True)
    # A hand-written record (memoryhub import-markdown) may leave the type to us.
    type_name = text("type") if "type" in record else inferred_type(text("heading"), content)
    if resolve_type(type_name) is None:
        raise _BadLine(
            "unknown_type", f"unknown type {type_name[:40]!r}; use one of: {', '.join(ACCEPTED_TYPE_NAMES)}"
        )
    metadata = record.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise _BadLine("invalid", "'metadata' must be an object")
    trigger = record.get("skill_trigger")
    if trigger is not None and not isinstance(trigger, dict):
        raise _BadLine("invalid", "'skill_trigger' must be an object or null")
    state = text("state") or MemoryState.ACTIVE
    if state not in _STATES:
        raise _BadLine("invalid", f"'state' is one of: {', '.join(MemoryState.values)}")
    kind = text("supersede_kind")
    if kind and kind not in _SUPERSEDE_KINDS:
        raise _BadLine("invalid", f"'supersede_kind' is one of: {', '.join(SupersedeKind.values)}")
    created_at = text("created_at", limit=MAX_NAME_CHARS)
    try:
        if created_at and parse_datetime(created_at) is None:
            raise ValueError
    except ValueError:
        raise _BadLine("invalid", "'created_at' must be an ISO 8601 date and time") from None
    memory_id = record.get("id")
    if not isinstance(memory_id, str) or not memory_id:
        # A hand-written file may leave ids out; notes then cannot point at the entry.
        memory_id = f"line-{number}"
    return MemoryLine(
        line=number,
        id=memory_id,
        key=key,
        content=content,
        type=type_name,
        project=text("project", limit=MAX_NAME_CHARS),
        metadata=metadata,
        skill_trigger=trigger,
        state=state,
        deleted_by=text("deleted_by", limit=MAX_NAME_CHARS),
        archived_by=text("archived_by", limit=MAX_NAME_CHARS),
        supersede_reason=text("supersede_reason"),
        supersede_kind=kind,
        restored_from=optional_id("restored_from"),
        updated_by=text("updated_by", limit=MAX_NAME_CHARS),
        created_at=created_at,
        upvotes=count("upvotes"),
        downvotes=count("downvotes"),
    )


def inferred_type(heading: str, content: str) -> str:
    """The type of a section without one: a word of its heading that names a type or an
    alias ("## Decisions", "## Lessons learned"), else the save's own type hint on its
    text (memories.types.suggest_type), else the default."""
    for word in re.findall(r"[a-z]+", heading.lower()):
        for name in (word, word.removesuffix("s")):
            if name in ACCEPTED_TYPE_NAMES:
                return str(resolve_type(name))
    hint = suggest_type(content, DEFAULT_TYPE)
    return (hint.suggested_type if hint is not None else DEFAULT_TYPE).value


def _vault_line(number: int, record: dict[str, Any]) -> VaultLine:
    key, is_secret, sealed = record.get("key"), record.get("is_secret"), record.get("sealed")
    if not isinstance(key, str) or not isinstance(is_secret, bool) or not isinstance(sealed, str):
        raise _BadLine("invalid", "a vault entry has a 'key', an 'is_secret' flag and a 'sealed' value")
    try:
        check_key(key)
    except InvalidInput as exc:
        raise _BadLine("invalid", f"key: {exc.detail}") from None
    return VaultLine(line=number, key=key, is_secret=is_secret, sealed=sealed)


def _annotation_line(record: dict[str, Any]) -> tuple[str, str, str]:
    memory_id, note, created_by = record.get("memory"), record.get("note"), record.get("created_by", "")
    if not isinstance(memory_id, str) or not isinstance(note, str) or not isinstance(created_by, str):
        raise _BadLine("invalid", "a note has 'memory', 'note' and 'created_by' strings")
    if len(created_by) > MAX_NAME_CHARS:
        raise _BadLine("invalid", f"'created_by' is limited to {MAX_NAME_CHARS} characters")
    return memory_id, note, created_by


# ----- applying: through the services -----


def import_export(
    *,
    team: Team,
    raw: bytes,
    actor: str,
    skip_existing: bool = False,
    dry_run: bool = False,
    strict: bool = False,
    vault_passphrase: str | None = None,
) -> ImportReport:
    """Apply an export file to the team (see the module docstring). Raises InvalidInput
    for a file that is not an export or a passphrase that does not open its vault,
    ImportRefused for a strict import with bad lines."""
    parsed = parse_export(raw)
    _attribute_to_importer(parsed, actor)
    seal = _vault_seal(parsed, vault_passphrase)
    report = ImportReport(dry_run=dry_run, errors=list(parsed.errors))
    # Even when strict and already refused: the good lines are tried (and rolled back)
    # so that the refusal lists every bad line, not just those that failed to parse.
    with transaction.atomic():
        for vault_line in parsed.vault:
            if seal is None:
                report.vault["skipped"] += 1
            else:
                _apply_vault_line(team, vault_line, seal, actor, skip_existing, report)
        ids: dict[str, uuid.UUID] = {}
        # Read once, after the vault lines: they are the only writes of an import that
        # change the team's secrets.
        secrets = team_secret_values(team_id=team.id)
        latest = _latest_versions(team, list(parsed.keys))
        bulk = _BulkWriter(
            team=team, secrets=secrets, ids=ids, report=report, actor=actor, skip_existing=skip_existing
        )
        # Keys in the order their history starts, so a replay meets skill names and
        # duplicates in the order the team first did.
        for key, versions in sorted(parsed.keys.items(), key=lambda item: item[1][0].line):
            if key not in latest and _bulk_eligible(versions):
                bulk.add(key, versions)
            else:
                bulk.flush()  # keys are applied in order: the service path sees the earlier ones
                _apply_key(team, key, versions, actor, skip_existing, report, ids, latest.get(key), secrets)
        bulk.flush()
        if strict and report.errors:
            raise _refused(report)
        if dry_run:
            transaction.set_rollback(True)
        else:
            record_event(
                team=team, actor=actor, action=AuditEvent.Action.TEAM_IMPORT, target=_summary(report)
            )
    report.errors.sort(key=lambda error: error.line)
    return report


def _attribute_to_importer(parsed: ParsedFile, actor: str) -> None:
    """Make every version the importer's, keeping what the file said in its metadata."""
    source_team = parsed.header.get("team")
    for versions in parsed.keys.values():
        for version in versions:
            said = {
                "team": source_team if isinstance(source_team, str) else "",
                "updated_by": version.updated_by,
                "created_at": version.created_at,
                "deleted_by": version.deleted_by,
                "archived_by": version.archived_by,
            }
            provenance = {name: value for name, value in said.items() if value}
            if provenance and PROVENANCE_KEY not in version.metadata:
                version.metadata = {**version.metadata, PROVENANCE_KEY: provenance}
            version.updated_by = version.deleted_by = version.archived_by = actor


def _summary(report: ImportReport) -> str:
    keys = ", ".join(f"{report.keys[outcome]} {outcome}" for outcome in OUTCOMES)
    vault = sum(report.vault[outcome] for outcome in ("created", "replaced"))
    return f"keys: {keys}; vault entries written: {vault}; bad lines: {len(report.errors)}"


def _vault_seal(parsed: ParsedFile, passphrase: str | None) -> PassphraseSeal | None:
    """The seal that opens the file's vault, checked before anything is applied; None
    when there is nothing to open or no passphrase to open it with."""
    if passphrase is None:
        return None
    try:
        check_passphrase(passphrase)
        if not parsed.vault:
            return None
        return PassphraseSeal.from_header(passphrase, parsed.header.get("vault"))
    except WrongPassphrase:
        raise InvalidInput("the passphrase does not open this file's vault", field=PASSPHRASE_FIELD) from None
    except ValueError as exc:
        raise InvalidInput(str(exc), field=PASSPHRASE_FIELD) from None


def _apply_vault_line(
    team: Team, line: VaultLine, seal: PassphraseSeal, actor: str, skip_existing: bool, report: ImportReport
) -> None:
    try:
        value = seal.open(line.sealed)
        _check_strings(value, 0)
    except ValueError as exc:
        report.errors.append(LineError(line.line, "invalid", str(exc)))
        return
    except _BadLine as bad:
        report.errors.append(LineError(line.line, bad.error, bad.detail))
        return
    existing = VaultEntry.objects.filter(team=team, key=line.key).first()
    if (
        existing is not None
        and existing.is_secret == line.is_secret
        and reveal_vault_value(existing) == value
    ):
        report.vault["unchanged"] += 1
        return
    if existing is not None and skip_existing:
        report.vault["skipped"] += 1
        return
    try:
        with transaction.atomic():
            set_vault_entry(
                team=team,
                key=line.key,
                value=value,
                is_secret=line.is_secret,
                actor=actor,
                may_change_secrets=True,
            )
    except DomainError as exc:
        report.errors.append(LineError(line.line, exc.code, exc.detail))
        return
    report.vault["created" if existing is None else "replaced"] += 1


def _refused(report: ImportReport) -> ImportRefused:
    report.errors.sort(key=lambda error: error.line)
    return ImportRefused(
        f"{len(report.errors)} bad line(s); nothing was imported",
        lines=[error.as_dict() for error in report.errors],
    )


def _apply_key(
    team: Team,
    key: str,
    versions: list[MemoryLine],
    actor: str,
    skip_existing: bool,
    report: ImportReport,
    ids: dict[str, uuid.UUID],
    latest: Memory | None,
    secrets: list[str],
) -> None:
    """One key through the write services, in a savepoint of its own. `latest` is the
    team's latest version of the key (read for the whole file at once)."""
    before = (report.versions_written, report.notes_written)
    current_line = versions[0].line
    try:
        with transaction.atomic():
            if latest is None:
                active = False  # the key has no rows: only the replay makes it active
                for version in versions:
                    current_line = version.line
                    _write_version(team, version, replacing=active, ids=ids, report=report)
                    active = version.state not in PUT_ASIDE
                outcome: Outcome = "created"
            else:
                last = versions[-1]
                current_line = last.line
                outcome = _apply_to_existing(team, latest, last, actor, skip_existing, report, ids, secrets)
    except DomainError as exc:
        report.versions_written, report.notes_written = before
        report.errors.append(LineError(current_line, exc.code, exc.detail))
        return
    except (DataError, IntegrityError):
        # A value the checks above let through and the database refused: the savepoint
        # is rolled back, the line reported; never a 500 for a bad file.
        report.versions_written, report.notes_written = before
        report.errors.append(LineError(current_line, "invalid", "the database refused this line's values"))
        return
    report.keys[outcome] += 1
    report.outcomes[key] = outcome


def _apply_to_existing(
    team: Team,
    latest: Memory,
    last: MemoryLine,
    actor: str,
    skip_existing: bool,
    report: ImportReport,
    ids: dict[str, uuid.UUID],
    secrets: list[str],
) -> Outcome:
    if _holds(latest, last, secrets):
        return "unchanged"
    if skip_existing or last.state in PUT_ASIDE:
        return "skipped"
    version = MemoryLine(**{**last.__dict__, "supersede_reason": IMPORTED_REASON, "supersede_kind": ""})
    version.updated_by, version.state = actor, MemoryState.ACTIVE
    _write_version(team, version, replacing=latest.is_active, ids=ids, report=report)
    return "superseded"


def _write_version(
    team: Team, version: MemoryLine, *, replacing: bool, ids: dict[str, uuid.UUID], report: ImportReport
) -> None:
    """One version through save_memory, then its votes, notes and deletion, while it
    is the active entry (notes attach to the active entry, as the API's do)."""
    result = save_memory(
        team=team,
        key=version.key,
        content=version.content,
        updated_by=version.updated_by,
        type_name=version.type,
        supersede_reason=(version.supersede_reason or IMPORTED_REASON) if replacing else None,
        project=version.project,
        metadata=version.metadata,
        skill_trigger=version.skill_trigger,
        # The file says which entries the team had; merging them is not the import's call.
        allow_duplicate=True,
    )
    memory = result.memory
    ids[version.id] = memory.id
    report.versions_written += 1
    # What save_memory cannot be told: votes, and the kind of a replay's supersede
    # (an unsupersede, or a soft one whose reason is not "minor correction").
    bookkeeping: dict[str, Any] = {}
    if version.upvotes or version.downvotes:
        bookkeeping.update(upvotes=version.upvotes, downvotes=version.downvotes)
    if replacing and version.supersede_kind and version.supersede_kind != memory.supersede_kind:
        bookkeeping["supersede_kind"] = version.supersede_kind
    if version.restored_from is not None and version.restored_from in ids:
        bookkeeping["restored_from_id"] = ids[version.restored_from]
    if bookkeeping:
        Memory.objects.filter(team=team, id=memory.id).update(**bookkeeping)
    for note, created_by in version.notes:
        annotate_memory(team=team, key=version.key, note=note, created_by=created_by or "import")
        report.notes_written += 1
    if version.state == MemoryState.DELETED:
        delete_memory(team=team, key=version.key, deleted_by=version.deleted_by)
    elif version.state == MemoryState.ARCHIVED:
        archive_memory(team=team, key=version.key, archived_by=version.archived_by)


def _holds(latest: Memory, version: MemoryLine, secrets: list[str]) -> bool:
    """Whether the team's latest version already is what saving `version` would store."""
    if (latest.deleted_at is not None) != (version.state == MemoryState.DELETED):
        return False
    if (latest.archived_at is not None) != (version.state == MemoryState.ARCHIVED):
        return False
    if latest.deleted_at is not None:
        return True
    content = scrub(version.content, secrets).text
    metadata, _ = scrub_json(with_extracted_metadata(content, version.metadata), secrets)
    trigger = None
    if version.skill_trigger is not None:
        try:
            trigger = normalise_skill_trigger(scrub_json(version.skill_trigger, secrets)[0])
        except InvalidInput:
            return False
    return (
        latest.content == content
        and latest.type == resolve_type(version.type)
        and latest.project == version.project
        and _without_provenance(latest.metadata) == _without_provenance(metadata)
        and latest.skill_trigger == trigger
    )


def _without_provenance(metadata: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in metadata.items() if name != PROVENANCE_KEY}


# ----- the bulk path: keys new to the team -----

# Keys applied by one bulk insert (with one quota count, one lock statement, one
# indexing hook): big enough that per-statement costs vanish, small enough that the
# rows and their IN lists stay modest.
BULK_KEYS = 1000
BULK_INSERT_ROWS = 1000


def _latest_versions(team: Team, keys: list[str]) -> dict[str, Memory]:
    """The team's latest version of each of `keys` it has, in one query."""
    if not keys:
        return {}
    rows = (
        Memory.objects.filter(team=team, key__in=keys).order_by("key", "-created_at", "-id").distinct("key")
    )
    return {memory.key: memory for memory in rows}


def _bulk_eligible(versions: list[MemoryLine]) -> bool:
    """A key new to the team may be inserted in bulk unless it carries a skill: a skill's
    name must stay unique among active entries, which save_memory checks under the
    name's lock (memories.skills), so skills keep the service path."""
    return all(version.skill_trigger is None for version in versions)


class _KeyRefused(Exception):
    def __init__(self, line: int, error: str, detail: str) -> None:
        super().__init__(detail)
        self.line, self.error, self.detail = line, error, detail


@dataclass
class _PlannedKey:
    key: str
    rows: list[Memory]
    notes: list[Annotation]
    deleted: list[Memory]
    archived: list[Memory]
    ids: dict[str, uuid.UUID]
    redactions: Counter[str]


@dataclass
class _BulkWriter:
    """Keys new to the team, replayed in Python with what save_memory would store
    (services.unsaved_version) and inserted with bulk_create: no per-version queries.
    The rest of save_memory's work is done here once per batch: the keys' locks, the
    quota of active entries, and the indexing (hooks.memories_written, one call)."""

    team: Team
    secrets: list[str]
    ids: dict[str, uuid.UUID]
    report: ImportReport
    actor: str
    skip_existing: bool
    pending: list[tuple[str, list[MemoryLine]]] = field(default_factory=list)

    def add(self, key: str, versions: list[MemoryLine]) -> None:
        self.pending.append((key, versions))
        if len(self.pending) >= BULK_KEYS:
            self.flush()

    def flush(self) -> None:
        pending, self.pending = self.pending, []
        if not pending:
            return
        lock_keys(self.team.id, [key for key, _ in pending])
        # Under the locks: a key another writer created since the file's keys were read
        # goes through the service path like any key the team has.
        taken = _latest_versions(self.team, [key for key, _ in pending])
        used = Memory.objects.filter(team=self.team, is_active=True).count()
        planned: list[_PlannedKey] = []
        for key, versions in pending:
            if key in taken:
                continue
            try:
                plan, used = self._plan(key, versions, used)
            except _KeyRefused as refused:
                self.report.errors.append(LineError(refused.line, refused.error, refused.detail))
                continue
            planned.append(plan)
        try:
            with transaction.atomic():
                self._insert(planned)
        except (DataError, IntegrityError):
            # A value the checks let through and the database refused: each key again
            # through the service path, which reports the line it fails at.
            for plan in planned:
                versions = next(lines for key, lines in pending if key == plan.key)
                self._through_services(plan.key, versions, None)
        else:
            for plan in planned:
                self.ids.update(plan.ids)
                self.report.versions_written += len(plan.rows)
                self.report.notes_written += len(plan.notes)
                self.report.keys["created"] += 1
                self.report.outcomes[plan.key] = "created"
        for key, versions in pending:
            if key in taken:
                self._through_services(key, versions, taken[key])

    def _through_services(self, key: str, versions: list[MemoryLine], latest: Memory | None) -> None:
        _apply_key(
            self.team,
            key,
            versions,
            self.actor,
            self.skip_existing,
            self.report,
            self.ids,
            latest,
            self.secrets,
        )

    def _plan(self, key: str, versions: list[MemoryLine], used: int) -> tuple[_PlannedKey, int]:
        """The key's rows as _write_version's replay would store them; raises _KeyRefused
        with the line a service would have refused. Returns the count of active entries
        after the key."""
        plan = _PlannedKey(key=key, rows=[], notes=[], deleted=[], archived=[], ids={}, redactions=Counter())
        active: Memory | None = None
        for version in versions:
            try:
                if active is None:  # one more active entry, as save_memory checks it
                    check_quota(
                        team=self.team,
                        quota="memories",
                        used=used,
                        limit=settings.MEMORYHUB_QUOTA_MEMORIES,
                        what="active memories",
                    )
                memory = self._row(version, active, plan)
                plan.notes.extend(self._notes(version, memory))
            except DomainError as exc:
                raise _KeyRefused(version.line, exc.code, exc.detail) from None
            if active is not None:
                active.is_active = False
            else:
                used += 1
            plan.rows.append(memory)
            plan.ids[version.id] = memory.id
            active = memory
            if version.state == MemoryState.DELETED:
                memory.is_active = False
                memory.deleted_by = version.deleted_by
                memory.deleted_at = timezone.now()  # set to the row's created_at once inserted
                plan.deleted.append(memory)
                active = None
                used -= 1
            elif version.state == MemoryState.ARCHIVED:
                memory.is_active = False
                memory.archived_by = version.archived_by
                memory.archived_at = timezone.now()  # set to the row's created_at once inserted
                plan.archived.append(memory)
                active = None
                used -= 1
        return plan, used

    def _row(self, version: MemoryLine, active: Memory | None, plan: _PlannedKey) -> Memory:
        memory, redactions = unsaved_version(
            team=self.team,
            key=version.key,
            content=version.content,
            updated_by=version.updated_by,
            type_name=version.type,
            supersede_reason=(version.supersede_reason or IMPORTED_REASON) if active is not None else None,
            project=version.project,
            metadata=version.metadata,
            replaced=active,
            secrets=self.secrets,
        )
        plan.redactions.update(redactions.redactions)
        # What _write_version sets after save_memory: votes, a replay's supersede kind,
        # the version an unsupersede restored.
        memory.upvotes, memory.downvotes = version.upvotes, version.downvotes
        if active is not None and version.supersede_kind:
            memory.supersede_kind = version.supersede_kind
        if version.restored_from is not None:
            restored = plan.ids.get(version.restored_from) or self.ids.get(version.restored_from)
            if restored is not None:
                memory.restored_from_id = restored
        return memory

    def _notes(self, version: MemoryLine, memory: Memory) -> list[Annotation]:
        """As annotate_memory writes them on the version while it is the active one."""
        notes = []
        for text, created_by in version.notes:
            note = (text or "").strip()
            if not note:
                raise InvalidInput("note must not be empty", field="note")
            if len(note) > MAX_NOTE_LENGTH:
                raise InvalidInput(f"note is limited to {MAX_NOTE_LENGTH} characters", field="note")
            notes.append(
                Annotation(
                    team=self.team,
                    memory=memory,
                    note=scrub(note, self.secrets).text,
                    created_by=created_by or "import",
                )
            )
        return notes

    def _insert(self, planned: list[_PlannedKey]) -> None:
        rows = [row for plan in planned for row in plan.rows]
        if not rows:
            return
        Memory.objects.bulk_create(rows, batch_size=BULK_INSERT_ROWS)
        _strictly_increasing(Memory, rows, "created_at", also=("last_confirmed_at",))
        deleted = [row.id for plan in planned for row in plan.deleted]
        if deleted:
            # Deleted when inserted: as a replay deletes it right after saving it.
            Memory.objects.filter(team=self.team, id__in=deleted).update(deleted_at=F("created_at"))
        archived = [row.id for plan in planned for row in plan.archived]
        if archived:
            # Archived when inserted, as a replay archives it right after saving it.
            Memory.objects.filter(team=self.team, id__in=archived).update(archived_at=F("created_at"))
        notes = [note for plan in planned for note in plan.notes]
        if notes:
            Annotation.objects.bulk_create(notes, batch_size=BULK_INSERT_ROWS)
            _strictly_increasing(Annotation, notes, "created_at")
        # save_memory calls memory_written per version (search enqueues its indexing);
        # the bulk counterpart, once: one UPDATE and a message per batch of entries.
        hooks.memories_written.call(team_id=self.team.id, memory_ids=[row.id for row in rows])
        redactions = Counter[str]()
        for plan in planned:
            redactions.update(plan.redactions)
        if redactions:
            logger.warning("redacted %s from imported memories of team %s", dict(redactions), self.team.slug)


def _strictly_increasing(
    model: type[Memory] | type[Annotation], rows: list[Any], name: str, also: tuple[str, ...] = ()
) -> None:
    """Rows inserted in one statement get their timestamps a few microseconds apart, or
    none: histories and exports order by created_at, so rows with equal stamps are moved
    one microsecond past the previous row, in insertion order."""
    moved = []
    previous = None
    for row in rows:
        stamp = getattr(row, name)
        if previous is not None and stamp <= previous:
            stamp = previous + timedelta(microseconds=1)
            for field_name in (name, *also):
                setattr(row, field_name, stamp)
            moved.append(row)
        previous = stamp
    if moved:
        model.objects.bulk_update(moved, [name, *also], batch_size=BULK_INSERT_ROWS)  # type: ignore[attr-defined]
