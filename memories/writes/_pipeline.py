"""The stages of the write pipeline, private to memories.writes: its drivers (a single
save, a batch, an import) run them and differ only in how they batch.

    prepare        validate and scrub (no query, but a personal name's check, once per driver)
    (duplicate)    the driver asks memories.hooks.find_duplicate(s), before any lock
    store          lock the key, read its active entry, check the expected version, the
                   conflict, a duplicate to supersede and the quota, then insert_version
    new_row        the version's row as it will be stored, built in Python: the carry-over
                   from the entry it replaces, the skill scrubbed and normalised, metadata
                   extracted and scrubbed. insert_version and the import's bulk path both
                   build every row here, so an import stores what a save stores
    already_holds  the one rule for "this key's entry already holds that" (batch, import)

Locking rule: see memories.locks (the key's advisory lock, then the active row; a
duplicate's key only tried; a skill's name last).
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

from core.errors import InvalidInput
from memories.anchors import normalise_anchor
from memories.cache_hint import vault_hint
from memories.exceptions import ContentTooLarge, MemoryExists, SkillNameTaken, StaleVersion, UnknownMemoryType
from memories.hooks import DuplicateMatch
from memories.locks import lock_active_memory, lock_skill_name, try_lock_key
from memories.metadata_extraction import with_extracted_metadata
from memories.models import MAX_CONTENT_BYTES, Memory, SupersedeKind
from memories.personal import PersonalNames
from memories.skills import active_skill_holder, normalise_skill_trigger
from memories.types import (
    DEFAULT_TYPE,
    MemoryType,
    TypeHint,
    alias_name,
    resolve_type,
    suggest_type,
    unknown_type_message,
)
from teams.models import Team
from teams.scrubber import ScrubResult, scrub, scrub_json
from teams.services import check_quota
from teams.validators import check_key

logger = logging.getLogger("memories.writes")

SOFT_SUPERSEDE_REASON = "minor correction"
MAX_METADATA_BYTES = 16 * 1024
MAX_REASON_LENGTH = 2000
# The metadata key holding where an imported version came from (docs/write-path.md,
# "Imports are written by the importer"). Provenance is not content: already_holds leaves it out.
PROVENANCE_KEY = "imported_from"


class Unset(Enum):
    UNSET = "unset"


# "Not given" for arguments where None means something (skill_trigger, anchor: None removes it).
UNSET = Unset.UNSET


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
    vault_hint: str | None = None
    redactions: list[dict[str, object]] = field(default_factory=list)
    saved: bool = True
    duplicate: DuplicateMatch | None = None
    unchanged: bool = False


@dataclass
class Version:
    """What the new version will hold; None means "carry over from the entry being
    replaced" (UNSET for the skill trigger and the anchor, whose None removes them)."""

    content: str
    memory_type: MemoryType | None
    project: str | None
    metadata: dict[str, Any] | None
    skill_trigger: dict[str, Any] | Unset | None
    anchor: dict[str, Any] | Unset | None
    redactions: ScrubResult
    # True / False pins or unpins; None: unpinned, unless `inherit_pinned` keeps the pin
    # of the entry being replaced.
    pinned: bool | None = None
    inherit_pinned: bool = False
    # The alias the type was given as ("" for a canonical name); None: carried over.
    original_type: str | None = None
    auto_captured: bool = False


@dataclass
class PreparedSave:
    """A write validated and scrubbed, before any lock."""

    key: str
    reason: str
    version: Version


def prepare(
    *,
    key: str,
    content: str,
    type_name: str | None,
    supersede_reason: str | None,
    project: str | None,
    metadata: dict[str, Any] | None,
    skill_trigger: dict[str, Any] | Unset | None,
    anchor: dict[str, Any] | Unset | None,
    secrets: list[str],
    personal: PersonalNames,
    pinned: bool | None = None,
    inherit_pinned: bool = False,
    auto_captured: bool = False,
) -> PreparedSave:
    """Validate and scrub a write; raises the save's domain errors. No query, but the
    personal key's check (`personal`: one per driver, so that a batch or an import reads
    who writes once, not once per entry)."""
    check_key(key)
    _refuse_credential_key(key)
    personal.check([key], field="key")
    reason = clean_reason(supersede_reason, field="supersede_reason", required=False)
    memory_type = None
    if type_name and type_name.strip():
        memory_type = resolve_type(type_name)
        if memory_type is None:
            raise UnknownMemoryType(unknown_type_message(type_name), field="type")
    if not content.strip():
        raise InvalidInput("content must not be empty", field="content")
    size = len(content.encode())
    if size > MAX_CONTENT_BYTES:
        raise ContentTooLarge(f"content is {size} bytes; the limit is {MAX_CONTENT_BYTES}", field="content")
    if metadata is not None and len(json.dumps(metadata).encode()) > MAX_METADATA_BYTES:
        raise InvalidInput(f"metadata is limited to {MAX_METADATA_BYTES} bytes", field="metadata")
    if isinstance(skill_trigger, dict):
        normalise_skill_trigger(skill_trigger)  # fail early, before any work
    if anchor is not UNSET:
        anchor = _credential_free_anchor(normalise_anchor(anchor))
    redactions = ScrubResult(text="")
    version = Version(
        content=scrubbed(content, secrets, redactions),
        memory_type=memory_type,
        project=project,
        metadata=metadata,
        skill_trigger=skill_trigger,
        anchor=anchor,
        redactions=redactions,
        pinned=pinned,
        inherit_pinned=inherit_pinned,
        original_type=alias_name(type_name) if memory_type is not None else None,
        auto_captured=auto_captured,
    )
    return PreparedSave(key=key, reason=reason, version=version)


def wants_duplicate_check(*, team: Team, prepared: PreparedSave, allow_duplicate: bool) -> bool:
    """A new key saved without a reason or allow_duplicate is checked for duplicates."""
    return not prepared.reason and not allow_duplicate and not _has_active_entry(team, prepared.key)


def refuses_as_duplicate(prepared: PreparedSave, duplicate: DuplicateMatch) -> bool:
    """A duplicate whose text is not longer than the entry holding it is not saved."""
    return len(prepared.version.content) <= len(duplicate.memory.content)


def refused_duplicate(*, team: Team, prepared: PreparedSave, duplicate: DuplicateMatch) -> SaveResult:
    logger.info(
        "memory %s of team %s not saved: '%s' holds it (%s, %.3f)",
        prepared.key,
        team.slug,
        duplicate.memory.key,
        duplicate.matched_by,
        duplicate.similarity,
    )
    return SaveResult(
        memory=duplicate.memory,
        saved=False,
        duplicate=duplicate,
        redactions=prepared.version.redactions.as_list(),
    )


def store(
    *,
    team: Team,
    prepared: PreparedSave,
    duplicate: DuplicateMatch | None,
    expected_version: uuid.UUID | None,
    updated_by: str,
    secrets: list[str],
    active_count: Callable[[], int],
    unchanged_ok: bool = False,
    finish: Callable[[Memory], None] | None = None,
) -> SaveResult:
    """The locked stages, in the caller's transaction: lock the key and read its active
    entry, check the expected version and the conflict, lock a duplicate being
    superseded, check the quota (`active_count`: the team's active entries now) for one
    more active entry, insert the version. Calls no hook.

    With `unchanged_ok` (batch, import), a key whose active entry already holds what this
    version would store is left as it is: `unchanged` in the result, nothing written.
    `finish` sets what the driver adds to the row before it is inserted (an import's votes)."""
    key, reason, version = prepared.key, prepared.reason, prepared.version
    current = lock_active_memory(team, key)
    if unchanged_ok and current is not None and already_holds(team, current, prepared, secrets):
        return SaveResult(
            memory=current, saved=False, unchanged=True, redactions=version.redactions.as_list()
        )
    check_expected_version(key, current, expected_version)
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
        check_memory_quota(team, active_count())
    soft = duplicate is not None or reason.lower() == SOFT_SUPERSEDE_REASON
    row = new_row(
        team=team,
        prepared=replace(prepared, reason=reason),
        replaced=replaced,
        soft=soft,
        updated_by=updated_by,
        secrets=secrets,
        redactions=version.redactions,
    )
    if row.skill_trigger is not None:
        check_skill_name(team, row.skill_trigger["name"], replacing=replaced)
    if replaced is not None:
        replaced.is_active = False
        replaced.save(update_fields=["is_active", "updated_at"])
    if finish is not None:
        finish(row)
    row.save(force_insert=True)
    return SaveResult(
        memory=row,
        superseded=replaced,
        hint=suggest_type(row.content, MemoryType(row.type)),
        vault_hint=vault_hint(row.content),
        redactions=version.redactions.as_list(),
        duplicate=duplicate,
    )


def new_row(
    *,
    team: Team,
    prepared: PreparedSave,
    replaced: Memory | None,
    soft: bool,
    updated_by: str,
    secrets: list[str],
    redactions: ScrubResult,
) -> Memory:
    """The new version's row, not inserted: what a save stores. What the version leaves
    out is carried over from `replaced` (a correction of the text keeps what the entry
    is); the skill is scrubbed like metadata and normalised (a name that was a credential
    is no longer a valid name: refused); extracted metadata is recomputed for the text,
    then scrubbed. Redactions are added to `redactions`. No query."""
    version = prepared.version if replaced is None else carried_over(prepared.version, replaced)
    skill = None
    if isinstance(version.skill_trigger, dict):
        skill = scrubbed_skill(version.skill_trigger, secrets, redactions)
    metadata, metadata_scrub = scrub_json(with_extracted_metadata(version.content, version.metadata), secrets)
    redactions.redactions.update(metadata_scrub.redactions)
    return Memory(
        team=team,
        key=prepared.key,
        content=version.content,
        type=version.memory_type or DEFAULT_TYPE,
        project=version.project or "",
        metadata=metadata,
        skill_trigger=skill,
        anchor=None if isinstance(version.anchor, Unset) else version.anchor,
        pinned=bool(version.pinned),
        original_type=version.original_type or "",
        auto_captured=version.auto_captured,
        supersedes=replaced,
        supersede_reason=prepared.reason if replaced is not None else "",
        supersede_kind=supersede_kind(superseding=replaced is not None, soft=soft),
        updated_by=updated_by,
        content_hash=Memory.hash_content(version.content),
    )


def supersede_kind(*, superseding: bool, soft: bool) -> str:
    return "" if not superseding else SupersedeKind.SOFT if soft else SupersedeKind.HARD


def already_holds(team: Team, current: Memory, prepared: PreparedSave, secrets: list[str]) -> bool:
    """Whether the key's entry `current` holds what `prepared` would store: the same text,
    and the same type, project, metadata (without an import's provenance), skill and
    anchor after the carry-over. The one rule of the batch save's and the import's
    `unchanged`."""
    if current.content != prepared.version.content:
        return False
    row = new_row(
        team=team,
        prepared=prepared,
        replaced=current,
        soft=False,
        updated_by="",
        secrets=secrets,
        redactions=ScrubResult(text=""),
    )
    return (
        row.type,
        row.project,
        without_provenance(row.metadata),
        row.skill_trigger,
        row.anchor,
        row.pinned,
    ) == (
        current.type,
        current.project,
        without_provenance(current.metadata),
        current.skill_trigger,
        current.anchor,
        current.pinned,
    )


def without_provenance(metadata: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in metadata.items() if name != PROVENANCE_KEY}


def carried_over(version: Version, replaced: Memory) -> Version:
    return replace(
        version,
        memory_type=MemoryType(replaced.type) if version.memory_type is None else version.memory_type,
        project=replaced.project if version.project is None else version.project,
        metadata=replaced.metadata if version.metadata is None else version.metadata,
        skill_trigger=replaced.skill_trigger if version.skill_trigger is UNSET else version.skill_trigger,
        anchor=replaced.anchor if version.anchor is UNSET else version.anchor,
        pinned=(replaced.pinned and version.inherit_pinned) if version.pinned is None else version.pinned,
        original_type=replaced.original_type if version.original_type is None else version.original_type,
    )


def scrubbed_skill(trigger: dict[str, Any], secrets: list[str], redactions: ScrubResult) -> dict[str, Any]:
    """The trigger scrubbed of credentials like metadata (a name that was one is no
    longer a valid name: refused), then normalised."""
    clean, result = scrub_json(trigger, secrets)
    redactions.redactions.update(result.redactions)
    return normalise_skill_trigger(clean)


def check_skill_name(team: Team, name: str, *, replacing: Memory | None) -> None:
    """Under the name's lock (the partial unique index is the guarantee; this is the
    friendly 409): no other active entry may carry the name."""
    lock_skill_name(team.id, name)
    holder = active_skill_holder(team_id=team.id, name=name)
    if holder is not None and (replacing is None or holder.id != replacing.id):
        raise skill_name_taken(holder, name)


def skill_name_taken(holder: Memory, name: str) -> SkillNameTaken:
    return SkillNameTaken(
        f"the active entry '{holder.key}' already carries the skill '{name}'; supersede that "
        "entry to change the skill, or pick another name",
        current=holder,
    )


def check_memory_quota(team: Team, used: int) -> None:
    """One more active entry, with `used` active now."""
    check_quota(
        team=team,
        quota="memories",
        used=used,
        limit=settings.MEMORYHUB_QUOTA_MEMORIES,
        what="active memories",
    )


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


def scrubbed(text: str, secrets: list[str], redactions: ScrubResult) -> str:
    result = scrub(text, secrets)
    redactions.redactions.update(result.redactions)
    return result.text


def _has_active_entry(team: Team, key: str) -> bool:
    """Unlocked peek: a save to a key with an active entry is a conflict or a
    supersede, never a duplicate case (re-checked under the key's lock)."""
    return Memory.objects.for_team(team.id).active().filter(key=key).exists()


def check_expected_version(key: str, current: Memory | None, expected: uuid.UUID | None) -> None:
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


def _refuse_credential_key(key: str) -> None:
    if scrub(key).redactions:
        # Keys are stored and shown as given (never scrubbed): one shaped like a
        # credential (`AKIA…`, `sk-…`, `password:…`) is refused, not saved.
        raise InvalidInput("the key looks like a credential; name what the memory is about", field="key")


def log_redactions(redactions: ScrubResult, *, what: str, team: Team) -> None:
    if redactions.redactions:
        logger.warning("redacted %s from %s of team %s", dict(redactions.redactions), what, team.slug)
