"""Reads of nudges. Every function takes the team explicitly."""

from __future__ import annotations

from django.conf import settings
from django.db.models import QuerySet

from freshness.models import AnchorCheck, Nudge, NudgeState
from memories.models import Memory
from teams.models import Team

ANY_STATE = "all"
# What the list's `state` filter takes.
STATE_FILTER_CHOICES = [*NudgeState.values, ANY_STATE]


def list_nudges(*, team: Team, kind: str | None = None, state: str = NudgeState.OPEN) -> QuerySet[Nudge]:
    """The team's nudges, newest first, with the entries they concern; open ones unless
    `state` says otherwise ("all": every state)."""
    rows = Nudge.objects.filter(team=team).select_related("memory", "other_memory", "fact")
    if kind:
        rows = rows.filter(kind=kind)
    if state != ANY_STATE:
        rows = rows.filter(state=state)
    return rows.order_by("-created_at", "-id")


def list_anchored_entries(*, team: Team, anchor_type: str | None = None) -> QuerySet[Memory]:
    """The team's active entries with an anchor (of `anchor_type` when given)."""
    rows = Memory.objects.for_team(team.id).active().filter(anchor__isnull=False)
    if anchor_type:
        rows = rows.filter(anchor__type=anchor_type)
    return rows.only("id", "key", "anchor", "anchor_broken_at")


def anchor_checks_of(*, team: Team, key: str) -> tuple[Memory, list[AnchorCheck]] | None:
    """The active entry of `key` and its recorded anchor checks, newest first (at most
    MEMORYHUB_ANCHOR_KEEP_CHECKS are kept); None when the key has no active entry."""
    memory = Memory.objects.for_team(team.id).active().filter(key=key).first()
    if memory is None:
        return None
    checks = AnchorCheck.objects.filter(team=team, memory=memory).order_by("-checked_at", "-id")
    return memory, list(checks[: settings.MEMORYHUB_ANCHOR_KEEP_CHECKS])
