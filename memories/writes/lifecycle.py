"""Lifecycle writes of a key's versions, beside the save pipeline: delete, unsupersede,
archive and restore, confirm, freshness's flags, and a team's shutdown. Each takes the
key's lock and its active row like every writer of the key (memories.locks); none of
them is a save (only unsupersede inserts a row, a copy of an earlier version)."""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from memories import hooks
from memories.exceptions import MemoryExists, MemoryNotFound, NoPreviousVersion
from memories.feedback import checked_note
from memories.locks import lock_active_memory, lock_key
from memories.models import Annotation, Confirmation, Memory, SupersedeKind
from memories.writes._pipeline import (
    check_expected_version,
    check_memory_quota,
    check_skill_name,
    clean_reason,
    log_redactions,
    scrubbed_skill,
)
from teams.models import Team
from teams.scrubber import ScrubResult, scrub, scrub_json
from teams.selectors import team_secret_values
from teams.validators import check_key

logger = logging.getLogger(__name__)


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
            skill = scrubbed_skill(previous.skill_trigger, secrets, ScrubResult(text=""))
            check_skill_name(team, skill["name"], replacing=current)
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
        check_expected_version(key, current, expected_version)
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
            check_skill_name(team, str(latest.skill_trigger.get("name", "")), replacing=None)
        check_memory_quota(team, Memory.objects.filter(team=team, is_active=True).count())
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
    note = checked_note(note, required=False)
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
    log_redactions(note_result, what=f"confirmation note of {key}", team=team)
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
