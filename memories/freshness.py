"""Freshness: whether what a version says is still believed.

Every version carries `last_confirmed_at` (its creation, then each confirmation) and
two flags set by freshness's checks (`anchor_broken_at`, `contradicted_at`). Its state
is derived from them and from the team's windows, never stored:

- `contradicted`: a detected contradiction with another entry is open;
- `anchor_broken`: the last check of its anchor failed;
- `due`: unconfirmed for longer than its window;
- `fresh`: none of these.

In that order: the first that holds is the state. Only active versions have one (a
superseded or deleted version is history: null).

Windows are per team and per type (Team.freshness_*_days; null: never due). An entry
confirmed by two or more distinct actors gets at least the team's
`freshness_confirmed_days`. Then the entry's scope caps it (memories.scopes: the
shorter of the two; never due stays never due). This module lives in memories (not freshness) because memory
responses show the state; freshness's jobs use the same rules (`due_condition`).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from django.db import models
from django.db.models import Q

from memories.models import Memory
from memories.scopes import SCOPE_KINDS, ScopeKind, ScopeWindows, memory_scope_kind, memory_scope_q
from memories.types import MemoryType
from teams.models import Team

# Two distinct confirmers make a belief shared: it earns the longer window.
MANY_CONFIRMERS = 2


class Freshness(models.TextChoices):
    FRESH = "fresh"
    DUE = "due"
    ANCHOR_BROKEN = "anchor_broken"
    CONTRADICTED = "contradicted"


@dataclass(frozen=True)
class FreshnessWindows:
    """A team's windows in days per type (None: never due), and the floor for entries
    confirmed by MANY_CONFIRMERS or more distinct actors."""

    by_type: dict[str, int | None]
    confirmed_by_many: int | None
    scopes: ScopeWindows = field(default_factory=ScopeWindows)

    @classmethod
    def for_team(cls, team: Team) -> FreshnessWindows:
        return cls(
            scopes=ScopeWindows.for_team(team),
            by_type={
                MemoryType.CONTEXT: team.freshness_context_days,
                MemoryType.DECISION: team.freshness_decision_days,
                MemoryType.LESSON: team.freshness_lesson_days,
                MemoryType.REFERENCE: team.freshness_reference_days,
                MemoryType.HISTORICAL: team.freshness_historical_days,
                MemoryType.IDENTITY: team.freshness_identity_days,
            },
            confirmed_by_many=team.freshness_confirmed_days,
        )

    def window_days(self, memory_type: str, confirmed_by_count: int, scope: ScopeKind = "team") -> int | None:
        days = self.by_type.get(memory_type)
        if days is None:
            return None
        if confirmed_by_count >= MANY_CONFIRMERS and self.confirmed_by_many is not None:
            days = max(days, self.confirmed_by_many)
        return self.scopes.cap(days, scope)


def is_due(memory: Memory, windows: FreshnessWindows, now: dt.datetime) -> bool:
    days = windows.window_days(memory.type, memory.confirmed_by_count, memory_scope_kind(memory))
    return days is not None and memory.last_confirmed_at < now - dt.timedelta(days=days)


def freshness_of(memory: Memory, windows: FreshnessWindows, now: dt.datetime) -> str | None:
    """The version's state (see the module docstring); None for an inactive version."""
    if not memory.is_active:
        return None
    if memory.contradicted_at is not None:
        return Freshness.CONTRADICTED
    if memory.anchor_broken_at is not None:
        return Freshness.ANCHOR_BROKEN
    if is_due(memory, windows, now):
        return Freshness.DUE
    return Freshness.FRESH


def due_condition(windows: FreshnessWindows, now: dt.datetime) -> Q:
    """The SQL form of is_due for a team's active entries (the due job's filter): one
    branch per type that can be due and scope, each split on the many-confirmers floor."""
    branches = Q(pk__in=[])  # matches nothing: every type may be "never"
    for memory_type, days in windows.by_type.items():
        if days is None:
            continue
        for scope in SCOPE_KINDS:
            in_scope = memory_scope_q(scope)
            few = windows.window_days(memory_type, 0, scope)
            many = windows.window_days(memory_type, MANY_CONFIRMERS, scope)
            assert few is not None and many is not None  # noqa: S101 (days is not None)
            branches |= in_scope & Q(
                type=memory_type,
                confirmed_by_count__lt=MANY_CONFIRMERS,
                last_confirmed_at__lt=now - dt.timedelta(days=few),
            )
            branches |= in_scope & Q(
                type=memory_type,
                confirmed_by_count__gte=MANY_CONFIRMERS,
                last_confirmed_at__lt=now - dt.timedelta(days=many),
            )
    return branches
