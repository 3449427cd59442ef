"""Step 2 of an injection, fit within the cap and the budget.

The walk down the ranking includes an entry when the entry cap is not reached and its
block (plus its type's heading, if it is the first of its type) fits the remaining
token budget; an entry that does not fit is left out (`budget`) and the walk goes on,
so a smaller entry further down may still fit; once the cap is reached, the rest is
left out (`cap`). Identity entries are never left out, whatever they cost.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from django.core.cache import cache

from agents.injection.entries import (
    PINNED_SECTION,
    SKILL_SECTION,
    IncludedReason,
    InjectionEntry,
    Section,
    entry_from,
)
from agents.injection.ranking import PINNED_GROUP, SKILL_GROUP, RankedRow
from agents.injection.rendering import SECTION_HEADINGS, TITLE, block_tokens, tokens_of
from core.redis_outage import note_redis_failure, redis_skipped
from memories.types import MemoryType
from teams.models import Team
from teams.scrubber import SecretMatcher

logger = logging.getLogger("agents.injection")

WARN_SHARE = (4, 5)  # warn when the candidates reach 4/5 of the cap
# Every response carries the warning; the log has it once an hour per team and project:
# a team near its cap is news once, not at every session start of every agent.
CAP_WARNING_LOG_SECONDS = 3600


@dataclass
class Fit:
    """The entries in and out so far, and the tokens the included ones use (with the
    title and the headings)."""

    included: list[InjectionEntry] = field(default_factory=list)
    left_out: list[InjectionEntry] = field(default_factory=list)
    used: int = 0


def fit_ranked(rows: list[RankedRow], *, cap: int, budget: int, secrets: SecretMatcher) -> Fit:
    """Walk the ranked rows in order, within `cap` entries and `budget` tokens."""
    fit = Fit(used=tokens_of(TITLE))
    headed: set[str] = set()
    for row in rows:
        section, reason = _placement(row)
        never_dropped = reason == "identity"
        if not never_dropped and len(fit.included) >= cap:
            # Listed by key, type and rank only: its text is neither shown nor measured.
            fit.left_out.append(
                entry_from(
                    row, section=section, rank=row.position, reason="cap", secrets=secrets, with_text=False
                )
            )
            continue
        entry = entry_from(row, section=section, rank=row.position, reason=reason, secrets=secrets)
        heading = entry.section if entry.section in (SKILL_SECTION, PINNED_SECTION) else entry.type
        entry.tokens = block_tokens(entry)
        cost = entry.tokens + (0 if heading in headed else tokens_of(SECTION_HEADINGS[heading]))
        if not never_dropped and fit.used + cost > budget:
            entry.reason = "budget"
            fit.left_out.append(entry)
            continue
        fit.included.append(entry)
        headed.add(heading)
        fit.used += cost
    return fit


def _placement(row: RankedRow) -> tuple[Section, IncludedReason]:
    """The section a ranked row goes in, and why it is in."""
    if row.grp == SKILL_GROUP:
        return SKILL_SECTION, "skill"
    if row.grp == PINNED_GROUP:
        return PINNED_SECTION, "pinned"
    return "core", "identity" if row.type == MemoryType.IDENTITY else "ranked"


def limit_warnings(
    *, team: Team, fit: Fit, cap: int, budget: int, candidates: int, has_skills: bool, project: str | None
) -> list[str]:
    """What the caller should know about the limits: identity alone over the cap or
    the budget, and candidates at 80% of the cap (also logged: the team should prune)."""
    warnings = []
    identities = [e for e in fit.included if e.reason == "identity"]
    if identities and len(identities) > cap:
        warnings.append(
            f"{len(identities)} identity entries are over the cap of {cap} entries; identity is never dropped"
        )
    if identities and fit.used > budget:
        warnings.append(
            f"identity entries alone use {fit.used} tokens, over the budget of {budget}; "
            "identity is never dropped"
        )
    if candidates * WARN_SHARE[1] >= cap * WARN_SHARE[0] and candidates:
        message = (
            f"{candidates} active identity, lesson, decision and context entries"
            f"{' and always-on skills' if has_skills else ''}{_project_words(project)} reach 80% of the "
            f"injection cap of {cap}: entries past the cap are left out (they stay searchable); "
            "consider marking old ones historical"
        )
        if _first_in_a_while(f"injection-cap-warning:{team.id}:{project}"):
            logger.warning("team %s: %s", team.slug, message)
        warnings.append(message)
    return warnings


def _first_in_a_while(key: str) -> bool:
    """True once per CAP_WARNING_LOG_SECONDS for `key`; True too when the cache is down
    (its calls are bounded, and skipped while Redis is marked down: core.redis_outage)."""
    if redis_skipped():
        return True
    try:
        return bool(cache.add(key, 1, timeout=CAP_WARNING_LOG_SECONDS))
    except Exception as error:  # a cache outage must not silence the warning nor fail injection
        note_redis_failure("the injection cap warning's mark", error)
        return True


def _project_words(project: str | None) -> str:
    if project is None:
        return ""
    return f" of project '{project}' or no project" if project else " with no project"
