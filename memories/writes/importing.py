"""Import an export file (memories.exporting) into a team (POST import/, `memoryhub
import`, `memoryhub import-markdown`): read it (memories.writes._export_file), then apply
it through the write pipeline's stages.

Conflict rules (docs/write-path.md, "Export and import"), per key of the file:
- the team has never had the key: its whole history is written (memories.writes._new_keys:
  every version built by the pipeline's own stages, as a save stores it, with its
  time, state, links, votes, reads, notes and confirmations) → "created";
- the team's latest version of the key already holds what the file's last version
  would store (the same state, and, unless both are deleted, already_holds: the rule
  of the batch save) → "unchanged": importing the same file twice changes nothing;
- otherwise, with `skip_existing` → "skipped"; without it, the file's last version
  supersedes the team's entry with the reason "imported" (or is saved again under a
  key with no active entry) → "superseded". A key the file ends without an active entry
  (deleted, archived, superseded by another key) never puts the team's entry aside:
  "skipped".

Each key is applied in a savepoint of its own: a line the pipeline refuses is reported
with its line number and its key is left as it was. `strict` refuses the whole file,
with nothing applied, when any line is bad. `dry_run` applies everything and rolls it
back, so it reports exactly what an import would do. Indexing is left to the workers:
enqueued after commit (never, for a dry run). The file's latest versions, the
team's secrets and who imports (for personal names) are read once per import.

Every version an import writes is the importer's (`actor`: the token, or `name/session`):
its updated_by, deleted_by and archived_by. What the file said (its team, who wrote each
version and when) is kept in the version's metadata under PROVENANCE_KEY; a version that
carries one already (imported before) keeps it, so it names the first origin. Provenance
is not content: "unchanged" ignores it. The times are the file's (created, deleted,
archived, confirmed, read) for keys new to the team; a version that supersedes an entry
the team has is written now, after it.

A file exported with its vault restores it, first (so that memories are scrubbed of its
secrets as they are written), when the import is given the passphrase: a key the team
does not have is created, one holding the same value is unchanged, another is replaced
(or skipped with `skip_existing`). Without the passphrase the vault is skipped; with a
wrong one the file is refused before anything is applied.
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

from django.db import DataError, IntegrityError, transaction

from core.errors import DomainError, InvalidInput
from memories import hooks
from memories.conversations.transfer import ConversationImport, import_conversations
from memories.facts.transfer import FactImport, import_facts
from memories.feedback import checked_note
from memories.models import Annotation, Confirmation, Memory, MemoryState
from memories.personal import PersonalNames
from memories.writes._export_file import (
    BadLine,
    LineError,
    MemoryLine,
    ParsedFile,
    VaultLine,
    check_strings,
    parse_export,
)
from memories.writes._new_keys import IMPORTED_REASON, NewKeyWriter, latest_versions, state_of
from memories.writes._pipeline import PROVENANCE_KEY, PreparedSave, already_holds, prepare, store
from teams.models import AuditEvent, Team, VaultEntry
from teams.scrubber import scrub
from teams.selectors import reveal_vault_value, team_secret_values
from teams.services import record_event, set_vault_entry
from teams.vault_crypto import PassphraseSeal, WrongPassphrase, check_passphrase

Outcome = Literal["created", "superseded", "unchanged", "skipped"]
OUTCOMES: tuple[Outcome, ...] = ("created", "superseded", "unchanged", "skipped")
VAULT_OUTCOMES = ("created", "replaced", "unchanged", "skipped")
PASSPHRASE_FIELD = "X-MemoryHub-Vault-Passphrase"  # noqa: S105 (a header name)

__all__ = ["IMPORTED_REASON", "PROVENANCE_KEY", "ImportRefused", "ImportReport", "import_export"]


class ImportRefused(DomainError):
    """A strict import with bad lines: nothing was applied."""

    code = "import_refused"
    status = 400


@dataclass
class ImportReport:
    dry_run: bool
    keys: Counter[str] = field(default_factory=Counter)
    versions_written: int = 0
    notes_written: int = 0
    errors: list[LineError] = field(default_factory=list)
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    vault: Counter[str] = field(default_factory=Counter)
    facts: FactImport = field(default_factory=FactImport)
    conversations: ConversationImport = field(default_factory=ConversationImport)

    def as_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            **{outcome: self.keys[outcome] for outcome in OUTCOMES},
            "versions_written": self.versions_written,
            "notes_written": self.notes_written,
            "vault": {outcome: self.vault[outcome] for outcome in VAULT_OUTCOMES},
            "facts": self.facts.as_dict(),
            "conversations": self.conversations.as_dict(),
            "errors": [error.as_dict() for error in self.errors],
            "keys": dict(sorted(self.outcomes.items())),
        }

    def count(self, key: str, outcome: Outcome) -> None:
        self.keys[outcome] += 1
        self.outcomes[key] = outcome


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
        # Read once, after the vault lines: they are the only writes of an import that
        # change the team's secrets.
        secrets = team_secret_values(team_id=team.id)
        # Who imports, and which of the file's personal names are members: read once.
        personal = PersonalNames(team.id)
        personal.expect([*parsed.keys, *_fact_entities(parsed)])
        existing = _ExistingKeys(
            team=team,
            secrets=secrets,
            personal=personal,
            actor=actor,
            skip_existing=skip_existing,
            report=report,
        )

        def created(key: str, plan: Any) -> None:
            report.versions_written += len(plan.rows)
            report.notes_written += len(plan.notes)
            report.count(key, "created")

        new_keys = NewKeyWriter(
            team=team,
            secrets=secrets,
            personal=personal,
            actor=actor,
            ids={},
            errors=report.errors,
            written=created,
            existing=existing.apply,
        )
        latest = latest_versions(team, list(parsed.keys))
        # Keys in the order their history starts (a skill name is met in the order the
        # team first did); keys whose versions name each other's, together.
        for group in parsed.key_groups():
            new = [(key, parsed.keys[key]) for key in group if key not in latest]
            if new:
                new_keys.add(new)
            for key in group:
                if key in latest:
                    new_keys.flush()  # applied in order: the earlier keys are written
                    existing.apply(key, parsed.keys[key], latest[key])
        new_keys.flush()
        if existing.written:
            hooks.memories_written.call(team_id=team.id, memory_ids=existing.written)
        source_team = parsed.header.get("team")
        report.facts = import_facts(
            team=team,
            records=parsed.facts,
            source_team=source_team if isinstance(source_team, str) else "",
            actor=actor,
            skip_existing=skip_existing,
            personal=personal,
        )
        report.errors += [LineError(line, error, detail) for line, error, detail in report.facts.errors]
        report.conversations = import_conversations(
            team=team,
            records=parsed.conversations,
            source_team=source_team if isinstance(source_team, str) else "",
            actor=actor,
        )
        report.errors += [
            LineError(line, error, detail) for line, error, detail in report.conversations.errors
        ]
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


@dataclass
class _ExistingKeys:
    """Keys the team has: the file's last version is compared with the team's latest and,
    unless it already holds it, written as one new version through the pipeline's
    locked stage (store), each key in a savepoint of its own."""

    team: Team
    secrets: list[str]
    personal: PersonalNames
    actor: str
    skip_existing: bool
    report: ImportReport
    written: list[uuid.UUID] = field(default_factory=list)

    def apply(self, key: str, versions: list[MemoryLine], latest: Memory) -> None:
        last = versions[-1]
        before = (self.report.versions_written, self.report.notes_written)
        try:
            with transaction.atomic():
                outcome, memory = self._apply(last, state_of(versions, len(versions) - 1), latest)
        except DomainError as exc:
            self.report.versions_written, self.report.notes_written = before
            self.report.errors.append(LineError(last.line, exc.code, exc.detail))
            return
        except (DataError, IntegrityError):
            # A value the checks let through and the database refused: the savepoint is
            # rolled back, the line reported; never a 500 for a bad file.
            self.report.versions_written, self.report.notes_written = before
            self.report.errors.append(
                LineError(last.line, "invalid", "the database refused this line's values")
            )
            return
        if memory is not None:
            self.written.append(memory.id)
        self.report.count(key, outcome)

    def _apply(self, last: MemoryLine, state: str, latest: Memory) -> tuple[Outcome, Memory | None]:
        if latest.state == state == MemoryState.DELETED:
            return "unchanged", None
        prepared = self._prepared(last, replacing=latest.is_active)
        if latest.state == state and already_holds(self.team, latest, prepared, self.secrets):
            return "unchanged", None
        if self.skip_existing or state != MemoryState.ACTIVE:
            return "skipped", None

        def counts(row: Memory) -> None:
            row.upvotes, row.downvotes = last.upvotes, last.downvotes
            row.access_count, row.last_accessed_at = last.access_count, last.last_accessed_at
            row.confirmed_by_count = len({c.confirmed_by for c in last.confirmations})

        result = store(
            team=self.team,
            prepared=prepared,
            duplicate=None,
            expected_version=None,
            updated_by=self.actor,
            secrets=self.secrets,
            active_count=lambda: Memory.objects.filter(team=self.team, is_active=True).count(),
            finish=counts,
        )
        memory = result.memory
        # Notes and confirmations keep their authors and times (they say who wrote or
        # confirmed this text, and when).
        Annotation.objects.bulk_create(
            Annotation(
                team=self.team,
                memory=memory,
                note=scrub(checked_note(note.note), self.secrets).text,
                created_by=note.created_by or "import",
                created_at=note.created_at,  # type: ignore[misc]  # None: now (CreatedAtField)
            )
            for note in last.notes
        )
        Confirmation.objects.bulk_create(
            Confirmation(
                team=self.team,
                memory=memory,
                confirmed_by=confirmation.confirmed_by,
                note=scrub(checked_note(confirmation.note, required=False), self.secrets).text,
                confirmed_at=confirmation.confirmed_at,  # type: ignore[misc]  # None: now
            )
            for confirmation in last.confirmations
        )
        self.report.versions_written += 1
        self.report.notes_written += len(last.notes)
        return "superseded", memory

    def _prepared(self, last: MemoryLine, *, replacing: bool) -> PreparedSave:
        return prepare(
            key=last.key,
            content=last.content,
            type_name=last.original_type or last.type,
            supersede_reason=IMPORTED_REASON if replacing else None,
            project=last.project,
            metadata=last.metadata,
            skill_trigger=last.skill_trigger,
            anchor=last.anchor,
            secrets=self.secrets,
            personal=self.personal,
            pinned=last.pinned,
            auto_captured=last.auto_captured,
        )


def _fact_entities(parsed: ParsedFile) -> list[str]:
    return [entity for _, record in parsed.facts if isinstance(entity := record.get("entity"), str)]


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
        check_strings(value, 0)
    except ValueError as exc:
        report.errors.append(LineError(line.line, "invalid", str(exc)))
        return
    except BadLine as bad:
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
