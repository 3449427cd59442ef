"""Reads of memories. Every function takes the team explicitly."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import F, QuerySet, Window
from django.db.models.functions import RowNumber

from core.prepared_statements import model_columns, model_instances
from memories.exceptions import MemoryNotFound
from memories.metadata_extraction import metadata_filter_q
from memories.models import Annotation, Confirmation, Memory, MemoryState
from teams.models import Team

# Notes shown with an entry (GET of a key, search results, injection): the newest this
# many of the key. All of them are listed by GET memories/{key}/annotations/.
MAX_ANNOTATIONS_SHOWN = 20
# Confirmations shown per version in a key's history: the newest this many.
MAX_CONFIRMATIONS_SHOWN = 20


def list_memories(
    *,
    team: Team,
    memory_type: str | None = None,
    project: str | None = None,
    as_of: datetime | None = None,
    tags: list[str] | None = None,
    people: list[str] | None = None,
    include_archived: bool = False,
    topics: list[str] | None = None,
) -> QuerySet[Memory]:
    """Active memories, newest first; with `as_of`, the versions that were active then;
    with `include_archived`, the archived entries too (today's view only)."""
    rows = Memory.objects.for_team(team.id)
    if as_of is not None:
        rows = rows.active_at(as_of)
    elif include_archived:
        rows = rows.filter(MemoryState.ACTIVE.condition() | MemoryState.ARCHIVED.condition())
    else:
        rows = rows.active()
    if memory_type:
        rows = rows.filter(type=memory_type)
    if project is not None:
        rows = rows.filter(project=project)
    rows = rows.filter(metadata_filter_q(tags, people, topics))
    return rows.order_by("-created_at", "-id")


def get_active_memory(*, team: Team, key: str) -> Memory:
    memory = find_active_memory(team=team, key=key)
    if memory is None:
        raise MemoryNotFound("no active memory under this key")
    return memory


def get_memory_as_of(*, team: Team, key: str, as_of: datetime) -> Memory:
    """The version of the key that was active at `as_of` (what the team believed then)."""
    memory = Memory.objects.for_team(team.id).active_at(as_of).filter(key=key).first()
    if memory is None:
        raise MemoryNotFound("no version of this key was active at that time")
    return memory


def get_memory_version(*, team: Team, key: str, version_id: uuid.UUID) -> Memory:
    """One version of a key by id, whatever its state (history shows them all too)."""
    memory = Memory.objects.for_team(team.id).filter(key=key, id=version_id).first()
    if memory is None:
        raise MemoryNotFound("no such version of this key")
    return memory


def successors_of(*, team_id: int, memory_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, dict[str, Any]]:
    """Where the truth moved to, for superseded versions: {version id: the row that
    replaced it (id, key, reason, kind, is_active)}. One query; versions that were not
    replaced (active or deleted) have no entry."""
    ids = list(memory_ids)
    if not ids:
        return {}
    rows = model_instances(Memory, _SUCCESSORS, [team_id, ids])
    return {row.supersedes_id: successor_payload(row) for row in rows}  # type: ignore[misc]


_SUCCESSORS = (
    f"SELECT {model_columns(Memory, 'm')} FROM memories_memory m"  # noqa: S608 (constants)
    " WHERE m.team_id = %s AND m.supersedes_id = ANY(%s)"
)


def successor_payload(successor: Memory) -> dict[str, Any]:
    return {
        "id": str(successor.id),
        "key": successor.key,
        "reason": successor.supersede_reason,
        "kind": successor.supersede_kind,
        "is_active": successor.is_active,
    }


def annotations_for(
    team_id: int,
    memory_ids: Iterable[uuid.UUID],
    *,
    as_of: datetime | None = None,
    limit: int = MAX_ANNOTATIONS_SHOWN,
) -> dict[uuid.UUID, list[Annotation]]:
    """The notes to show with each given memory version, newest first, in ONE query.

    Notes belong to the key, not only to the version they were written on: every
    version of a key shows the newest `limit` notes written on any version of that key
    (each Annotation's `memory_id` says which). With `as_of`, only notes written by
    then. Every given id is a key of the answer; one without notes (or unknown to this
    team) maps to []."""
    ids = list(dict.fromkeys(memory_ids))
    if not ids:
        return {}
    when = "AND a.created_at <= %s" if as_of is not None else ""
    sql = f"""
        SELECT ranked.id, ranked.team_id, ranked.memory_id, ranked.note, ranked.created_by,
               ranked.created_at, wanted.id AS wanted_id
        FROM memories_memory wanted
        JOIN (
            SELECT a.*, m.key,
                   row_number() OVER (PARTITION BY m.key ORDER BY a.created_at DESC, a.id DESC) AS position
            FROM memories_annotation a JOIN memories_memory m ON m.id = a.memory_id AND m.team_id = a.team_id
            WHERE a.team_id = %s {when}
              AND m.key IN (SELECT key FROM memories_memory WHERE team_id = %s AND id = ANY(%s))
        ) ranked ON ranked.key = wanted.key
        WHERE wanted.team_id = %s AND wanted.id = ANY(%s) AND ranked.position <= %s
        ORDER BY ranked.created_at DESC, ranked.id DESC
    """  # noqa: S608 (the one fragment is a constant; values are parameters)
    params: list[Any] = [team_id, *([as_of] if as_of is not None else []), team_id, ids, team_id, ids, limit]
    notes: dict[uuid.UUID, list[Annotation]] = {memory_id: [] for memory_id in ids}
    for annotation in model_instances(Annotation, sql, params):
        # The extra `wanted_id` column is set on the instance; the model does not declare it.
        wanted_id: uuid.UUID = vars(annotation)["wanted_id"]
        notes[wanted_id].append(annotation)
    return notes


def list_annotations(*, team: Team, key: str) -> QuerySet[Annotation]:
    """Every note on any version of the key, newest first. Raises MemoryNotFound when
    no memory was ever saved under the key."""
    if not Memory.objects.for_team(team.id).filter(key=key).exists():
        raise MemoryNotFound("no memory was ever saved under this key")
    return Annotation.objects.filter(team_id=team.id, memory__team_id=team.id, memory__key=key).order_by(
        "-created_at", "-id"
    )


@dataclass(frozen=True)
class HistoryEvent:
    kind: str  # created / hard / soft / unsupersede / deleted / archived / confirmed
    memory: Memory
    reason: str
    by: str
    at: datetime

    @property
    def key(self) -> str:
        return self.memory.key


def history_events(
    versions: Iterable[Memory],
    deletions: Iterable[Memory],
    confirmations: Iterable[Confirmation] = (),
) -> list[HistoryEvent]:
    """The one way versions become history, newest first: each version is an event of
    its supersede kind ("created" when it replaced nothing), and each deleted version
    adds a "deleted" event of its own, so a key deleted and saved again reads as one
    continuous story (an archived one, likewise, an "archived" event). An unsupersede is
    a version of its own, never an edit. Each
    confirmation is a "confirmed" event of the version it confirmed (its note in
    `reason`): a confirmation is never a version."""
    events = [
        HistoryEvent("confirmed", c.memory, c.note, c.confirmed_by, c.confirmed_at) for c in confirmations
    ]
    events += [
        HistoryEvent(v.supersede_kind or "created", v, v.supersede_reason, v.updated_by, v.created_at)
        for v in versions
    ]
    events += [
        HistoryEvent("deleted", d, "", d.deleted_by, d.deleted_at)
        for d in deletions
        if d.deleted_at is not None
    ]
    # An archived version (the key's last) adds an "archived" event while it is archived.
    events += [
        HistoryEvent("archived", a, "", a.archived_by, a.archived_at)
        for a in deletions
        if a.archived_at is not None
    ]
    events.sort(key=lambda event: event.at, reverse=True)
    return events


def confirmations_for(
    *, team_id: int, memory_ids: Iterable[uuid.UUID], limit: int = MAX_CONFIRMATIONS_SHOWN
) -> list[Confirmation]:
    """The newest `limit` confirmations of each given version, in ONE query. A version
    is confirmed only while active, so its confirmations fall between its creation and
    its replacement: a page of versions brings exactly its own confirmations."""
    ids = list(dict.fromkeys(memory_ids))
    if not ids:
        return []
    ranked = (
        Confirmation.objects.filter(team_id=team_id, memory_id__in=ids)
        .select_related("memory")
        .annotate(
            position=Window(
                RowNumber(),
                partition_by=[F("memory_id")],
                order_by=[F("confirmed_at").desc(), F("id").desc()],
            )
        )
        .filter(position__lte=limit)
    )
    return list(ranked.order_by("-confirmed_at", "-id"))


def memory_history(*, team: Team, key: str) -> list[HistoryEvent]:
    """Every version ever saved under the key, as events, newest first."""
    versions = list(Memory.objects.for_team(team.id).filter(key=key).order_by("-created_at"))
    if not versions:
        raise MemoryNotFound("no memory was ever saved under this key")
    return history_events(versions, versions)


def list_memory_versions(*, team: Team, key: str) -> QuerySet[Memory]:
    """Every version ever saved under the key, newest first, for paging history: the
    versions of a key follow one another (a version is deleted or replaced before the
    next one is saved), so the events of a page of versions (`history_events(page,
    page)`) come before every event of the next page."""
    versions = Memory.objects.for_team(team.id).filter(key=key)
    if not versions.exists():
        raise MemoryNotFound("no memory was ever saved under this key")
    return versions.order_by("-created_at", "-id")


def recent_history(*, team: Team, limit: int, changes_only: bool = False) -> list[HistoryEvent]:
    """The team's newest history events across keys (at most `limit`); with
    `changes_only`, first saves of a key are left out (the supersede audit)."""
    memories = Memory.objects.for_team(team.id)
    versions = memories.exclude(supersede_kind="") if changes_only else memories
    newest_versions = versions.order_by("-created_at", "-id")[:limit]
    newest_deletions = memories.in_state(MemoryState.DELETED).order_by("-deleted_at", "-id")[:limit]
    return history_events(newest_versions, newest_deletions)[:limit]


def history_successors(events: list[HistoryEvent], *, team_id: int) -> dict[uuid.UUID, dict[str, Any]]:
    """successors_of for a key's history, in one query. Not derived from the versions
    loaded: a version may be replaced by a version of another key (a longer duplicate
    saved under a new key, or an unsupersede restoring an entry of another key)."""
    return successors_of(
        team_id=team_id,
        memory_ids=dict.fromkeys(
            e.memory.id
            for e in events
            if e.kind not in ("deleted", "archived")
            and not e.memory.is_active
            and e.memory.archived_at is None
        ),
    )


def find_active_memory(*, team: Team, key: str) -> Memory | None:
    return find_active_memory_query(team=team, key=key).first()


def find_active_memory_query(*, team: Team, key: str) -> QuerySet[Memory]:
    """The key's active entry (at most one row: a constraint keeps it so)."""
    return Memory.objects.for_team(team.id).active().filter(key=key).order_by("pk")[:1]


def key_was_saved(*, team: Team, key: str) -> bool:
    """Whether any version was ever saved under the key (active, superseded or deleted)."""
    return Memory.objects.for_team(team.id).filter(key=key).exists()


def replaced_version(*, team: Team, memory: Memory) -> Memory | None:
    """The version `memory` superseded, if any."""
    if memory.supersedes_id is None:
        return None
    return Memory.objects.for_team(team.id).filter(id=memory.supersedes_id).first()


def history_page(
    *, team_id: int, versions: list[Memory]
) -> tuple[list[HistoryEvent], dict[uuid.UUID, dict[str, Any]]]:
    """The events of a page of a key's versions (list_memory_versions), with each
    version's newest confirmations, and the successors they name (for
    `superseded_by`): what every door shows of a key's history."""
    confirmations = confirmations_for(team_id=team_id, memory_ids=[v.id for v in versions])
    events = history_events(versions, versions, confirmations)
    return events, history_successors(events, team_id=team_id)
