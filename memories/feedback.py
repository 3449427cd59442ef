"""What agents and people tell MemoryHub about entries without changing them: reads
(access counts), votes and notes. None of these is a new version."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from core.errors import InvalidInput
from core.prepared_statements import prepared_cursor
from memories.exceptions import MemoryNotFound
from memories.locks import lock_active_memory
from memories.models import MAX_NOTE_LENGTH, Annotation, Memory
from teams.models import Team
from teams.scrubber import scrub
from teams.selectors import team_secret_values
from teams.validators import check_key

logger = logging.getLogger(__name__)


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
    # Prepared once hot, as a search's reads are (core.prepared_statements).
    with prepared_cursor(connection) as cursor:
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
        current = lock_active_memory(team, key)
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


def checked_note(note: str | None, *, required: bool = True) -> str:
    """A note (on an entry, or with a confirmation), stripped and within its limit
    (blank is refused when `required`). Every writer of notes checks them here."""
    note = (note or "").strip()
    if required and not note:
        raise InvalidInput("note must not be empty", field="note")
    if len(note) > MAX_NOTE_LENGTH:
        raise InvalidInput(f"note is limited to {MAX_NOTE_LENGTH} characters", field="note")
    return note


def annotate_memory(*, team: Team, key: str, note: str, created_by: str) -> AnnotateResult:
    """Attach a note to the active entry of a key, scrubbed of credentials like content."""
    check_key(key)
    note = checked_note(note)
    with transaction.atomic():
        scrubbed = scrub(note, team_secret_values(team_id=team.id))
        # The key lock keeps the note from landing on a version superseded meanwhile.
        current = lock_active_memory(team, key, lock_row=False)
        if current is None:
            raise MemoryNotFound("no active memory under this key")
        annotation = Annotation.objects.create(
            team=team, memory=current, note=scrubbed.text, created_by=created_by
        )
    if scrubbed.redactions:
        logger.warning("redacted %s from a note on %s of team %s", dict(scrubbed.redactions), key, team.slug)
    return AnnotateResult(annotation=annotation, redactions=scrubbed.as_list())
