"""The single save: one version, in a transaction of its own (POST memories/, MCP
memory_save, the dashboard's editor, learnings, accepted drafts)."""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction

from memories import hooks
from memories.models import Memory
from memories.personal import PersonalNames
from memories.writes._pipeline import (
    UNSET,
    SaveResult,
    Unset,
    log_redactions,
    prepare,
    refused_duplicate,
    refuses_as_duplicate,
    store,
    wants_duplicate_check,
)
from teams.models import Team
from teams.selectors import team_secret_values


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
    skill_trigger: dict[str, Any] | Unset | None = UNSET,
    allow_duplicate: bool = False,
    expected_version: uuid.UUID | None = None,
    anchor: dict[str, Any] | Unset | None = UNSET,
    pinned: bool | None = None,
    inherit_pinned: bool = False,
    auto_captured: bool = False,
) -> SaveResult:
    """Insert a memory, or supersede the active one under the key when a reason is
    given. Raises MemoryExists (409) when an active entry exists and no reason is,
    StaleVersion (409) when `expected_version` is given and is not the active entry
    (someone changed it meanwhile), and SkillNameTaken (409) when another active entry
    carries the skill's name.

    On a supersede, a type, project, metadata, skill_trigger or anchor left out carries
    over from the entry being replaced: a correction of the text keeps what the entry is.
    The pin does not, unless `inherit_pinned` (`pinned` True or False sets it outright).
    `auto_captured`: the version comes from a session's draft, not from a writer.

    A new key whose text an active entry of the team already holds (unless
    `allow_duplicate`): a longer text supersedes that entry (soft, the reason names the
    new key); otherwise nothing is written and the result says which entry holds it
    (`saved` False). Superseding under an existing key is never a duplicate case.

    Locking: the duplicate check (which may embed) runs before any lock. Then the key's
    lock; for a duplicate being superseded, its key's lock (tried, never waited for) and
    row lock, re-checking that it is still active; last, for a skill, its name's lock.
    Calls memories.hooks.memory_written in the transaction (search indexes it after commit)."""
    secrets = team_secret_values(team_id=team.id)
    prepared = prepare(
        key=key,
        content=content,
        type_name=type_name,
        supersede_reason=supersede_reason,
        project=project,
        metadata=metadata,
        skill_trigger=skill_trigger,
        anchor=anchor,
        secrets=secrets,
        personal=PersonalNames(team.id),
        pinned=pinned,
        inherit_pinned=inherit_pinned,
        auto_captured=auto_captured,
    )
    duplicate = None
    if wants_duplicate_check(team=team, prepared=prepared, allow_duplicate=allow_duplicate):
        duplicate = hooks.find_duplicate.first(team=team, text=prepared.version.content, key=prepared.key)
        if duplicate is not None and refuses_as_duplicate(prepared, duplicate):
            return refused_duplicate(team=team, prepared=prepared, duplicate=duplicate)

    with transaction.atomic():
        result = store(
            team=team,
            prepared=prepared,
            duplicate=duplicate,
            expected_version=expected_version,
            updated_by=updated_by,
            secrets=secrets,
            active_count=lambda: Memory.objects.filter(team=team, is_active=True).count(),
        )
        hooks.memory_written.call(team_id=team.id, memory_id=result.memory.id)
    log_redactions(prepared.version.redactions, what=f"memory {key}", team=team)
    return result
