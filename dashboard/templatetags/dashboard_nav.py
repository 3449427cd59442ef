"""Template tags of the dashboard's shared layout (base.html) and its memory tables."""

from __future__ import annotations

from django import template

from dashboard import selectors
from memories.personal import entry_scope
from teams.models import Team

register = template.Library()


@register.simple_tag
def open_review_count(team: Team) -> str:
    """The nav's count of what waits for review (open nudges, pending drafts): "" for
    none, "N+" past the cap. Rendered inside the page's team scope (team_page renders
    within it)."""
    count = selectors.open_review_count(team=team)
    if count == 0:
        return ""
    return f"{selectors.OPEN_COUNT_CAP}+" if count > selectors.OPEN_COUNT_CAP else str(count)


@register.filter
def scope_of(entry: object) -> str:
    """An entry's scope as answers show it: team, project:<name> or user:<username>."""
    return entry_scope(name=getattr(entry, "key", ""), project=getattr(entry, "project", "") or "")
