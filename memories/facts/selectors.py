"""Reads of facts. Every function takes the team explicitly, and whether the reader may
see `high` facts (a read-only token may not: they are left out, or not found)."""

from __future__ import annotations

from datetime import datetime

from django.db.models import QuerySet

from core.compiled_once import CompiledOnce
from memories.facts.exceptions import FactNotFound
from memories.facts.models import Fact, FactQuerySet, Sensitivity


def _fact_query(rows: FactQuerySet, may_see_high: bool, entity: str, key: str) -> FactQuerySet:
    # At most one row answers (one active version per pair; one active at a time): no
    # ORDER BY, which .first() would add, so the lookup is the partial unique index alone.
    return rows.visible_to(may_see_high=may_see_high).filter(entity=entity, key=key)[:1]


_ACTIVE_FACT = {
    may_see_high: CompiledOnce(
        lambda team_id, entity, key, may_see_high=may_see_high: _fact_query(
            Fact.objects.for_team(team_id).active(), may_see_high, entity, key
        ),
        team_id=int,
        entity=str,
        key=str,
    )
    for may_see_high in (True, False)
}


def get_fact(
    *, team_id: int, entity: str, key: str, may_see_high: bool, as_of: datetime | None = None
) -> Fact:
    """The active version of `(entity, key)`, or with `as_of` the version active then.
    A `high` fact is not found by a reader that may not see it."""
    if as_of is None:  # the exact lookup agents make: its SQL compiled once
        fact = _ACTIVE_FACT[may_see_high].first(team_id=team_id, entity=entity, key=key)
    else:
        fact = next(
            iter(_fact_query(Fact.objects.for_team(team_id).active_at(as_of), may_see_high, entity, key)),
            None,
        )
    if fact is None:
        raise FactNotFound(
            "no active fact under this entity and key"
            if as_of is None
            else "no version of this fact was active at that time"
        )
    return fact


def list_facts(
    *,
    team_id: int,
    may_see_high: bool,
    entity: str | None = None,
    domain: str | None = None,
    scope: str | None = None,
    as_of: datetime | None = None,
) -> QuerySet[Fact]:
    """Active facts (with `as_of`, those active then), filtered by entity, by one domain
    (the fact lists it) and by scope; the caller orders them for its pages."""
    rows = Fact.objects.for_team(team_id)
    rows = rows.active() if as_of is None else rows.active_at(as_of)
    rows = rows.visible_to(may_see_high=may_see_high)
    if entity is not None:
        rows = rows.filter(entity=entity)
    if domain is not None:
        rows = rows.filter(domains__contains=[domain])
    if scope is not None:
        rows = rows.filter(scope=scope)
    return rows


def entity_facts(
    *, team_id: int, entity: str, may_see_high: bool, as_of: datetime | None = None
) -> QuerySet[Fact]:
    """The entity's active facts (or those active at `as_of`). An entity is known by its
    facts: one with none that the reader may see is not found."""
    rows = list_facts(team_id=team_id, may_see_high=may_see_high, entity=entity, as_of=as_of)
    if not rows.exists():
        raise FactNotFound("no facts about this entity")
    return rows


def fact_versions(*, team_id: int, entity: str, key: str, may_see_high: bool) -> QuerySet[Fact]:
    """Every version of `(entity, key)`, for its history (the caller orders and pages).
    A reader that may not see `high` facts gets none when the latest version is `high`
    (404: the fact does not exist for it), and never a `high` version."""
    rows = Fact.objects.for_team(team_id).filter(entity=entity, key=key)
    latest = rows.order_by("-created_at", "-id").values_list("sensitivity", flat=True).first()
    if latest is None or (latest == Sensitivity.HIGH and not may_see_high):
        raise FactNotFound("no fact under this entity and key")
    return rows.visible_to(may_see_high=may_see_high)


def successors_of(*, team_id: int, facts: list[Fact]) -> dict[object, Fact]:
    """The version that replaced each superseded fact of `facts`: one query."""
    ids = [fact.id for fact in facts if not fact.is_active and fact.deleted_at is None]
    if not ids:
        return {}
    return {row.supersedes_id: row for row in Fact.objects.for_team(team_id).filter(supersedes_id__in=ids)}
