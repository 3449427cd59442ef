"""Hooks memories calls and higher apps fill in (see core.hook and docs/architecture.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from core.hook import Hook

if TYPE_CHECKING:
    from memories.models import Memory

MatchedBy = Literal["content_hash", "embedding"]


@dataclass(frozen=True)
class DuplicateMatch:
    """An active entry of the team that already holds a text about to be saved."""

    memory: Memory
    similarity: float
    matched_by: MatchedBy
    threshold: float


memory_written: Hook[None] = Hook(
    "memories.memory_written",
    """A new version of a memory was stored: `receiver(team_id=int, memory_id=UUID)`.
    Called inside the writing transaction; receivers defer their work with
    `transaction.on_commit` (search enqueues indexing).""",
)

memories_written: Hook[None] = Hook(
    "memories.memories_written",
    """Many new versions of one team were stored at once by a bulk write (the import):
    `receiver(team_id=int, memory_ids=list[UUID])`. The bulk counterpart of
    memory_written, called instead of it for each of those versions: a receiver of one
    registers for the other. Called inside the writing transaction; receivers defer
    their work with `transaction.on_commit` (search enqueues the indexing in batches).""",
)

find_duplicate: Hook[DuplicateMatch | None] = Hook(
    "memories.find_duplicate",
    """Which active entry of the team, of the same owner as `key` (memories.personal),
    already holds `text` (scrubbed): `receiver(team=Team, text=str, key=str) ->
    DuplicateMatch | None`; the first answer counts.
    Called before the save takes any lock (it may embed). search registers the
    content-hash and embedding checks.""",
)

find_duplicates: Hook[list[DuplicateMatch | None]] = Hook(
    "memories.find_duplicates",
    """The exact (content-hash) check of many texts at once (the batch save,
    memories.writes.save_batch): `receiver(team=Team, texts=list[str], keys=list[str]) ->
    list[DuplicateMatch | None]`,
    one answer per text in order; the first receiver's answer counts. Called before the
    batch takes any lock; it embeds nothing: the batch's near check runs after indexing
    (Memory.near_check_pending, memories.writes.settle_near_check).""",
)

memory_confirmed: Hook[None] = Hook(
    "memories.memory_confirmed",
    """The active entry of a key was confirmed as still true:
    `receiver(team_id=int, memory_id=UUID, confirmed_by=str)`. Called inside the
    confirming transaction (freshness resolves the entry's open due and anchor nudges).""",
)

memory_archived: Hook[None] = Hook(
    "memories.memory_archived",
    """The active entry of a key was archived (memories.writes.archive_memory):
    `receiver(team=Team, memory_id=UUID, archived_by=str)`. Called inside the archiving
    transaction (freshness closes the open nudges that name the entry).""",
)

conversation_stored: Hook[None] = Hook(
    "memories.conversation_stored",
    """A conversation was stored (memories.conversations.services.store_conversation, or an
    import): `receiver(team_id=int, conversation_id=UUID)`. Called inside the writing
    transaction; receivers defer their work with `transaction.on_commit` (search chunks
    and embeds its lines).""",
)
