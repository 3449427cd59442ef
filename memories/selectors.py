"""Reads of memories. Every function takes the team explicitly."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import QuerySet

from memories.exceptions import MemoryNotFound
from memories.models import Memory
from teams.models import Team


def list_memories(
    *, team: Team, memory_type: str | None = None, project: str | None = None
) -> QuerySet[Memory]:
    """Active memories, newest first."""
    rows = Memory.objects.for_team(team.id).active()
    if memory_type:
        rows = rows.filter(type=memory_type)
    if project is not None:
        rows = rows.filter(project=project)
    return rows.order_by("-created_at", "-id")


def get_active_memory(*, team: Team, key: str) -> Memory:
    memory = Memory.objects.for_team(team.id).active().filter(key=key).first()
    if memory is None:
        raise MemoryNotFound("no active memory under this key")
    return memory


@dataclass(frozen=True)
class HistoryEvent:
    kind: str  # created / hard / soft / deleted
    memory: Memory
    reason: str
    by: str
    at: datetime


def memory_history(*, team: Team, key: str) -> list[HistoryEvent]:
    """Every version ever saved under the key, as events, newest first. A deletion is
    its own event, so a key deleted and saved again reads as one continuous story."""
    versions = list(Memory.objects.for_team(team.id).filter(key=key).order_by("-created_at"))
    if not versions:
        raise MemoryNotFound("no memory was ever saved under this key")
    events: list[HistoryEvent] = []
    for version in versions:
        if version.deleted_at is not None:
            events.append(HistoryEvent("deleted", version, "", version.deleted_by, version.deleted_at))
        events.append(
            HistoryEvent(
                version.supersede_kind or "created",
                version,
                version.supersede_reason,
                version.updated_by,
                version.created_at,
            )
        )
    events.sort(key=lambda event: event.at, reverse=True)
    return events
