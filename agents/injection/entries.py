"""What an injection block is made of: entries, the section each is in, and why it is
in or out."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

from memories.types import MemoryType
from teams.scrubber import SecretMatcher, scrub

INJECTED_TYPES = (MemoryType.IDENTITY, MemoryType.LESSON, MemoryType.DECISION, MemoryType.CONTEXT)
IncludedReason = Literal["identity", "pinned", "skill", "ranked", "relevant"]
Section = Literal["core", "pinned", "skill", "relevant"]
LeftOutReason = Literal["cap", "budget"]
SKILL_SECTION: Literal["skill"] = "skill"
PINNED_SECTION: Literal["pinned"] = "pinned"


@dataclass
class InjectionEntry:
    memory_id: uuid.UUID
    key: str
    type: str
    project: str
    content: str
    created_at: datetime
    section: Section
    rank: int  # core and skill: position in the injection order; relevant: in the search results
    reason: IncludedReason | LeftOutReason
    tokens: int | None = None  # the rendered block; None when never measured (left out by the cap)
    score: float | None = None  # relevant entries: the search score
    # Distinct confirmers of this version, and the newest confirmation's time (None when
    # nobody confirmed it: its last_confirmed_at is then only its creation).
    corroborated: int = 0
    verified_at: datetime | None = None


class _EntrySource(Protocol):
    """A Memory, or a row of the ranked read: what an entry is made from."""

    @property
    def id(self) -> uuid.UUID: ...
    @property
    def key(self) -> str: ...
    @property
    def type(self) -> str: ...
    @property
    def project(self) -> str: ...
    @property
    def content(self) -> str: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def confirmed_by_count(self) -> int: ...
    @property
    def last_confirmed_at(self) -> datetime: ...


def entry_from(
    row: _EntrySource,
    *,
    section: Section,
    rank: int,
    reason: IncludedReason | LeftOutReason,
    secrets: SecretMatcher,
    with_text: bool = True,
) -> InjectionEntry:
    """The entry, its text scrubbed (credential shapes and the team's vault secrets in
    `secrets`) before its tokens are counted: text saved before a scrubber rule or a
    vault secret existed never reaches an agent's prompt. Without `with_text` (an entry
    only listed as left out by the cap) the text is left empty, unread."""
    return InjectionEntry(
        memory_id=row.id,
        key=row.key,
        type=row.type,
        project=row.project,
        content=scrub(row.content, secrets).text if with_text else "",
        created_at=row.created_at,
        section=section,
        rank=rank,
        reason=reason,
        corroborated=row.confirmed_by_count,
        verified_at=row.last_confirmed_at if row.confirmed_by_count > 0 else None,
    )
