"""Exact contradictions of facts (docs/freshness.md, "Fact contradictions"): a
conversation stated another value for a team's active fact. No judgement of text: two
values are the same when they are equal once whitespace is collapsed and case folded.

An extraction that finds another value opens a `fact_contradiction` nudge on the
active version (at most one open per version: a later extraction with yet another value
leaves the open one as it is). Its details keep the extracted value and the source
session; the current value is read from the fact. Resolving it: `supersede` sets the
extracted value through memories.facts.services.set_fact with the reason "from
conversation <session>"; `dismiss` keeps the fact. A `high` fact's values are never in
the nudge's message (which injection shows), and the doors show them only to readers
that may see `high` facts (nudge_fact_payload).
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction

from core.errors import InvalidInput
from freshness.models import Nudge, NudgeKind, NudgeState
from memories.facts import services as fact_services
from memories.facts.exceptions import FactConflict
from memories.facts.models import Fact, Sensitivity
from teams.models import Team

MAX_SHOWN_VALUE_CHARS = 200


def normal_value(value: str) -> str:
    return " ".join(value.split()).casefold()


def same_value(left: str, right: str) -> bool:
    return normal_value(left) == normal_value(right)


def contradiction_message(fact: Fact, extracted_value: str) -> str:
    """What the nudge says; a `high` fact's values are left out (injection shows this)."""
    name = f"{fact.entity}/{fact.key}"
    if fact.sensitivity == Sensitivity.HIGH:
        return (
            f"A conversation states another value for the fact {name} (values hidden: high sensitivity). "
            "Supersede it with the new value, or dismiss to keep it."
        )
    return (
        f"The fact {name} is '{_cut(fact.value)}'; a conversation says '{_cut(extracted_value)}'. "
        "Supersede it with the new value, or dismiss to keep it."
    )


def open_fact_contradiction(
    *, team: Team, fact: Fact, extracted_value: str, source_session: str
) -> Nudge | None:
    """Open the fact's contradiction nudge; None when one is open for this version."""
    if Nudge.objects.filter(
        team=team, kind=NudgeKind.FACT_CONTRADICTION, fact=fact, state=NudgeState.OPEN
    ).exists():
        return None
    details = {
        "entity": fact.entity,
        "key": fact.key,
        "extracted_value": extracted_value,
        "source_session": source_session,
    }
    try:
        with transaction.atomic():  # a concurrent extraction may have opened it
            return Nudge.objects.create(
                team=team,
                kind=NudgeKind.FACT_CONTRADICTION,
                fact=fact,
                message=contradiction_message(fact, extracted_value),
                details=details,
            )
    except IntegrityError:
        return None


def supersede_from_nudge(team: Team, nudge: Nudge, actor: str) -> None:
    """The conversation's value wins: a new version through the fact service, only over
    the version the nudge is about (a fact that moved on since is not overwritten)."""
    fact = nudge.fact
    value = (nudge.details or {}).get("extracted_value")
    if fact is None or not isinstance(value, str) or not value.strip():
        raise InvalidInput("this nudge names no fact value to set", field="action")
    active = Fact.objects.for_team(team.id).active().filter(id=fact.id).exists()
    if not active:
        raise _moved_on(fact)
    session = str((nudge.details or {}).get("source_session") or "")
    reason = f"from conversation {session}" if session else "from a conversation"
    try:
        result = fact_services.set_fact(
            team=team,
            entity=fact.entity,
            key=fact.key,
            value=value,
            actor=actor,
            session=session[:64],
            reason=reason,
        )
    except FactConflict:  # never: a reason is given
        raise _moved_on(fact) from None
    if result.superseded is None or result.superseded.id != fact.id:
        raise _moved_on(fact)  # the fact moved on between the check and the lock
    nudge.details = {**nudge.details, "superseded_by": str(result.fact.id)}
    nudge.save(update_fields=["details"])


class FactMovedOn(InvalidInput):
    """The fact changed since the nudge was made (the same code as the other nudges' flows)."""

    code = "action_not_applicable"


def _moved_on(fact: Fact) -> FactMovedOn:
    return FactMovedOn(
        f"the fact {fact.entity}/{fact.key} changed since this nudge was made: dismiss it", field="action"
    )


def nudge_fact_payload(nudge: Nudge, *, may_see_high: bool) -> dict[str, Any] | None:
    """The fact a fact_contradiction nudge is about, as the doors show it: its current
    and the extracted value, both null for a `high` fact when the reader may not see it."""
    fact = nudge.fact
    if fact is None:
        return None
    hidden = fact.sensitivity == Sensitivity.HIGH and not may_see_high
    extracted = (nudge.details or {}).get("extracted_value")
    return {
        "id": fact.id,
        "entity": fact.entity,
        "key": fact.key,
        "sensitivity": fact.sensitivity,
        "is_active": fact.is_active,
        "current_value": None if hidden else fact.value,
        "extracted_value": None if hidden else extracted,
    }


def shown_details(nudge: Nudge) -> dict[str, Any]:
    """A nudge's details without the extracted value (nudge_fact_payload shows it, to
    readers that may see it)."""
    return {k: v for k, v in (nudge.details or {}).items() if k != "extracted_value"}


def _cut(value: str) -> str:
    flat = " ".join(value.split())
    return flat if len(flat) <= MAX_SHOWN_VALUE_CHARS else flat[: MAX_SHOWN_VALUE_CHARS - 1] + "…"
