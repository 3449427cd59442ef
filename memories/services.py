"""Every write to memories: save (insert or supersede), unsupersede, delete, and the
quality signals (access bumps, ratings, annotations).

Locking rule: a write to (team, key) first takes a transaction-scoped advisory lock
on that pair, then reads the active row. The lock serialises writers of one key
(the partial unique index would otherwise turn a race into an IntegrityError), and
READ COMMITTED gives each statement after the lock a fresh snapshot, so the reader
always sees the previous writer's committed row.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any, Literal

from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from core.errors import InvalidInput
from memories import hooks
from memories.exceptions import (
    ContentTooLarge,
    MemoryExists,
    MemoryNotFound,
    NoPreviousVersion,
    SkillNameTaken,
    UnknownMemoryType,
)
from memories.extraction import with_extracted_metadata
from memories.hooks import DuplicateMatch
from memories.models import MAX_CONTENT_BYTES, MAX_NOTE_LENGTH, Annotation, Memory, SupersedeKind
from memories.skills import active_skill_holder, normalise_skill_trigger
from memories.types import (
    ACCEPTED_TYPE_NAMES,
    DEFAULT_TYPE,
    MemoryType,
    TypeHint,
    resolve_type,
    suggest_type,
)
from teams.models import Team
from teams.scrubber import ScrubResult, scrub
from teams.selectors import team_secret_values
from teams.validators import check_key

logger = logging.getLogger(__name__)

SOFT_SUPERSEDE_REASON = "minor correction"
MAX_METADATA_BYTES = 16 * 1024
MAX_REASON_LENGTH = 2000


class _Unset(Enum):
    UNSET = "unset"


# "Not given" for arguments where None means something (skill_trigger: None removes it).
UNSET = _Unset.UNSET


@dataclass
class SaveResult:
    """What a save did. `saved` is False only when the text was refused as a duplicate:
    nothing was written and `memory` is the entry that already holds it. With `saved`
    and a `duplicate`, the new entry superseded that (shorter) entry of another key."""

    memory: Memory
    superseded: Memory | None = None
    hint: TypeHint | None = None
    redactions: list[dict[str, object]] = field(default_factory=list)
    saved: bool = True
    duplicate: DuplicateMatch | None = None


def save_memory(
    *,
    team: Team,
    key: str,
    content: str,
    updated_by: str,
    type_name: str | None = None,
    supersede_reason: str | None = None,
    project: str | None = None,
    metadata: dict[str, Any] | None = None,
    skill_trigger: dict[str, Any] | _Unset | None = UNSET,
    allow_duplicate: bool = False,
) -> SaveResult:
    """Insert a memory, or supersede the active one under the key when a reason is
    given. Raises MemoryExists (409) when an active entry exists and no reason is, and
    SkillNameTaken (409) when another active entry carries the skill's name.

    On a supersede, a type, project, metadata or skill_trigger left out (None; UNSET for
    the trigger, whose None removes it) carries over from the entry being replaced: a
    correction of the text keeps what the entry is.

    A new key whose text an active entry of the team already holds (dedup.find_duplicate,
    unless `allow_duplicate`): a longer text supersedes that entry (soft, the reason names
    the new key, carrying over like any supersede); otherwise nothing is written and the
    result says which entry holds it (`saved` False). Superseding under an existing key
    is never a duplicate case.

    Locking: the duplicate check (embedding included) runs before any lock. Then the
    key's advisory lock; for a duplicate being superseded, its key's lock (tried, not
    waited for, see _lock_duplicate) and row lock, re-checking that it is still active
    (if not, this is a plain insert); last, for a skill, the lock of its name, which no
    writer holds while waiting for anything else."""
    type_given = bool(type_name and type_name.strip())
    memory_type = resolve_type(type_name) if type_given else DEFAULT_TYPE
    if memory_type is None:
        raise UnknownMemoryType(
            f"unknown type '{type_name}'; use one of: {', '.join(ACCEPTED_TYPE_NAMES)}",
            field="type",
        )
    check_key(key)
    if not content.strip():
        raise InvalidInput("content must not be empty", field="content")
    if len(content.encode()) > MAX_CONTENT_BYTES:
        raise ContentTooLarge(
            f"content is {len(content.encode())} bytes; the limit is {MAX_CONTENT_BYTES}",
            field="content",
        )
    reason = (supersede_reason or "").strip()
    if len(reason) > MAX_REASON_LENGTH:
        raise InvalidInput(f"supersede_reason is limited to {MAX_REASON_LENGTH} characters")
    if metadata is not None and len(json.dumps(metadata).encode()) > MAX_METADATA_BYTES:
        raise InvalidInput(f"metadata is limited to {MAX_METADATA_BYTES} bytes", field="metadata")
    if isinstance(skill_trigger, dict):
        normalise_skill_trigger(skill_trigger)  # fail early, before any work

    secrets = team_secret_values(team_id=team.id)
    scrubbed = scrub(content, secrets)

    duplicate = None
    if not reason and not allow_duplicate and not _has_active_entry(team, key):
        duplicate = hooks.find_duplicate.first(team=team, text=scrubbed.text)
        if duplicate is not None and len(scrubbed.text) <= len(duplicate.memory.content):
            logger.info(
                "memory %s of team %s not saved: '%s' holds it (%s, %.3f)",
                key,
                team.slug,
                duplicate.memory.key,
                duplicate.matched_by,
                duplicate.similarity,
            )
            return SaveResult(
                memory=duplicate.memory, saved=False, duplicate=duplicate, redactions=scrubbed.as_list()
            )

    with transaction.atomic():
        lock_key(team.id, key)
        current = (
            Memory.objects.select_for_update(no_key=True).filter(team=team, key=key, is_active=True).first()
        )
        if current is not None and not reason:
            raise MemoryExists(
                f"'{key}' already has an active entry; send supersede_reason to replace it",
                current=current,
            )
        replaced = current
        if current is None and duplicate is not None:
            replaced = _lock_duplicate(team, duplicate.memory)
            if replaced is None:
                duplicate = None  # changed or deleted meanwhile: nothing to supersede
            else:
                reason = f"{SOFT_SUPERSEDE_REASON}: longer duplicate saved as '{key}'"
        kind = ""
        if replaced is not None:
            if not type_given:
                memory_type = MemoryType(replaced.type)
            if project is None:
                project = replaced.project
            if metadata is None:
                metadata = replaced.metadata
            if skill_trigger is UNSET:
                skill_trigger = replaced.skill_trigger
            is_soft = duplicate is not None or reason.lower() == SOFT_SUPERSEDE_REASON
            kind = SupersedeKind.SOFT if is_soft else SupersedeKind.HARD
        skill = None
        if isinstance(skill_trigger, dict):
            skill = _scrubbed_skill(skill_trigger, secrets, scrubbed)
            _check_skill_name(team, skill["name"], replacing=replaced)
        if replaced is not None:
            replaced.is_active = False
            replaced.save(update_fields=["is_active", "updated_at"])
        # After the carry-over: extracted keys of the version being replaced are recomputed.
        metadata = with_extracted_metadata(scrubbed.text, metadata)
        metadata, metadata_scrub = _scrub_json(metadata, secrets)
        scrubbed.redactions.update(metadata_scrub.redactions)
        memory = Memory.objects.create(
            team=team,
            key=key,
            content=scrubbed.text,
            type=memory_type,
            project=project or "",
            metadata=metadata,
            skill_trigger=skill,
            supersedes=replaced,
            supersede_reason=reason if replaced is not None else "",
            supersede_kind=kind,
            updated_by=updated_by,
            content_hash=Memory.hash_content(scrubbed.text),
        )
        hooks.memory_written.call(team_id=team.id, memory_id=memory.id)
    if scrubbed.redactions:
        logger.warning("redacted %s from memory %s of team %s", dict(scrubbed.redactions), key, team.slug)
    return SaveResult(
        memory=memory,
        superseded=replaced,
        hint=suggest_type(scrubbed.text, memory_type),
        redactions=scrubbed.as_list(),
        duplicate=duplicate,
    )


def _has_active_entry(team: Team, key: str) -> bool:
    """Unlocked peek: a save to a key with an active entry is a conflict or a
    supersede, never a duplicate case (re-checked under the key's lock)."""
    return Memory.objects.for_team(team.id).active().filter(key=key).exists()


def _lock_duplicate(team: Team, duplicate: Memory) -> Memory | None:
    """Lock the duplicate's key and row for the supersede, and read it again: another
    writer may have superseded or deleted it since the (unlocked) check.

    The key lock is only tried, never waited for: this save already holds its own key's
    lock, and waiting for a second key while holding one could close a cycle with a
    writer of that key (an unsupersede restoring into ours). A key being written right
    now is treated like a duplicate that changed: None, a plain insert."""
    if not _try_lock(f"memory:{team.id}:{duplicate.key}"):
        logger.info(
            "duplicate %s of team %s is being written; saving without superseding it",
            duplicate.key,
            team.slug,
        )
        return None
    return (
        Memory.objects.select_for_update(no_key=True)
        .filter(team=team, id=duplicate.id, is_active=True)
        .first()
    )


def _scrubbed_skill(trigger: dict[str, Any], secrets: list[str], scrubbed: ScrubResult) -> dict[str, Any]:
    """The trigger scrubbed of credentials like metadata (a name that was one is no
    longer a valid name: refused), then normalised."""
    clean, result = _scrub_json(trigger, secrets)
    scrubbed.redactions.update(result.redactions)
    return normalise_skill_trigger(clean)


def _check_skill_name(team: Team, name: str, *, replacing: Memory | None) -> None:
    """Under the name's lock (the partial unique index is the guarantee; this is the
    friendly 409): no other active entry may carry the name."""
    _lock(f"skill:{team.id}:{name}")
    holder = active_skill_holder(team_id=team.id, name=name)
    if holder is not None and (replacing is None or holder.id != replacing.id):
        raise SkillNameTaken(
            f"the active entry '{holder.key}' already carries the skill '{name}'; supersede that "
            "entry to change the skill, or pick another name",
            current=holder,
        )


def delete_memory(*, team: Team, key: str, deleted_by: str) -> Memory:
    """Soft-delete the active entry: inactive, with deleted_at, kept for history."""
    check_key(key)
    with transaction.atomic():
        lock_key(team.id, key)
        current = (
            Memory.objects.select_for_update(no_key=True).filter(team=team, key=key, is_active=True).first()
        )
        if current is None:
            raise MemoryNotFound("no active memory under this key")
        current.is_active = False
        current.deleted_at = timezone.now()
        current.deleted_by = deleted_by
        current.save(update_fields=["is_active", "deleted_at", "deleted_by", "updated_at"])
    return current


def unsupersede_memory(*, team: Team, key: str, reason: str, updated_by: str) -> Memory:
    """Make the version that the active entry replaced the active one again.

    History is never rewritten: the active row is marked inactive and a NEW row is
    inserted with the restored version's content, type, project and metadata, linked
    by `supersedes` to the row it replaces (kind "unsupersede", with the reason) and by
    `restored_from` to the version it brings back. Undoing an unsupersede therefore
    brings back what it undid. Votes carry over from the restored version (same
    content, same judgement); access counts start at zero (they count reads of a row).

    The restored version goes back under its own key. That is the key itself, except
    when the active entry was saved under a new key as a longer duplicate of another
    key's entry (see save_memory): then the other key gets its entry back, and this key
    is left with no active entry (its version stays in history, superseded by the
    restored one). The restored row is never checked for duplicates, and carries the
    restored version's skill_trigger.

    Raises MemoryNotFound (404) when the key has no active entry (never saved, or
    deleted: a deleted key is saved again, not unsuperseded), NoPreviousVersion (409)
    when the active entry replaced nothing, MemoryExists (409) when the other key of a
    duplicate has an active entry again, and SkillNameTaken (409) when another active
    entry carries the restored version's skill name."""
    check_key(key)
    reason = (reason or "").strip()
    if not reason:
        raise InvalidInput("a reason is required", field="reason")
    if len(reason) > MAX_REASON_LENGTH:
        raise InvalidInput(f"reason is limited to {MAX_REASON_LENGTH} characters", field="reason")

    with transaction.atomic():
        secrets = team_secret_values(team_id=team.id)
        lock_key(team.id, key)
        current = (
            Memory.objects.select_for_update(no_key=True).filter(team=team, key=key, is_active=True).first()
        )
        if current is None:
            latest = Memory.objects.filter(team=team, key=key).order_by("-created_at").first()
            if latest is None:
                raise MemoryNotFound("no memory under this key")
            if latest.deleted_at is None:
                raise MemoryNotFound(
                    f"'{key}' has no active entry: its last version was replaced by an entry of another "
                    "key (its history says which)"
                )
            raise MemoryNotFound(
                f"'{key}' is deleted; save it again to bring it back (its history keeps every version)"
            )
        # An inactive version is never written again, so it needs no lock.
        previous = Memory.objects.filter(team=team, id=current.supersedes_id).first()
        if previous is None:
            raise NoPreviousVersion(
                f"'{key}' has no previous version to restore: the active entry replaced nothing",
                current=current,
            )
        if previous.key != key:
            # The active entry replaced an entry of another key as a longer duplicate:
            # that entry comes back under its own key, which must be free.
            lock_key(team.id, previous.key)
            occupant = Memory.objects.filter(team=team, key=previous.key, is_active=True).first()
            if occupant is not None:
                raise MemoryExists(
                    f"'{key}' replaced '{previous.key}' as a longer duplicate, and '{previous.key}' has "
                    "an active entry again: supersede or delete that entry instead",
                    current=occupant,
                )
        # Scrubbed again: a secret may have entered the vault since the version was saved.
        skill = None
        if previous.skill_trigger is not None:
            skill = _scrubbed_skill(previous.skill_trigger, secrets, ScrubResult(text=""))
            _check_skill_name(team, skill["name"], replacing=current)
        current.is_active = False
        current.save(update_fields=["is_active", "updated_at"])
        content = scrub(previous.content, secrets).text
        metadata, _ = _scrub_json(previous.metadata, secrets)
        memory = Memory.objects.create(
            team=team,
            key=previous.key,
            content=content,
            type=previous.type,
            project=previous.project,
            metadata=metadata,
            skill_trigger=skill,
            supersedes=current,
            supersede_reason=reason,
            supersede_kind=SupersedeKind.UNSUPERSEDE,
            restored_from=previous,
            updated_by=updated_by,
            content_hash=Memory.hash_content(content),
            upvotes=previous.upvotes,
            downvotes=previous.downvotes,
        )
        hooks.memory_written.call(team_id=team.id, memory_id=memory.id)
    logger.info(
        "memory %s of team %s restored to version %s of %s by %s",
        key,
        team.slug,
        previous.id,
        previous.key,
        updated_by,
    )
    return memory


def record_access(*, team: Team, memory_ids: Iterable[uuid.UUID]) -> datetime:
    """Count one read of each entry returned to an agent, in ONE statement per request.

    A plain UPDATE, not Model.save(), so updated_at (auto_now) does not move. Rows another
    transaction holds locked (a save in flight) are skipped rather than waited for: a
    read never blocks behind a write (reads fail open), and locking in id order keeps
    two concurrent bumps of overlapping sets from deadlocking. A skipped bump is a
    lost count, which a signal can afford. Returns the time recorded."""
    now = timezone.now()
    ids = sorted(set(memory_ids))
    if not ids:
        return now
    with connection.cursor() as cursor:
        cursor.execute(
            """
            UPDATE memories_memory SET access_count = access_count + 1, last_accessed_at = %s
            WHERE id IN (
                SELECT id FROM memories_memory WHERE team_id = %s AND id = ANY(%s)
                ORDER BY id FOR NO KEY UPDATE SKIP LOCKED
            )
            """,
            [now, team.id, ids],
        )
    return now


Direction = Literal["up", "down"]


def rate_memory(*, team: Team, key: str, direction: Direction, rated_by: str) -> Memory:
    """One vote up or down on the active entry of a key. Votes belong to the version:
    a supersede starts the new version at zero; an unsupersede carries the restored
    version's votes (see unsupersede_memory)."""
    check_key(key)
    if direction not in ("up", "down"):
        raise InvalidInput("direction is 'up' or 'down'", field="direction")
    column = "upvotes" if direction == "up" else "downvotes"
    with transaction.atomic():
        lock_key(team.id, key)
        current = (
            Memory.objects.select_for_update(no_key=True).filter(team=team, key=key, is_active=True).first()
        )
        if current is None:
            raise MemoryNotFound("no active memory under this key")
        # update(), not save(): a vote is not a change of the entry (updated_at stays).
        Memory.objects.filter(team=team, id=current.id).update(**{column: F(column) + 1})
        current.refresh_from_db(fields=["upvotes", "downvotes"])
    logger.info("memory %s of team %s rated %s by %s", key, team.slug, direction, rated_by)
    return current


@dataclass
class AnnotateResult:
    annotation: Annotation
    redactions: list[dict[str, object]] = field(default_factory=list)


def annotate_memory(*, team: Team, key: str, note: str, created_by: str) -> AnnotateResult:
    """Attach a note to the active entry of a key, scrubbed of credentials like content."""
    check_key(key)
    note = (note or "").strip()
    if not note:
        raise InvalidInput("note must not be empty", field="note")
    if len(note) > MAX_NOTE_LENGTH:
        raise InvalidInput(f"note is limited to {MAX_NOTE_LENGTH} characters", field="note")
    with transaction.atomic():
        scrubbed = scrub(note, team_secret_values(team_id=team.id))
        # The key lock keeps the note from landing on a version superseded meanwhile.
        lock_key(team.id, key)
        current = Memory.objects.filter(team=team, key=key, is_active=True).first()
        if current is None:
            raise MemoryNotFound("no active memory under this key")
        annotation = Annotation.objects.create(
            team=team, memory=current, note=scrubbed.text, created_by=created_by
        )
    if scrubbed.redactions:
        logger.warning("redacted %s from a note on %s of team %s", dict(scrubbed.redactions), key, team.slug)
    return AnnotateResult(annotation=annotation, redactions=scrubbed.as_list())


def lock_key(team_id: int, key: str) -> None:
    """The transaction-scoped advisory lock every writer of (team, key) takes first."""
    _lock(f"memory:{team_id}:{key}")


def _lock(name: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [name])


def _try_lock(name: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(hashtextextended(%s, 0))", [name])
        return bool(cursor.fetchone()[0])


def _scrub_json(value: Any, secrets: list[str]) -> tuple[Any, ScrubResult]:
    """Scrub every string (keys and values) inside a JSON value."""
    total = ScrubResult(text="")

    def walk(node: Any) -> Any:
        if isinstance(node, str):
            result = scrub(node, secrets)
            total.redactions.update(result.redactions)
            return result.text
        if isinstance(node, dict):
            return {walk(k): walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return walk(value), total


def delete_team_memories(*, team: Team) -> dict[str, int]:
    """Every memory version and note of a team (the receiver of teams.hooks.team_shutdown;
    the caller is inside the team's scope). supersedes is PROTECT, since history must not
    silently lose links, so the chain is unlinked first, then deleted in one statement."""
    annotations = Annotation.objects.filter(team=team).delete()[0]
    rows = Memory.objects.filter(team=team)
    rows.update(supersedes=None)
    return {"annotations": annotations, "memories": rows.delete()[0]}
