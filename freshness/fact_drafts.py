"""Fact drafts (docs/freshness.md, "Fact drafts"): what an extraction does with the facts
it proposes, and how a fact draft is accepted. freshness.drafts calls these under its
own lock and transaction; a fact is only ever written by memories.facts.services.set_fact.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field

from django.utils import timezone

from core.errors import Conflict, InvalidInput
from freshness import fact_contradictions
from freshness.draft_extraction.transcript import FactCandidate
from freshness.models import Draft, DraftKind, DraftState, Nudge
from memories.facts import services as fact_services
from memories.facts.exceptions import FactConflict
from memories.facts.models import Fact
from teams.models import Team


class DraftFactTaken(Conflict):
    """Accepting the fact draft would replace another active value: that takes a reason."""

    code = "draft_fact_exists"


@dataclass
class FactDrafting:
    drafts: list[Draft] = field(default_factory=list)  # unsaved: the caller creates them
    pending_seen_again: list[Draft] = field(default_factory=list)  # for the caller to corroborate
    confirmed_facts: list[Fact] = field(default_factory=list)
    fact_nudges: list[Nudge] = field(default_factory=list)


def fact_fingerprint(entity: str, key: str, value: str) -> str:
    """One proposed fact however often it is extracted: its entity, key and value, case
    and spacing aside (fact_contradictions.same_value)."""
    normal = fact_contradictions.normal_value(value)
    return hashlib.sha256(f"fact\x00{entity}\x00{key}\x00{normal}".encode()).hexdigest()


def draft_facts(
    *,
    team: Team,
    candidates: list[FactCandidate],
    session: str,
    extractor: str,
    actor: str,
    excerpt: Callable[[tuple[int, int]], str],
) -> FactDrafting:
    """Each proposed fact against the team's active fact of its (entity, key): the same
    value confirms it (no draft); another value opens a fact_contradiction nudge (no
    draft: the nudge is the question); none makes a pending fact draft, unless a pending
    draft of the same fact exists (returned to be corroborated)."""
    out = FactDrafting()
    if not candidates:
        return out
    active = {
        (f.entity, f.key): f
        for f in Fact.objects.for_team(team.id)
        .active()
        .filter(entity__in={c.entity for c in candidates}, key__in={c.key for c in candidates})
    }
    by_print: dict[str, FactCandidate] = {}
    for candidate in candidates:
        current = active.get((candidate.entity, candidate.key))
        if current is not None:
            if fact_contradictions.same_value(current.value, candidate.value):
                out.confirmed_facts.append(current)
            else:
                nudge = fact_contradictions.open_fact_contradiction(
                    team=team, fact=current, extracted_value=candidate.value, source_session=session
                )
                if nudge is not None:
                    out.fact_nudges.append(nudge)
            continue
        by_print.setdefault(fact_fingerprint(candidate.entity, candidate.key, candidate.value), candidate)
    pending = {
        d.fingerprint: d
        for d in Draft.objects.filter(
            team=team, state=DraftState.PENDING, kind=DraftKind.FACT, fingerprint__in=list(by_print)
        ).order_by("-created_at")
    }
    out.pending_seen_again = [pending[f] for f in by_print if f in pending]
    out.drafts = [
        Draft(
            team=team,
            kind=DraftKind.FACT,
            type="fact",
            key=f"{c.entity}/{c.key}"[:200],
            content=f"{c.entity}/{c.key} = {c.value}",
            entity=c.entity,
            fact_key=c.key,
            value=c.value,
            why=c.why[:200],
            source_start=c.source_span[0],
            source_end=c.source_span[1],
            source_excerpt=excerpt(c.source_span),
            source_session=session,
            extractor=extractor,
            created_by=actor[:200],
            fingerprint=fingerprint,
        )
        for fingerprint, c in by_print.items()
        if fingerprint not in pending
    ]
    return out


def accept_fact_draft(*, team: Team, draft: Draft, actor: str, value: str | None) -> Draft:
    """Set the locked pending fact draft's fact (`value` edits it) with the draft as its
    provenance (source_draft, its session, the reviewer)."""
    new_value = value if value is not None else draft.value
    if not isinstance(new_value, str) or "\x00" in new_value or not new_value.strip():
        raise InvalidInput("value must be non-empty text without NUL characters", field="value")
    try:
        result = fact_services.set_fact(
            team=team,
            entity=draft.entity,
            key=draft.fact_key,
            value=new_value,
            actor=actor,
            session=draft.source_session[:64],
            source_draft=draft.id,
        )
    except FactConflict:
        # The value is not repeated: the fact may be `high`, and errors travel far.
        raise DraftFactTaken(
            f"'{draft.entity}/{draft.fact_key}' has another active value since this draft was made; "
            "reject the draft, or change the fact on its page with a reason",
            field="value",
        ) from None
    draft.state = DraftState.ACCEPTED
    draft.reviewed_at = timezone.now()
    draft.reviewed_by = actor[:200]
    draft.fact = result.fact
    draft.value = result.fact.value
    draft.content = f"{draft.entity}/{draft.fact_key} = {result.fact.value}"
    draft.save(update_fields=["state", "reviewed_at", "reviewed_by", "fact", "value", "content"])
    return draft
