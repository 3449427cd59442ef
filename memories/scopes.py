"""Scopes: whom an entry is about, `team`, `project` or `user`, and the team's window for
each (docs/freshness.md, "Freshness state and windows").

A memory's scope is read through `memory_scope_kind` only: `user` for a personal entry
(its key starts with `@<username>`, memories.personal; the database sets its owner from
that), else `project` when its project is set, else `team`. A fact's scope is its `scope` string: "team",
"project:<name>" or "user:<username>" (`fact_scope_kind`).

A scope's window caps both how long an entry goes unconfirmed before it is due (with
its type's window: the shorter wins; a type that is never due stays never due) and its
search decay half-life (with the team's half-life: the shorter wins). Per team:
Team.scope_window_team_days (90 by default), scope_window_project_days (null: the
team's) and scope_window_user_days (30); null for team or user: no cap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from django.db.models import Q

from memories.personal import personal_owner_name
from teams.models import Team

ScopeKind = Literal["team", "project", "user"]
SCOPE_KINDS: tuple[ScopeKind, ...] = ("team", "project", "user")


def memory_scope_kind(memory: Any) -> ScopeKind:
    """The one reading of a memory's scope (module docstring)."""
    if personal_owner_name(memory.key) is not None:
        return "user"
    if getattr(memory, "project", ""):
        return "project"
    return "team"


def fact_scope_kind(scope: str) -> ScopeKind:
    if scope.startswith("user:"):
        return "user"
    if scope.startswith("project:"):
        return "project"
    return "team"


def memory_scope_q(kind: ScopeKind) -> Q:
    """memory_scope_kind's SQL form, for filters over many entries (the due job)."""
    owned = Q(owner__isnull=False)
    if kind == "user":
        return owned
    return ~owned & (Q(project="") if kind == "team" else ~Q(project=""))


@dataclass(frozen=True)
class ScopeWindows:
    """A team's window in days per scope (None: no cap)."""

    team: int | None = 90
    project: int | None = None  # None here means: the team's (for_team resolves it)
    user: int | None = 30

    @classmethod
    def for_team(cls, team: Team) -> ScopeWindows:
        team_days = team.scope_window_team_days
        project_days = team.scope_window_project_days
        return cls(
            team=team_days,
            project=project_days if project_days is not None else team_days,
            user=team.scope_window_user_days,
        )

    def days(self, kind: ScopeKind) -> int | None:
        return {"team": self.team, "project": self.project, "user": self.user}[kind]

    def cap(self, days: int | None, kind: ScopeKind) -> int | None:
        """A type's window within the scope's: the shorter; never due stays never due."""
        scope_days = self.days(kind)
        if days is None or scope_days is None:
            return days
        return min(days, scope_days)

    def half_life(self, half_life_days: float, kind: ScopeKind) -> float:
        """The search decay half-life of an entry of this scope: the team's, capped by the
        scope's window; decay off (0 or less) stays off."""
        scope_days = self.days(kind)
        if half_life_days <= 0 or scope_days is None:
            return half_life_days
        return min(half_life_days, float(scope_days))
