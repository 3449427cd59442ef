"""The import's keys that are new to the team, written in bulk: each version's row built
by the pipeline's own stages (prepare, new_row: what a save stores), plus what only a
history brings (its time, state, links, votes, reads, notes, confirmations), inserted
with bulk_create a thousand keys at a time.

The rest of a save's work is done once per batch of keys: the keys' locks (one
statement), the memory quota (one count; a key adds an active entry when its last
version is active), the skill names (their locks, one query for the active entries
already carrying them) and the indexing (memories.hooks.memories_written, one call).
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from django.db import DataError, IntegrityError, transaction
from django.utils import timezone

from core.errors import DomainError, InvalidInput
from memories import hooks
from memories.feedback import checked_note
from memories.locks import lock_keys, lock_skill_name
from memories.models import Annotation, Confirmation, Memory, MemoryState
from memories.personal import PersonalNames
from memories.writes._export_file import LineError, MemoryLine
from memories.writes._pipeline import (
    SOFT_SUPERSEDE_REASON,
    check_memory_quota,
    new_row,
    prepare,
    skill_name_taken,
    supersede_kind,
)
from teams.models import Team
from teams.scrubber import ScrubResult, scrub

logger = logging.getLogger(__name__)

IMPORTED_REASON = "imported"
# Keys applied by one bulk insert (with one quota count, one lock statement, one
# indexing hook): big enough that per-statement costs vanish, small enough that the
# rows and their IN lists stay modest.
BULK_KEYS = 1000
BULK_INSERT_ROWS = 1000


def latest_versions(team: Team, keys: list[str]) -> dict[str, Memory]:
    """The team's latest version of each of `keys` it has, in one query."""
    if not keys:
        return {}
    rows = (
        Memory.objects.filter(team=team, key__in=keys).order_by("key", "-created_at", "-id").distinct("key")
    )
    return {memory.key: memory for memory in rows}


def state_of(versions: list[MemoryLine], index: int) -> str:
    """A version's state: the file's, or for a record without one (hand-written), active
    for the key's last version and superseded for the others."""
    given = versions[index].state
    if given is not None:
        return given
    return MemoryState.ACTIVE if index == len(versions) - 1 else MemoryState.SUPERSEDED


class KeyRefused(Exception):
    def __init__(self, line: int, error: str, detail: str) -> None:
        super().__init__(detail)
        self.line, self.error, self.detail = line, error, detail


@dataclass
class _Link:
    """A link to a version of another key, set once that version is inserted too."""

    row: Memory
    name: str  # "supersedes" or "restored_from"
    target: str  # the file's id


@dataclass
class _PlannedKey:
    key: str
    rows: list[Memory] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    ids: dict[str, uuid.UUID] = field(default_factory=dict)
    notes: list[Annotation] = field(default_factory=list)
    confirmations: list[Confirmation] = field(default_factory=list)
    links: list[_Link] = field(default_factory=list)
    redactions: Counter[str] = field(default_factory=Counter)

    @property
    def active(self) -> Memory | None:
        return next((row for row in self.rows if row.is_active), None)


class _Clock:
    """Times for rows the file gives none: strictly increasing, so history keeps its order
    even for rows inserted in one statement."""

    def __init__(self) -> None:
        self.last = timezone.now()

    def __call__(self) -> dt.datetime:
        self.last += dt.timedelta(microseconds=1)
        return self.last


@dataclass
class NewKeyWriter:
    """Keys new to the team, added a group at a time (keys whose versions name each
    other travel together) and written a batch at a time. A key another writer created
    since the file's keys were read is handed to `existing` (under its lock)."""

    team: Team
    secrets: list[str]
    personal: PersonalNames
    actor: str
    ids: dict[str, uuid.UUID]
    errors: list[LineError]
    written: Callable[[str, _PlannedKey], None]
    existing: Callable[[str, list[MemoryLine], Memory], None]
    pending: list[tuple[str, list[MemoryLine]]] = field(default_factory=list)

    def add(self, group: list[tuple[str, list[MemoryLine]]]) -> None:
        self.pending.extend(group)
        if len(self.pending) >= BULK_KEYS:
            self.flush()

    def flush(self) -> None:
        pending, self.pending = self.pending, []
        if not pending:
            return
        keys = [key for key, _ in pending]
        lock_keys(self.team.id, keys)
        # Under the locks: a key another writer created since the file's keys were read
        # is applied as a key the team has.
        taken = latest_versions(self.team, keys)
        used = Memory.objects.filter(team=self.team, is_active=True).count()
        clock = _Clock()
        planned: list[_PlannedKey] = []
        for key, versions in pending:
            if key in taken:
                continue
            try:
                plan = self._plan(key, versions, clock)
            except KeyRefused as refused:
                self.errors.append(LineError(refused.line, refused.error, refused.detail))
                continue
            active = plan.active
            if active is not None:  # the key adds one active entry, as a save checks it
                try:
                    check_memory_quota(self.team, used)
                except DomainError as exc:
                    self.errors.append(LineError(plan.lines[plan.rows.index(active)], exc.code, exc.detail))
                    continue
                used += 1
            planned.append(plan)
        planned = self._with_free_skill_names(planned)
        try:
            with transaction.atomic():
                self._insert(planned)
        except (DataError, IntegrityError):
            # A value the checks let through and the database refused: each key again on
            # its own, reporting the line it fails at.
            planned = [plan for plan in planned if self._insert_alone(plan)]
        self._link(planned)
        if planned:
            rows = [row.id for plan in planned for row in plan.rows]
            # The bulk counterpart of a save's memory_written: one UPDATE and a message per
            # batch of entries.
            hooks.memories_written.call(team_id=self.team.id, memory_ids=rows)
        redactions: Counter[str] = Counter()
        for plan in planned:
            self.written(plan.key, plan)
            redactions.update(plan.redactions)
        if redactions:
            logger.warning("redacted %s from imported memories of team %s", dict(redactions), self.team.slug)
        for key, versions in pending:
            if key in taken:
                self.existing(key, versions, taken[key])

    def _plan(self, key: str, versions: list[MemoryLine], clock: _Clock) -> _PlannedKey:
        """The key's rows, each as a save would store it, with the history's own fields;
        raises KeyRefused with the line the pipeline refused."""
        plan = _PlannedKey(key=key)
        local: dict[str, Memory] = {}
        previous: Memory | None = None
        for index, line in enumerate(versions):
            state = state_of(versions, index)
            if state == MemoryState.ACTIVE and plan.active is not None:
                raise KeyRefused(
                    line.line, "invalid", f"'{key}' has more than one active version in the file"
                )
            try:
                row = self._row(line, plan, local, previous)
                self._attach(line, row, plan, clock)
            except DomainError as exc:
                raise KeyRefused(line.line, exc.code, exc.detail) from None
            row.created_at = line.created or clock()
            times = [row.created_at, *(c.confirmed_at for c in plan.confirmations if c.memory is row)]
            row.last_confirmed_at = line.last_confirmed_at or max(times)  # type: ignore[type-var]
            row.is_active = state == MemoryState.ACTIVE
            if state == MemoryState.DELETED:
                row.deleted_at, row.deleted_by = line.deleted_at or row.created_at, line.deleted_by
            elif state == MemoryState.ARCHIVED:
                row.archived_at, row.archived_by = line.archived_at or row.created_at, line.archived_by
            plan.rows.append(row)
            plan.lines.append(line.line)
            plan.ids[line.id] = row.id
            local[line.id] = row
            previous = row
        return plan

    def _row(
        self, line: MemoryLine, plan: _PlannedKey, local: dict[str, Memory], previous: Memory | None
    ) -> Memory:
        """The version's row through the pipeline's stages. It replaces the version the file
        links it to (a version 1 or hand-written file without links: the one before it,
        unless that was put aside)."""
        if isinstance(line.supersedes, str):
            replaced = local.get(line.supersedes)
            elsewhere = None if replaced is not None else line.supersedes
        elif line.supersedes is None:
            replaced, elsewhere = None, None
        else:
            alive = previous is not None and previous.deleted_at is None and previous.archived_at is None
            replaced, elsewhere = (previous if alive else None), None
        linked = replaced is not None or elsewhere is not None
        prepared = prepare(
            key=line.key,
            content=line.content,
            type_name=line.original_type or line.type,
            supersede_reason=line.supersede_reason,
            project=line.project,
            metadata=line.metadata,
            skill_trigger=line.skill_trigger,
            anchor=line.anchor,
            secrets=self.secrets,
            personal=self.personal,
            pinned=line.pinned,
            auto_captured=line.auto_captured,
        )
        # The file's reason and kind as it gives them; a supersede it gives none is "imported".
        reason = prepared.reason or (IMPORTED_REASON if linked else "")
        soft = reason.lower() == SOFT_SUPERSEDE_REASON
        redactions = ScrubResult(text="")
        row = new_row(
            team=self.team,
            prepared=replace(prepared, reason=reason),
            replaced=replaced,
            soft=soft,
            updated_by=line.updated_by,
            secrets=self.secrets,
            redactions=redactions,
        )
        plan.redactions.update(prepared.version.redactions.redactions)
        plan.redactions.update(redactions.redactions)
        row.supersede_reason = reason
        row.supersede_kind = line.supersede_kind or supersede_kind(superseding=linked, soft=soft)
        if elsewhere is not None:
            plan.links.append(_Link(row, "supersedes", elsewhere))
        if line.restored_from is not None:
            restored = local.get(line.restored_from)
            if restored is not None:
                row.restored_from = restored
            else:
                plan.links.append(_Link(row, "restored_from", line.restored_from))
        row.upvotes, row.downvotes = line.upvotes, line.downvotes
        row.access_count, row.last_accessed_at = line.access_count, line.last_accessed_at
        return row

    def _attach(self, line: MemoryLine, row: Memory, plan: _PlannedKey, clock: _Clock) -> None:
        """The version's notes and confirmations, checked and scrubbed as annotate_memory
        and confirm_memory write them."""
        for note in line.notes:
            plan.notes.append(
                Annotation(
                    team=self.team,
                    memory=row,
                    note=scrub(checked_note(note.note), self.secrets).text,
                    created_by=note.created_by or "import",
                    created_at=note.created_at or clock(),
                )
            )
        confirmers = set()
        for confirmation in line.confirmations:
            plan.confirmations.append(
                Confirmation(
                    team=self.team,
                    memory=row,
                    confirmed_by=confirmation.confirmed_by,
                    note=scrub(checked_note(confirmation.note, required=False), self.secrets).text,
                    confirmed_at=confirmation.confirmed_at or clock(),
                )
            )
            confirmers.add(confirmation.confirmed_by)
        row.confirmed_by_count = len(confirmers)

    def _with_free_skill_names(self, planned: list[_PlannedKey]) -> list[_PlannedKey]:
        """A skill's name belongs to one active entry (the save checks it under the name's
        lock): a key whose active version carries a name another active entry carries, or
        an earlier key of the file took, is refused at that version's line."""
        first: dict[str, Memory] = {}
        for plan in planned:
            name = _skill_name(plan.active)
            if name is not None and plan.active is not None:
                first.setdefault(name, plan.active)
        if not first:
            return planned
        for name in sorted(first):
            lock_skill_name(self.team.id, name)
        # The names' holders outside this batch (its keys have no rows yet).
        taken = Memory.objects.filter(team=self.team, is_active=True, skill_trigger__name__in=list(first))
        holders = {_skill_name(row): row for row in taken}
        kept = []
        for plan in planned:
            active, name = plan.active, _skill_name(plan.active)
            if active is not None and name is not None:
                holder = holders.get(name) or first[name]
                if holder is not active:
                    refused = skill_name_taken(holder, name)
                    line = plan.lines[plan.rows.index(active)]
                    self.errors.append(LineError(line, refused.code, refused.detail))
                    continue
            kept.append(plan)
        return kept

    def _insert(self, planned: list[_PlannedKey]) -> None:
        rows = [row for plan in planned for row in plan.rows]
        if not rows:
            return
        Memory.objects.bulk_create(rows, batch_size=BULK_INSERT_ROWS)
        notes = [note for plan in planned for note in plan.notes]
        if notes:
            Annotation.objects.bulk_create(notes, batch_size=BULK_INSERT_ROWS)
        confirmations = [confirmation for plan in planned for confirmation in plan.confirmations]
        if confirmations:
            Confirmation.objects.bulk_create(confirmations, batch_size=BULK_INSERT_ROWS)

    def _insert_alone(self, plan: _PlannedKey) -> bool:
        """The key's rows one at a time in a savepoint; False (reported at the line the
        database refused) when one fails, with nothing of the key kept."""
        line = plan.lines[0]
        try:
            with transaction.atomic():
                for row, line in zip(plan.rows, plan.lines, strict=True):  # noqa: B007 (reported)
                    row.save(force_insert=True)
                line = plan.lines[-1]
                Annotation.objects.bulk_create(plan.notes)
                Confirmation.objects.bulk_create(plan.confirmations)
        except (DataError, IntegrityError):
            self.errors.append(LineError(line, "invalid", "the database refused this line's values"))
            return False
        except InvalidInput as exc:
            self.errors.append(LineError(line, exc.code, exc.detail))
            return False
        return True

    def _link(self, planned: list[_PlannedKey]) -> None:
        """Set the links to versions of other keys, once those are inserted too (a link to a
        version that is not, outside the file or of a refused key, is left out)."""
        for plan in planned:
            self.ids.update(plan.ids)
        linked = []
        for plan in planned:
            for link in plan.links:
                target = self.ids.get(link.target)
                if target is None:
                    continue
                setattr(link.row, f"{link.name}_id", target)
                linked.append(link.row)
        if linked:
            Memory.objects.bulk_update(linked, ["supersedes", "restored_from"])


def _skill_name(row: Memory | None) -> str | None:
    if row is None or row.skill_trigger is None:
        return None
    return str(row.skill_trigger["name"])
