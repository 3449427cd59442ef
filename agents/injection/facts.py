"""The "Facts" section of an injection: the team's facts, one line each, rendered
right after identity (docs/facts.md, "Injection").

Only `normal` facts go in (a `high` one never does), and only those of the team or of
the project asked for, as memories are filtered: `project` None takes every project's,
blank the team's alone, and the reader's personal ones (`user:<name>`): row-level
security shows a personal fact to its owner's tokens only (docs/tenancy.md, "Personal
entries"), so it reaches no one else's prompt.

Facts have the budget right after identity, but at most a quarter of it
(FACT_BUDGET_SHARE) and MAX_INJECTED_FACTS lines: they never crowd out the team's
lessons and decisions. The newest facts are taken first; the section lists them by
entity and key."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Q

from agents.injection.rendering import tokens_of
from memories.facts.models import Fact, Sensitivity
from teams.models import Team
from teams.scrubber import SecretMatcher, scrub

FACTS_HEADING = "### Facts"
FACT_BUDGET_SHARE = 4  # at most budget // FACT_BUDGET_SHARE tokens
MAX_INJECTED_FACTS = 50


@dataclass
class InjectedFact:
    entity: str
    key: str
    line: str
    tokens: int


def _line(fact: Fact, secrets: SecretMatcher) -> str:
    """`[FACT] [project-alpha/payments.provider]: Paddle`, continuation lines indented as
    an entry's are, so no line of a value can pass for a heading."""
    value = scrub(fact.value, secrets).text
    lines = value.replace("\r\n", "\n").replace("\r", "\n").strip().split("\n")
    body = "\n".join([lines[0], *(f"  {line}" if line.strip() else "" for line in lines[1:])])
    return f"[FACT] [{fact.entity}/{fact.key}]: {body}"


def _scope_filter(project: str | None) -> Q:
    own = Q(scope="team") | Q(owner__isnull=False)
    if project is None:
        return own | Q(scope__startswith="project:")
    if not project:
        return own
    return own | Q(scope=f"project:{project}")


def injectable_facts(*, team: Team, project: str | None, secrets: SecretMatcher) -> list[InjectedFact]:
    """The candidates, newest first, each rendered and counted."""
    rows = (
        Fact.objects.for_team(team.id)
        .active()
        .filter(sensitivity=Sensitivity.NORMAL)
        .filter(_scope_filter(project))
        .order_by("-created_at", "-id")
        .only("entity", "key", "value")[:MAX_INJECTED_FACTS]
    )
    facts = []
    for fact in rows:
        line = _line(fact, secrets)
        facts.append(InjectedFact(entity=fact.entity, key=fact.key, line=line, tokens=tokens_of(line)))
    return facts


def fit_facts(facts: list[InjectedFact], *, budget: int) -> tuple[list[InjectedFact], int]:
    """The facts that fit `budget` tokens with the section's heading (a fact that does
    not fit is skipped, and a shorter one after it may still fit), and the tokens they use."""
    heading = tokens_of(FACTS_HEADING)
    if not facts or heading >= budget:
        return [], 0
    taken, used = [], heading
    for fact in facts:
        if used + fact.tokens <= budget:
            taken.append(fact)
            used += fact.tokens
    if not taken:
        return [], 0
    return sorted(taken, key=lambda fact: (fact.entity, fact.key)), used


def render_facts(facts: list[InjectedFact]) -> list[str]:
    """The section's parts (the heading, then one line per fact), or none."""
    return [FACTS_HEADING, *(fact.line for fact in facts)] if facts else []
