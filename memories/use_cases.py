"""What the doors (REST, MCP, the dashboard) call for an agent's saves and reads: a
service or selector together with what every door must do around it (a key derived
from the text when none is given; a read that hands an entry to an agent counted as
an access), so that no door does the same thing its own way."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import datetime

from memories import feedback, selectors, skills, writes
from memories.entry_read import read_active_entry_counted
from memories.exceptions import MemoryNotFound
from memories.inputs import SaveArguments
from memories.keys import key_for_text
from memories.models import Memory
from teams.models import Team


def save_entry(*, team: Team, arguments: SaveArguments, updated_by: str) -> writes.SaveResult:
    """One save (memories.writes.save_memory), with a key derived from the text when
    none is given."""
    return writes.save_memory(team=team, updated_by=updated_by, **_keyed(team, arguments).as_kwargs())


def batch_entry(*, team: Team, index: int, arguments: SaveArguments) -> writes.BatchEntry:
    """One entry of a batch save (memories.writes.save_batch), keyed as save_entry keys it."""
    return writes.BatchEntry(index=index, **_keyed(team, arguments).as_kwargs())


def _keyed(team: Team, arguments: SaveArguments) -> SaveArguments:
    if arguments.key:
        return arguments
    return replace(arguments, key=key_for_text(team=team, content=arguments.content))


def read_entry(
    *, team: Team, key: str | None = None, version_id: uuid.UUID | None = None, as_of: datetime | None = None
) -> Memory:
    """The version an agent asked for, counted as an access: by `version_id` (of `key`
    when given), else the version of `key` active at `as_of`, else its active entry."""
    if version_id is not None:
        return counted_access(team=team, memory=_version(team, version_id, key))
    if key is None:
        raise ValueError("read_entry needs a key or a version id")
    if as_of is not None:
        return counted_access(team=team, memory=selectors.get_memory_as_of(team=team, key=key, as_of=as_of))
    memory = read_active_entry_counted(team=team, key=key)
    if memory is None:
        raise MemoryNotFound("no active memory under this key")
    return memory


def load_skill(*, team: Team, name: str) -> Memory:
    """The active entry carrying the skill, counted as an access."""
    return counted_access(team=team, memory=skills.get_skill(team=team, name=name))


def counted_access(*, team: Team, memory: Memory) -> Memory:
    """Count the entry handed to an agent as an access (one UPDATE), shown in it too."""
    memory.last_accessed_at = feedback.record_access(team=team, memory_ids=[memory.id])
    memory.access_count += 1
    return memory


def _version(team: Team, version_id: uuid.UUID, key: str | None) -> Memory:
    if key is None:
        key = Memory.objects.for_team(team.id).filter(id=version_id).values_list("key", flat=True).first()
        if key is None:
            raise MemoryNotFound("no such version")
    return selectors.get_memory_version(team=team, key=key, version_id=version_id)
