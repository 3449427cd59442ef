"""Reads of nudges. Every function takes the team explicitly."""

from __future__ import annotations

from django.db.models import QuerySet

from freshness.models import Nudge, NudgeState
from teams.models import Team

ANY_STATE = "all"
# What the list's `state` filter takes.
STATE_FILTER_CHOICES = [*NudgeState.values, ANY_STATE]


def list_nudges(*, team: Team, kind: str | None = None, state: str = NudgeState.OPEN) -> QuerySet[Nudge]:
    """The team's nudges, newest first, with the entries they concern; open ones unless
    `state` says otherwise ("all": every state)."""
    rows = Nudge.objects.filter(team=team).select_related("memory", "other_memory")
    if kind:
        rows = rows.filter(kind=kind)
    if state != ANY_STATE:
        rows = rows.filter(state=state)
    return rows.order_by("-created_at", "-id")
