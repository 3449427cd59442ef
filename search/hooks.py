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


memories_indexed: Hook[None] = Hook(
    "search.memories_indexed",
    """Active entries of one team were indexed with vectors of one model:
    `receiver(entries=list[IndexedEntry])`, one entry after a single save's indexing, a
    batch's after search.services.announce_indexed. Called by the worker after the
    vectors were committed, outside any transaction (a receiver scopes its own reads and
    writes, so a long pass holds no locks); a receiver's failure is logged and never
    fails the indexing, and a batch it failed on is announced again entry by entry
    (freshness looks for contradictions with the team's other entries).""",
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
