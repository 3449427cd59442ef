"""Hooks search calls and higher apps fill in (see core.hook and docs/architecture.md)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from core.hook import Hook


@dataclass(frozen=True)
class IndexedEntry:
    """An active entry whose vectors were just stored: which model's they are."""

    team_id: int
    memory_id: uuid.UUID
    model: str
    dimensions: int


memory_indexed: Hook[None] = Hook(
    "search.memory_indexed",
    """An active entry was indexed with vectors (search.services.index_memory):
    `receiver(entry=IndexedEntry)`. Called by the worker after the vectors were
    committed, inside the team's scope; a receiver's failure is logged and never fails
    the indexing (freshness looks for contradictions with the team's other entries).""",
)

texts_disagree: Hook[bool | None] = Hook(
    "search.texts_disagree",
    """Whether a text about to be saved disagrees with an active entry the duplicate
    check found near it: `receiver(team=Team, new_text=str, old_text=str,
    similarity=float) -> bool | None`; the first answer counts, None for "no opinion".
    A disagreeing pair ("the port is 5432" / "the port is 6432", 0.98 apart) is no
    duplicate: the save goes through and the contradiction flow takes it from there
    (freshness judges).""",
)
