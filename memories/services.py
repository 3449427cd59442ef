"""Every write of memory versions: save (insert or supersede), unsupersede, delete,
archive and restore.

A save is one pipeline, read top to bottom in `save_memory`:
validate → scrub → find a duplicate (memories.hooks.find_duplicate, which search
fills in) → lock the key and read its active entry → store the new version →
after-commit hooks (memories.hooks.memory_written: search indexes it).

Locking rule: see memories.locks (the key's advisory lock, then the active row).
Votes, notes and access counts are in memories.feedback. This module stays whole past
the style's 400 lines on purpose: the save pipeline and the writes that share its
steps (unsupersede, delete) read best in one place.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.errors import InvalidInput
from memories import hooks
from memories.anchors import normalise_anchor
from memories.exceptions import (
    ContentTooLarge,
    MemoryExists,
    MemoryNotFound,
    NoPreviousVersion,
    SkillNameTaken,
    StaleVersion,
    UnknownMemoryType,
)
from memories.extraction import with_extracted_metadata
from memories.hooks import DuplicateMatch
from memories.locks import lock_active_memory, lock_key, lock_skill_name, try_lock_key
from memories.models import (
    MAX_CONTENT_BYTES,
    MAX_NOTE_LENGTH,
    Annotation,
    Confirmation,
    Memory,
    SupersedeKind,
)
from memories.skills import active_skill_holder, normalise_skill_trigger
from memories.types import ACCEPTED_TYPE_NAMES, DEFAULT_TYPE, MemoryType, TypeHint, resolve_type, suggest_type
from teams.models import Team
from teams.scrubber import ScrubResult, scrub, scrub_json
from teams.selectors import team_secret_values
from teams.services import check_quota
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
    """What a save did. `saved` is False when nothing was written: the text was refused
    as a duplicate (`memory` is the entry that already holds it), or, for the batch
    save only, the key's active entry already held it (`unchanged`, `memory` is that
    entry). With `saved` and a `duplicate`, the new entry superseded that (shorter)
    entry of another key."""

    memory: Memory
    superseded: Memory | None = None
    hint: TypeHint | None = None
    redactions: list[dict[str, object]] = field(default_factory=list)
    saved: bool = True
    duplicate: DuplicateMatch | None = None
    unchanged: bool = False


@dataclass
class _Version:
    """What the new version will hold, filled in step by step; None means "carry over
    from the entry being replaced" (UNSET for the skill trigger, whose None removes it)."""

    content: str
    memory_type: MemoryType | None
    project: str | None
    metadata: dict[str, Any] | None
    skill_trigger: dict[str, Any] | _Unset | None
    redactions: ScrubResult
    anchor: dict[str, Any] | _Unset | None = UNSET


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
    expected_version: uuid.UUID | None = None,
    anchor: dict[str, Any] | _Unset | None = UNSET,
) -> SaveResult:
    """Insert a memory, or supersede the active one under the key when a reason is
    given. Raises MemoryExists (409) when an active entry exists and no reason is,
    StaleVersion (409) when `expected_version` is given and is not the active entry
    (someone changed it meanwhile), and SkillNameTaken (409) when another active entry
    carries the skill's name.

    On a supersede, a type, project, metadata, skill_trigger or anchor left out carries
    over from the entry being replaced: a correction of the text keeps what the entry is.

    A new key whose text an active entry of the team already holds (unless
    `allow_duplicate`): a longer text supersedes that entry (soft, the reason names the
    new key); otherwise nothing is written and the result says which entry holds it
    (`saved` False). Superseding under an existing key is never a duplicate case.

    Locking: the duplicate check (which may embed) runs before any lock. Then the key's
    lock; for a duplicate being superseded, its key's lock (tried, never waited for) and
    row lock, re-checking that it is still active; last, for a skill, its name's lock."""
    secrets = team_secret_values(team_id=team.id)
    prepared = prepare_save(
        key=key,
        content=content,
        type_name=type_name,
        supersede_reason=supersede_reason,
        project=project,
        metadata=metadata,
        skill_trigger=skill_trigger,
        anchor=anchor,
        secrets=secrets,
    )
    duplicate = None
    if wants_duplicate_check(team=team, prepared=prepared, allow_duplicate=allow_duplicate):
        duplicate = hooks.find_duplicate.first(team=team, text=prepared.version.content)
        if duplicate is not None and refuses_as_duplicate(prepared, duplicate):
            return refused_duplicate(team=team, prepared=prepared, duplicate=duplicate)

    with transaction.atomic():
        result = store_prepared(
            team=team,
            prepared=prepared,
            duplicate=duplicate,
            expected_version=expected_version,
            updated_by=updated_by,
            secrets=secrets,
            active_count=lambda: Memory.objects.filter(team=team, is_active=True).count(),
        )
        hooks.memory_written.call(team_id=team.id, memory_id=result.memory.id)
    _log_redactions(prepared.version.redactions, what=f"memory {key}", team=team)
    return result


@dataclass
class PreparedSave:
    """A save validated and scrubbed, before any lock: save_memory's first steps, which
    the batch save (memories.batch) runs for every entry before its duplicate check."""

    key: str
    reason: str
    version: _Version


def prepare_save(
    *,
    key: str,
    content: str,
    type_name: str | None,
    supersede_reason: str | None,
    project: str | None,
    metadata: dict[str, Any] | None,
    skill_trigger: dict[str, Any] | _Unset | None,
    anchor: dict[str, Any] | _Unset | None,
    secrets: list[str],
) -> PreparedSave:
    """Validate and scrub a save (no query); raises the save's domain errors."""
    check_key(key)
    _refuse_credential_key(key)
    reason = clean_reason(supersede_reason, field="supersede_reason", required=False)
    version = _validated_version(content, type_name, project, metadata, skill_trigger)
    version.anchor = anchor if anchor is UNSET else _credential_free_anchor(normalise_anchor(anchor))
    version.content = _scrubbed(version.content, secrets, version.redactions)
    return PreparedSave(key=key, reason=reason, version=version)


def wants_duplicate_check(*, team: Team, prepared: PreparedSave, allow_duplicate: bool) -> bool:
    """A new key saved without a reason or allow_duplicate is checked for duplicates."""
    return not prepared.reason and not allow_duplicate and not _has_active_entry(team, prepared.key)


def refuses_as_duplicate(prepared: PreparedSave, duplicate: DuplicateMatch) -> bool:
    """A duplicate whose text is not longer than the entry holding it is not saved."""
    return len(prepared.version.content) <= len(duplicate.memory.content)


def refused_duplicate(*, team: Team, prepared: PreparedSave, duplicate: DuplicateMatch) -> SaveResult:
    _log_refused_duplicate(team, prepared.key, duplicate)
    return SaveResult(
        memory=duplicate.memory,
        saved=False,
        duplicate=duplicate,
        redactions=prepared.version.redactions.as_list(),
    )


def store_prepared(
    *,
    team: Team,
    prepared: PreparedSave,
    duplicate: DuplicateMatch | None,
    expected_version: uuid.UUID | None,
    updated_by: str,
    secrets: list[str],
    active_count: Callable[[], int],
    unchanged_ok: bool = False,
) -> SaveResult:
    """save_memory's locked steps, in the caller's transaction: lock the key and read
    its active entry, check the expected version and the conflict, lock a duplicate
    being superseded, check the quota (`active_count`: the team's active entries now)
    for one more active entry, store the version. Calls no hook.

    With `unchanged_ok` (the batch save), a key whose active entry already holds what
    this version would store is left as it is: `unchanged` in the result, nothing written."""
    key, reason, version = prepared.key, prepared.reason, prepared.version
    current = lock_active_memory(team, key)
    if unchanged_ok and current is not None and _already_holds(team, current, version, secrets):
        redactions = version.redactions.as_list()
        return SaveResult(memory=current, saved=False, unchanged=True, redactions=redactions)
    _check_expected_version(key, current, expected_version)
    if current is not None and not reason:
        raise MemoryExists(
            f"'{key}' already has an active entry; send supersede_reason to replace it", current=current
        )
    replaced = current
    if current is None and duplicate is not None:
        replaced = lock_duplicate(team, duplicate.memory)
        if replaced is None:
            duplicate = None  # changed or deleted meanwhile: nothing to supersede
        else:
            reason = longer_duplicate_reason(key)
    if replaced is None:  # one more active entry, not a new version of one
        check_quota(
            team=team,
            quota="memories",
            used=active_count(),
            limit=settings.MEMORYHUB_QUOTA_MEMORIES,
            what="active memories",
        )
    memory = _store_version(
        team=team,
        key=key,
        version=version,
        replaced=replaced,
        reason=reason,
        soft=duplicate is not None or reason.lower() == SOFT_SUPERSEDE_REASON,
        updated_by=updated_by,
        secrets=secrets,
    )
    return SaveResult(
        memory=memory,
        superseded=replaced,
        hint=suggest_type(memory.content, MemoryType(memory.type)),
        redactions=version.redactions.as_list(),
        duplicate=duplicate,
    )


def _already_holds(team: Team, current: Memory, version: _Version, secrets: list[str]) -> bool:
    """Whether the active entry holds what `version` would store: the same text, and
    the same type, project, metadata, skill and anchor after the carry-over."""
    if current.content != version.content:
        return False
    candidate = replace(version, redactions=ScrubResult(text=""))
    _carry_over(candidate, current)
    skill = None
    if isinstance(candidate.skill_trigger, dict):
        skill = _scrubbed_skill(candidate.skill_trigger, secrets, candidate.redactions)
    row = _version_row(
        team=team,
        key=current.key,
        version=candidate,
        replaced=current,
        reason="",
        soft=False,
        updated_by="",
        secrets=secrets,
        skill=skill,
    )
    return (row.type, row.project, row.metadata, row.skill_trigger, row.anchor) == (
        current.type,
        current.project,
        current.metadata,
        current.skill_trigger,
        current.anchor,
    )


def _validated_version(
    content: str,
    type_name: str | None,
    project: str | None,
    metadata: dict[str, Any] | None,
    skill_trigger: dict[str, Any] | _Unset | None,
) -> _Version:
    memory_type = None
    if type_name and type_name.strip():
        memory_type = resolve_type(type_name)
        if memory_type is None:
            raise UnknownMemoryType(
                f"unknown type '{type_name}'; use one of: {', '.join(ACCEPTED_TYPE_NAMES)}", field="type"
            )
    if not content.strip():
        raise InvalidInput("content must not be empty", field="content")
    size = len(content.encode())
    if size > MAX_CONTENT_BYTES:
        raise ContentTooLarge(f"content is {size} bytes; the limit is {MAX_CONTENT_BYTES}", field="content")
    if metadata is not None and len(json.dumps(metadata).encode()) > MAX_METADATA_BYTES:
        raise InvalidInput(f"metadata is limited to {MAX_METADATA_BYTES} bytes", field="metadata")
    if isinstance(skill_trigger, dict):
        normalise_skill_trigger(skill_trigger)  # fail early, before any work
    return _Version(content, memory_type, project, metadata, skill_trigger, ScrubResult(text=""))


def _credential_free_anchor(anchor: dict[str, Any] | None) -> dict[str, Any] | None:
    """An anchor is a URL or path to check: one carrying a credential (a token in the
    query string) is refused rather than stored redacted, which would not check."""
    if anchor is not None and scrub(anchor["value"]).redactions:
        raise InvalidInput("anchor: the value looks like it carries a credential", field="anchor")
    return anchor


def clean_reason(reason: str | None, *, field: str, required: bool) -> str:
    """A supersede or unsupersede reason, stripped; blank counts as none."""
    reason = (reason or "").strip()
    if required and not reason:
        raise InvalidInput("a reason is required", field=field)
    if len(reason) > MAX_REASON_LENGTH:
        raise InvalidInput(f"{field} is limited to {MAX_REASON_LENGTH} characters", field=field)
    return reason


def _scrubbed(text: str, secrets: list[str], redactions: ScrubResult) -> str:
    result = scrub(text, secrets)
    redactions.redactions.update(result.redactions)
    return result.text


def _has_active_entry(team: Team, key: str) -> bool:
    """Unlocked peek: a save to a key with an active entry is a conflict or a
    supersede, never a duplicate case (re-checked under the key's lock)."""
    return Memory.objects.for_team(team.id).active().filter(key=key).exists()


def _check_expected_version(key: str, current: Memory | None, expected: uuid.UUID | None) -> None:
    """Under the key's lock: a writer that saw version `expected` may only replace that one."""
    if expected is not None and (current is None or current.id != expected):
        raise StaleVersion(
            f"'{key}' changed since version {expected} was read; review the current entry first",
            current=current,
        )


def longer_duplicate_reason(key: str) -> str:
    """The reason recorded when a longer duplicate saved under `key` soft-supersedes an entry."""
    return f"{SOFT_SUPERSEDE_REASON}: longer duplicate saved as '{key}'"


def lock_duplicate(team: Team, duplicate: Memory) -> Memory | None:
    """Lock the duplicate's key and row for the supersede, and read it again: another
    writer may have superseded or deleted it since the (unlocked) check. The key lock
    is only tried (see memories.locks.try_lock_key): a key being written right now is
    treated like a duplicate that changed, None, and the save is a plain insert."""
    if not try_lock_key(team.id, duplicate.key):
        logger.info("duplicate %s of team %s is being written; not superseding it", duplicate.key, team.slug)
        return None
    return (
        Memory.objects.select_for_update(no_key=True)
        .filter(team=team, id=duplicate.id, is_active=True)
        .first()
    )


def _store_version(
    *,
    team: Team,
    key: str,
    version: _Version,
    replaced: Memory | None,
    reason: str,
    soft: bool,
    updated_by: str,
    secrets: list[str],
) -> Memory:
    """Mark the replaced entry inactive and insert the new version linked to it. The
    caller holds the key's lock (and the replaced row's)."""
    if replaced is not None:
        _carry_over(version, replaced)
    skill = None
    if isinstance(version.skill_trigger, dict):
        skill = _scrubbed_skill(version.skill_trigger, secrets, version.redactions)
        _check_skill_name(team, skill["name"], replacing=replaced)
    if replaced is not None:
        replaced.is_active = False
        replaced.save(update_fields=["is_active", "updated_at"])
    memory = _version_row(
        team=team,
        key=key,
        version=version,
        replaced=replaced,
        reason=reason,
        soft=soft,
        updated_by=updated_by,
        secrets=secrets,
        skill=skill,
    )
    memory.save(force_insert=True)
    return memory


def _version_row(
    *,
    team: Team,
    key: str,
    version: _Version,
    replaced: Memory | None,
    reason: str,
    soft: bool,
    updated_by: str,
    secrets: list[str],
    skill: dict[str, Any] | None,
) -> Memory:
    """The new version's row, not yet inserted (after the carry-over)."""
    # After the carry-over: extracted keys of the version being replaced are recomputed.
    metadata = with_extracted_metadata(version.content, version.metadata)
    metadata, metadata_scrub = scrub_json(metadata, secrets)
    version.redactions.redactions.update(metadata_scrub.redactions)
    return Memory(
        team=team,
        key=key,
        content=version.content,
        type=version.memory_type or DEFAULT_TYPE,
        project=version.project or "",
        metadata=metadata,
        skill_trigger=skill,
        anchor=None if version.anchor is UNSET else version.anchor,
        supersedes=replaced,
        supersede_reason=reason if replaced is not None else "",
        supersede_kind=("" if replaced is None else SupersedeKind.SOFT if soft else SupersedeKind.HARD),
        updated_by=updated_by,
        content_hash=Memory.hash_content(version.content),
    )


def unsaved_version(
    *,
    team: Team,
    key: str,
    content: str,
    updated_by: str,
    type_name: str,
    supersede_reason: str | None,
    project: str,
    metadata: dict[str, Any],
    replaced: Memory | None,
    secrets: list[str],
) -> tuple[Memory, ScrubResult]:
    """The row save_memory(allow_duplicate=True) would insert for a version without a
    skill or an anchor, built without a query, for a bulk write (memories.importing):
    the same checks, scrubbing, metadata and supersede fields. `replaced` is the key's
    active entry (a row of the same bulk write, or None).

    The caller does the rest of save_memory's work: holds the key's lock, checks the
    quota for a new active entry, marks `replaced` inactive, inserts the rows and calls
    hooks.memories_written for them."""
    check_key(key)
    _refuse_credential_key(key)
    reason = clean_reason(supersede_reason, field="supersede_reason", required=False)
    if replaced is not None and not reason:
        raise MemoryExists(
            f"'{key}' already has an active entry; send supersede_reason to replace it", current=replaced
        )
    version = _validated_version(content, type_name, project, metadata, None)
    version.content = _scrubbed(version.content, secrets, version.redactions)
    if replaced is not None:
        _carry_over(version, replaced)
    memory = _version_row(
        team=team,
        key=key,
        version=version,
        replaced=replaced,
        reason=reason,
        soft=reason.lower() == SOFT_SUPERSEDE_REASON,
        updated_by=updated_by,
        secrets=secrets,
        skill=None,
    )
    return memory, version.redactions


def _refuse_credential_key(key: str) -> None:
    if scrub(key).redactions:
        # Keys are stored and shown as given (never scrubbed): one shaped like a
        # credential (`AKIA…`, `sk-…`, `password:…`) is refused, not saved.
        raise InvalidInput("the key looks like a credential; name what the memory is about", field="key")


def _carry_over(version: _Version, replaced: Memory) -> None:
    if version.memory_type is None:
        version.memory_type = MemoryType(replaced.type)
    if version.project is None:
        version.project = replaced.project
    if version.metadata is None:
        version.metadata = replaced.metadata
    if version.skill_trigger is UNSET:
        version.skill_trigger = replaced.skill_trigger
    if version.anchor is UNSET:
        version.anchor = replaced.anchor


def _scrubbed_skill(trigger: dict[str, Any], secrets: list[str], redactions: ScrubResult) -> dict[str, Any]:
    """The trigger scrubbed of credentials like metadata (a name that was one is no
    longer a valid name: refused), then normalised."""
    clean, result = scrub_json(trigger, secrets)
    redactions.redactions.update(result.redactions)
    return normalise_skill_trigger(clean)


def _check_skill_name(team: Team, name: str, *, replacing: Memory | None) -> None:
    """Under the name's lock (the partial unique index is the guarantee; this is the
    friendly 409): no other active entry may carry the name."""
    lock_skill_name(team.id, name)
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
        current = lock_active_memory(team, key)
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
    is left with no active entry. The restored row is never checked for duplicates,
    and carries the restored version's skill_trigger.

    Raises MemoryNotFound (404) when the key has no active entry (never saved, or
    deleted: a deleted key is saved again, not unsuperseded), NoPreviousVersion (409)
    when the active entry replaced nothing, MemoryExists (409) when the other key of a
    duplicate has an active entry again, and SkillNameTaken (409) when another active
    entry carries the restored version's skill name."""
    check_key(key)
    reason = clean_reason(reason, field="reason", required=True)
    with transaction.atomic():
        secrets = team_secret_values(team_id=team.id)
        current = lock_active_memory(team, key)
        if current is None:
            raise _why_no_active_entry(team, key)
        previous = _restorable_version(team, key, current)
        # Scrubbed again: a secret may have entered the vault since the version was saved.
        skill = None
        if previous.skill_trigger is not None:
            skill = _scrubbed_skill(previous.skill_trigger, secrets, ScrubResult(text=""))
            _check_skill_name(team, skill["name"], replacing=current)
        current.is_active = False
        current.save(update_fields=["is_active", "updated_at"])
        memory = _restore(
            team,
            previous,
            replaced=current,
            skill=skill,
            reason=reason,
            updated_by=updated_by,
            secrets=secrets,
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


def _why_no_active_entry(team: Team, key: str) -> MemoryNotFound:
    latest = Memory.objects.filter(team=team, key=key).order_by("-created_at").first()
    if latest is None:
        return MemoryNotFound("no memory under this key")
    if latest.archived_at is not None:
        return MemoryNotFound(f"'{key}' is archived; restore it, or save it again")
    if latest.deleted_at is None:
        return MemoryNotFound(
            f"'{key}' has no active entry: its last version was replaced by an entry of another "
            "key (its history says which)"
        )
    return MemoryNotFound(
        f"'{key}' is deleted; save it again to bring it back (its history keeps every version)"
    )


def _restorable_version(team: Team, key: str, current: Memory) -> Memory:
    """The version the active entry replaced; its own key must be free to take it back.
    An inactive version is never written again, so it needs no row lock."""
    supersedes_id = current.supersedes_id
    previous = None if supersedes_id is None else Memory.objects.filter(team=team, id=supersedes_id).first()
    if previous is None:
        raise NoPreviousVersion(
            f"'{key}' has no previous version to restore: the active entry replaced nothing", current=current
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
    return previous


def _restore(
    team: Team,
    previous: Memory,
    *,
    replaced: Memory,
    skill: dict[str, Any] | None,
    reason: str,
    updated_by: str,
    secrets: list[str],
) -> Memory:
    content = scrub(previous.content, secrets).text
    metadata, _ = scrub_json(previous.metadata, secrets)
    return Memory.objects.create(
        team=team,
        key=previous.key,
        content=content,
        type=previous.type,
        project=previous.project,
        metadata=metadata,
        skill_trigger=skill,
        anchor=previous.anchor,
        supersedes=replaced,
        supersede_reason=reason,
        supersede_kind=SupersedeKind.UNSUPERSEDE,
        restored_from=previous,
        updated_by=updated_by,
        content_hash=Memory.hash_content(content),
        upvotes=previous.upvotes,
        downvotes=previous.downvotes,
    )


def archive_memory(
    *, team: Team, key: str, archived_by: str, expected_version: uuid.UUID | None = None
) -> Memory:
    """Put the active entry of a key aside: inactive, with archived_at and archived_by,
    neither replaced nor deleted. It leaves search's default results, injection and
    every job over active entries, stays in the key's history, and comes back with
    `restore_archived`. Nothing is deleted. With `expected_version`, only that version
    is archived (a nudge's entry: a key that moved on since is not archived blindly).

    Raises MemoryNotFound (404) when the key has no active entry, StaleVersion (409)
    when it is not `expected_version`. Locking: the key's lock and the active row, like
    every writer of the key. Calls memories.hooks.memory_archived in the transaction."""
    check_key(key)
    with transaction.atomic():
        current = lock_active_memory(team, key)
        if current is None:
            raise _why_no_active_entry(team, key)
        _check_expected_version(key, current, expected_version)
        current.is_active = False
        current.archived_at = timezone.now()
        current.archived_by = archived_by
        current.save(update_fields=["is_active", "archived_at", "archived_by", "updated_at"])
        hooks.memory_archived.call(team=team, memory_id=current.id, archived_by=archived_by)
    logger.info("memory %s of team %s archived by %s", key, team.slug, archived_by)
    return current


def restore_archived(*, team: Team, key: str, restored_by: str) -> Memory:
    """Make the archived last version of a key its active entry again, as it was (the
    same row and id: an archive is a state, not a version; its chunks and vectors were
    kept, so search finds it again at once).

    Raises MemoryNotFound (404) when the key's last version is not archived (or the key
    was never saved), MemoryExists (409) when the key has an active entry again (saved
    since), SkillNameTaken (409) when another active entry carries its skill's name,
    and the quota's 409 past the team's active memories."""
    check_key(key)
    with transaction.atomic():
        current = lock_active_memory(team, key)
        if current is not None:
            raise MemoryExists(
                f"'{key}' has an active entry again; supersede it instead of restoring", current=current
            )
        latest = (
            Memory.objects.select_for_update(no_key=True)
            .filter(team=team, key=key)
            .order_by("-created_at", "-id")
            .first()
        )
        if latest is None or latest.archived_at is None:
            raise MemoryNotFound(f"'{key}' has no archived entry to restore")
        if latest.skill_trigger is not None:
            _check_skill_name(team, str(latest.skill_trigger.get("name", "")), replacing=None)
        check_quota(
            team=team,
            quota="memories",
            used=Memory.objects.filter(team=team, is_active=True).count(),
            limit=settings.MEMORYHUB_QUOTA_MEMORIES,
            what="active memories",
        )
        latest.is_active = True
        latest.archived_at = None
        latest.archived_by = ""
        latest.save(update_fields=["is_active", "archived_at", "archived_by", "updated_at"])
    logger.info("memory %s of team %s restored from the archive by %s", key, team.slug, restored_by)
    return latest


@dataclass
class ConfirmResult:
    memory: Memory
    confirmation: Confirmation


def confirm_memory(*, team: Team, key: str, confirmed_by: str, note: str | None = None) -> ConfirmResult:
    """Say the active entry of a key is still true: its `last_confirmed_at` becomes now,
    its anchor is no longer flagged broken (a person checked it; the next anchor check
    may flag it again), and a Confirmation (who, when, note) joins the key's history.
    No new version: content, updated_at and the version id stay. A contradiction stays
    flagged: it concerns two entries and is resolved as such (freshness's nudges).

    Raises MemoryNotFound (404) when the key has no active entry. Locking: the key's
    lock and the active row, like every writer of the key (memories.locks), so a confirm
    never lands on a version being replaced at that moment."""
    check_key(key)
    note = (note or "").strip()
    if len(note) > MAX_NOTE_LENGTH:
        raise InvalidInput(f"note is limited to {MAX_NOTE_LENGTH} characters", field="note")
    with transaction.atomic():
        secrets = team_secret_values(team_id=team.id)
        current = lock_active_memory(team, key)
        if current is None:
            raise _why_no_active_entry(team, key)
        note_result = scrub(note, secrets)
        confirmation = Confirmation.objects.create(
            team=team, memory=current, confirmed_by=confirmed_by, note=note_result.text
        )
        confirmers = (
            Confirmation.objects.filter(team=team, memory=current).values("confirmed_by").distinct().count()
        )
        # update(), not save(): a confirmation is not a change of the entry (updated_at stays).
        Memory.objects.filter(team=team, id=current.id).update(
            last_confirmed_at=confirmation.confirmed_at, confirmed_by_count=confirmers, anchor_broken_at=None
        )
        current.refresh_from_db(fields=["last_confirmed_at", "confirmed_by_count", "anchor_broken_at"])
        hooks.memory_confirmed.call(team_id=team.id, memory_id=current.id, confirmed_by=confirmed_by)
    _log_redactions(note_result, what=f"confirmation note of {key}", team=team)
    logger.info("memory %s of team %s confirmed by %s", key, team.slug, confirmed_by)
    return ConfirmResult(memory=current, confirmation=confirmation)


FRESHNESS_FLAGS = ("anchor_broken_at", "contradicted_at")


def set_freshness_flag(*, team: Team, memory_ids: list[uuid.UUID], flag: str, on: bool) -> int:
    """Set (to now) or clear a flag freshness cannot derive, on versions of the team:
    freshness's checks set them as they open a nudge and clear them as it is resolved.
    An UPDATE (updated_at stays); returns how many rows changed."""
    if flag not in FRESHNESS_FLAGS:
        raise ValueError(f"unknown freshness flag {flag!r}")
    rows = Memory.objects.filter(team=team, id__in=memory_ids)
    if on:
        return rows.filter(**{f"{flag}__isnull": True}).update(**{flag: timezone.now()})
    return rows.filter(**{f"{flag}__isnull": False}).update(**{flag: None})


def delete_team_memories(*, team: Team) -> dict[str, int]:
    """Every memory version and note of a team (the receiver of teams.hooks.team_shutdown;
    the caller is inside the team's scope). supersedes is PROTECT, since history must not
    silently lose links, so the chain is unlinked first, then deleted in one statement."""
    annotations = Annotation.objects.filter(team=team).delete()[0]
    Confirmation.objects.filter(team=team).delete()
    rows = Memory.objects.filter(team=team)
    rows.update(supersedes=None)
    return {"annotations": annotations, "memories": rows.delete()[0]}


def _log_refused_duplicate(team: Team, key: str, duplicate: DuplicateMatch) -> None:
    logger.info(
        "memory %s of team %s not saved: '%s' holds it (%s, %.3f)",
        key,
        team.slug,
        duplicate.memory.key,
        duplicate.matched_by,
        duplicate.similarity,
    )


def _log_redactions(redactions: ScrubResult, *, what: str, team: Team) -> None:
    if redactions.redactions:
        logger.warning("redacted %s from %s of team %s", dict(redactions.redactions), what, team.slug)
