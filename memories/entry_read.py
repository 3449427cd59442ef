"""An agent's read of a key's active entry in one statement: the entry, its access
counted, and the notes shown with it. Each round trip is a point where the request's
thread waits for a core again, which a busy neighbour may hold, so the most common read
sends one statement where three would do the same (docs/operations.md, "The read path's
round trips")."""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Any

from django.utils import timezone

from core.compiled_once import CompiledOnce
from core.prepared_statements import model_instances
from memories.models import Annotation, Memory
from memories.selectors import MAX_ANNOTATIONS_SHOWN, find_active_memory_query
from teams.models import Team

# Set on the Memory read here: the notes to show with it, read in the same statement
# (memories.serializers.detail_payload reads them instead of asking again).
NOTES_ATTRIBUTE = "notes_read_with_it"

ACTIVE_ENTRY = CompiledOnce(
    lambda team_id, key: find_active_memory_query(team=Team(id=team_id), key=key), team_id=int, key=str
)


def read_active_entry_counted(*, team: Team, key: str) -> Memory | None:
    """The key's active entry with its access counted as memories.feedback.record_access
    counts it (a row a write holds locked is skipped, never waited for; the count shown
    is the one before plus this read) and its newest notes of any version of the key,
    as memories.selectors.annotations_for finds them. None when the key has no active
    entry."""
    entry_sql, entry_params = ACTIVE_ENTRY.sql_with_params(team_id=team.id, key=key)
    now = timezone.now()
    sql = f"""
        WITH entry AS ({entry_sql}),
        counted AS (
            UPDATE memories_memory SET access_count = access_count + 1, last_accessed_at = %s
            WHERE id IN (
                SELECT id FROM memories_memory WHERE team_id = %s AND id IN (SELECT id FROM entry)
                FOR NO KEY UPDATE SKIP LOCKED
            )
        )
        SELECT entry.*, (
            SELECT coalesce(json_agg(shown ORDER BY shown.created_at DESC, shown.id DESC), '[]')
            FROM (
                SELECT a.id, a.team_id, a.memory_id, a.note, a.created_by, a.created_at
                FROM memories_annotation a
                JOIN memories_memory m ON m.id = a.memory_id AND m.team_id = a.team_id
                WHERE a.team_id = %s AND m.key = entry.key
                ORDER BY a.created_at DESC, a.id DESC
                LIMIT %s
            ) shown
        ) AS notes_json
        FROM entry
    """  # noqa: S608 (the fragment is the ORM's own compiled query; values are parameters)
    params: list[Any] = [*entry_params, now, team.id, team.id, MAX_ANNOTATIONS_SHOWN]
    memory = next(iter(model_instances(Memory, sql, params)), None)
    if memory is None:
        return None
    notes_json = vars(memory).pop("notes_json")
    setattr(memory, NOTES_ATTRIBUTE, [_annotation(row) for row in _json_rows(notes_json)])
    memory.last_accessed_at = now
    memory.access_count += 1
    return memory


def _json_rows(value: Any) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads(value) if isinstance(value, str) else value
    return rows


def _annotation(row: dict[str, Any]) -> Annotation:
    return Annotation(
        id=uuid.UUID(row["id"]),
        team_id=row["team_id"],
        memory_id=uuid.UUID(row["memory_id"]),
        note=row["note"],
        created_by=row["created_by"],
        created_at=datetime.fromisoformat(row["created_at"]),
    )
