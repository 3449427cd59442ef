"""The batch save (POST memories/batch/, MCP memory_save_batch): up to MAX_BATCH_ENTRIES
saves of one team in one request, each with the rules of a single save (save_memory),
one outcome per entry (docs/write-path.md, "Batch saves").

The stages are save_memory's (memories.writes._pipeline), with the slow ones done once
for the whole batch:

1. every entry validated and scrubbed on its own (prepare), the team's
   secrets and who writes (for personal keys) read once; a key named a second time is
   an error of that entry;
2. the exact duplicate check of the new keys in one go (memories.hooks.find_duplicates:
   one query, no embedding), before any lock; a text an earlier entry of the same batch
   stored is a duplicate of that entry. The near check is not made here: an entry it
   would apply to is stored with `near_check_pending`, and the worker settles it once
   the entry is indexed (settle_near_check below; docs/write-path.md, "Near duplicates
   after indexing (batch saves)");
3. in one transaction, each entry in a savepoint of its own (store:
   key lock, active entry, expected version, conflict, quota, store), so a refused
   entry leaves the others stored. Entries are locked in key order, whatever their
   order in the request, so two batches never wait on each other's keys in a cycle;
   the outcomes come back in request order;
4. the stored versions handed to indexing at once (memories.hooks.memories_written:
   search enqueues them in batches of 100 after commit), those awaiting the near check
   flagged in one UPDATE first.

A key whose active entry already holds what its entry would store (already_holds, the
import's rule too) is `unchanged` (nothing written), so sending a batch again after a
lost answer changes nothing.
The memory quota is checked for every entry that adds an active entry, counting the
team's active entries once and those the batch added since.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal

from django.db import transaction

from core.errors import DomainError
from memories import hooks
from memories.exceptions import KeyRepeatedInBatch
from memories.hooks import DuplicateMatch
from memories.locks import lock_active_memory
from memories.models import Memory, SupersedeKind
from memories.personal import PersonalNames
from memories.writes._pipeline import (
    SOFT_SUPERSEDE_REASON,
    UNSET,
    PreparedSave,
    SaveResult,
    Unset,
    lock_duplicate,
    longer_duplicate_reason,
    prepare,
    refused_duplicate,
    refuses_as_duplicate,
    store,
)
from teams.models import Team
from teams.selectors import team_secret_values

logger = logging.getLogger(__name__)

MAX_BATCH_ENTRIES = 500

STATUSES = ("created", "superseded", "unchanged", "duplicate", "error")
BatchStatus = Literal["created", "superseded", "unchanged", "duplicate", "error"]


@dataclass
class BatchEntry:
    """One save of a batch, parsed (the API's single-save serializer): what
    save_memory takes, and its place in the request."""

    index: int
    key: str
    content: str
    type_name: str | None = None
    supersede_reason: str | None = None
    project: str | None = None
    metadata: dict[str, Any] | None = None
    skill_trigger: dict[str, Any] | Unset | None = UNSET
    allow_duplicate: bool = False
    expected_version: uuid.UUID | None = None
    anchor: dict[str, Any] | Unset | None = UNSET
    pinned: bool | None = None
    inherit_pinned: bool = False


@dataclass
class BatchOutcome:
    """What became of one entry: `result` for every status but `error`, `error` for it."""

    index: int
    key: str
    status: BatchStatus
    result: SaveResult | None = None
    error: DomainError | None = None


class _ActiveCount:
    """The team's active entries for the quota: counted once, plus those added since."""

    def __init__(self, team: Team) -> None:
        self.team = team
        self.counted: int | None = None
        self.added = 0

    def __call__(self) -> int:
        if self.counted is None:
            self.counted = Memory.objects.filter(team=self.team, is_active=True).count()
        return self.counted + self.added


def save_batch(*, team: Team, entries: list[BatchEntry], updated_by: str) -> list[BatchOutcome]:
    """Save each entry as save_memory would, in one transaction with a savepoint per
    entry; one outcome per entry, in the order of `entries`. Raises nothing for an
    entry: its domain error is its outcome. The caller bounds the number of entries."""
    outcomes: dict[int, BatchOutcome] = {}
    prepared: dict[int, PreparedSave] = {}
    secrets = team_secret_values(team_id=team.id)
    # Who writes, and which of the batch's personal names are members: read once.
    personal = PersonalNames(team.id)
    personal.expect(entry.key for entry in entries)
    first_of_key: dict[str, int] = {}
    for entry in entries:
        if entry.key in first_of_key:
            error = KeyRepeatedInBatch(
                f"'{entry.key}' is already entry {first_of_key[entry.key]} of this batch; "
                "send one entry per key",
                field="key",
            )
            outcomes[entry.index] = BatchOutcome(entry.index, entry.key, "error", error=error)
            continue
        first_of_key[entry.key] = entry.index
        try:
            prepared[entry.index] = prepare(
                key=entry.key,
                content=entry.content,
                type_name=entry.type_name,
                supersede_reason=entry.supersede_reason,
                project=entry.project,
                metadata=entry.metadata,
                skill_trigger=entry.skill_trigger,
                anchor=entry.anchor,
                secrets=secrets,
                personal=personal,
                pinned=entry.pinned,
                inherit_pinned=entry.inherit_pinned,
            )
        except DomainError as exc:
            outcomes[entry.index] = BatchOutcome(entry.index, entry.key, "error", error=exc)

    by_index = {entry.index: entry for entry in entries}
    duplicates = _find_duplicates(team, [by_index[i] for i in prepared], prepared)
    stored: list[uuid.UUID] = []
    near_check: list[uuid.UUID] = []
    active_count = _ActiveCount(team)
    # Hashes of the texts this batch stored: a later entry with the same text is its duplicate.
    stored_texts: dict[str, Memory] = {}
    with transaction.atomic():
        for index in sorted(prepared, key=lambda i: (prepared[i].key, i)):
            entry, save = by_index[index], prepared[index]
            checked = index in duplicates
            duplicate = duplicates.get(index)
            if checked and duplicate is None:
                holder = stored_texts.get(Memory.hash_content(save.version.content))
                if holder is not None:
                    duplicate = DuplicateMatch(
                        memory=holder,
                        similarity=1.0,
                        matched_by="content_hash",
                        threshold=team.dedup_threshold,
                    )
            outcome = _store(team, entry, save, duplicate, secrets, active_count, updated_by)
            outcomes[index] = outcome
            if outcome.status in ("created", "superseded") and outcome.result is not None:
                memory = outcome.result.memory
                stored.append(memory.id)
                stored_texts.setdefault(memory.content_hash, memory)
                if outcome.result.superseded is None:
                    active_count.added += 1
                if checked:  # a new key that no exact copy held: near check after indexing
                    near_check.append(memory.id)
        if near_check:
            Memory.objects.filter(team=team, id__in=near_check).update(near_check_pending=True)
        if stored:
            hooks.memories_written.call(team_id=team.id, memory_ids=stored)
    _log_batch(team, outcomes.values())
    return [outcomes[entry.index] for entry in entries]


def _find_duplicates(
    team: Team, entries: list[BatchEntry], prepared: dict[int, PreparedSave]
) -> dict[int, DuplicateMatch | None]:
    """The duplicate check of the entries that get one (a new key, no reason, no
    allow_duplicate), by index; entries missing from the answer were not checked."""
    keys = [prepared[e.index].key for e in entries]
    with_active = set(
        Memory.objects.for_team(team.id).active().filter(key__in=keys).values_list("key", flat=True)
    )
    checked = [
        e.index
        for e in entries
        if not prepared[e.index].reason and not e.allow_duplicate and prepared[e.index].key not in with_active
    ]
    if not checked:
        return {}
    texts = [prepared[i].version.content for i in checked]
    keys = [prepared[i].key for i in checked]
    matches = hooks.find_duplicates.first(team=team, texts=texts, keys=keys) or [None] * len(texts)
    return dict(zip(checked, matches, strict=True))


def _store(
    team: Team,
    entry: BatchEntry,
    save: PreparedSave,
    duplicate: DuplicateMatch | None,
    secrets: list[str],
    active_count: _ActiveCount,
    updated_by: str,
) -> BatchOutcome:
    if duplicate is not None and refuses_as_duplicate(save, duplicate):
        result = refused_duplicate(team=team, prepared=save, duplicate=duplicate)
        return BatchOutcome(entry.index, entry.key, "duplicate", result=result)
    try:
        with transaction.atomic():
            result = store(
                team=team,
                prepared=save,
                duplicate=duplicate,
                expected_version=entry.expected_version,
                updated_by=updated_by,
                secrets=secrets,
                active_count=active_count,
                unchanged_ok=True,
            )
    except DomainError as exc:
        return BatchOutcome(entry.index, entry.key, "error", error=exc)
    if result.unchanged:
        return BatchOutcome(entry.index, entry.key, "unchanged", result=result)
    replaced_own_key = result.superseded is not None and result.superseded.key == entry.key
    return BatchOutcome(
        entry.index, entry.key, "superseded" if replaced_own_key else "created", result=result
    )


def settle_near_check(*, team: Team, memory_id: uuid.UUID, duplicate: DuplicateMatch | None) -> Memory | None:
    """The deferred near-duplicate check of an entry a batch saved (`near_check_pending`),
    once the worker indexed it and found `duplicate`, its nearest active entry of the team
    at the duplicate threshold that does not disagree with it (or None). Returns the entry
    this soft-superseded, or None. The caller is inside the team's scope.

    The save's rule, applied after the fact: the longer text stays active and soft-
    supersedes the other, as save_memory records a longer duplicate (the reason names
    the other key; history and unsupersede read it as theirs). A new entry that is not
    longer, which the single save would have refused, is the one superseded, by the
    entry that held its text. The record is the survivor's `supersedes`, set on the row
    in place (no new version: the survivor is the row already indexed and announced), so
    a survivor that already replaced a version is left alone, and both stay active.

    Locking as save_memory: the entry's key lock and row, then the duplicate's key lock
    (tried, never waited for) and row, both re-read as active. The flag is cleared in the
    same transaction whatever happens: a re-run, or a second worker, finds nothing to do."""
    memory = Memory.objects.for_team(team.id).filter(id=memory_id, near_check_pending=True).first()
    if memory is None:
        return None
    with transaction.atomic():
        current = lock_active_memory(team, memory.key)
        claimed = Memory.objects.filter(team=team, id=memory_id, near_check_pending=True).update(
            near_check_pending=False
        )
        if not claimed or current is None or current.id != memory_id or duplicate is None:
            return None
        other = lock_duplicate(team, duplicate.memory)
        if other is None:
            return None
        longer = len(current.content) > len(other.content)
        survivor, replaced = (current, other) if longer else (other, current)
        if survivor.supersedes_id is not None:
            logger.info(
                "team %s: %s is a near duplicate of %s, which already replaced a version; both kept",
                team.slug,
                current.key,
                other.key,
            )
            return None
        replaced.is_active = False
        replaced.save(update_fields=["is_active", "updated_at"])
        survivor.supersedes = replaced
        survivor.supersede_kind = SupersedeKind.SOFT
        survivor.supersede_reason = (
            longer_duplicate_reason(survivor.key)
            if longer
            else f"{SOFT_SUPERSEDE_REASON}: duplicate saved as '{replaced.key}' is not longer"
        )
        survivor.save(update_fields=["supersedes", "supersede_kind", "supersede_reason", "updated_at"])
    logger.info(
        "team %s: near duplicate (%.3f) found after indexing: %s superseded by %s",
        team.slug,
        duplicate.similarity,
        replaced.key,
        survivor.key,
    )
    return replaced


def _log_batch(team: Team, outcomes: Any) -> None:
    statuses: Counter[str] = Counter()
    redactions: Counter[str] = Counter()
    for outcome in outcomes:
        statuses[outcome.status] += 1
        if outcome.status in ("created", "superseded") and outcome.result is not None:
            for redaction in outcome.result.redactions:
                redactions[str(redaction.get("kind", "credential"))] += int(str(redaction.get("count", 1)))
    logger.info("batch save of team %s: %s", team.slug, dict(statuses))
    if redactions:
        logger.warning("redacted %s from a batch save of team %s", dict(redactions), team.slug)
