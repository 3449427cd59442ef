"""Prompt injection: the block of memory an agent puts at the top of its prompt.

What goes in, in this order (the *rank*):

1. every active `identity` entry, never dropped (not by the entry cap, not by the token
   budget: an agent that forgets who it is does worse than one over budget);
2. active pinned entries of any other type (any type: a pinned reference is injected
   too), newest first, ahead of everything below, within the cap and the budget (the
   "Pinned" section; memories.models.Memory.pinned);
3. active always_on skills (see memories.skills), newest first, of any type but
   identity (an identity skill stays in 1, never dropped), where they fire: a skill with
   `projects` only when one of them is the project asked for (the entry's own `project`
   does not matter here). An always-on skill goes in through this section only (never
   twice, and not at all where it does not fire). Like every entry after identity,
   skills count against the cap and the budget;
4. active `lesson` entries, newest first;
5. active `decision` entries, newest first;
6. active `context` entries, newest first (decisions before context: what the team
   settled outranks what is merely going on, as the seed orders them).

The team's `normal` facts go in a section of their own right after identity, one line
each, within at most a quarter of the budget (agents.injection.facts; docs/facts.md).

Other `reference` and `historical` entries are not injected: they are looked up
through search when needed. With a query, a "relevant" section adds the best search results
(any type, active only) that are not in already.

`build_injection` runs the steps, each a module of this package: select by type order
(ranking), fit within the cap and the budget (fitting), add what the query finds
(relevant), render (rendering), then the "Please review" section of open nudges from
what is left of the budget (review), and, where the block is read live, the other live
sessions of the team from what is left after that (sessions). Tokens are counted
offline (search.tokens) on the rendered blocks.

A pure read: nothing is modified, so left-out entries keep their type and stay
searchable. The caller is inside the team's scope (the API request, or team_scope).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from agents.injection.entries import InjectionEntry, LeftOutReason
from agents.injection.facts import FACT_BUDGET_SHARE, InjectedFact, fit_facts, injectable_facts, render_facts
from agents.injection.fitting import fit_ranked, limit_warnings
from agents.injection.ranking import SKILL_GROUP, ranked_rows
from agents.injection.relevant import add_relevant
from agents.injection.rendering import EMPTY_NOTE, render_injection, tokens_of
from agents.injection.review import ReviewItem, render_review, review_items
from agents.injection.sessions import OtherSession, other_sessions
from core.errors import InvalidInput
from search.selectors import MAX_QUERY_CHARS
from teams.models import Team
from teams.validators import MAX_INJECTION_ENTRIES, MAX_INJECTION_TOKENS, MIN_INJECTION_TOKENS
from teams.vault_matcher import team_secret_matcher

# One set of limits with the team settings' (teams.validators).
MAX_ENTRIES_LIMIT = MAX_INJECTION_ENTRIES
MIN_TOKENS, MAX_TOKENS = MIN_INJECTION_TOKENS, MAX_INJECTION_TOKENS
MAX_PROJECT_CHARS = 200
# How far past the cap the walk looks for entries that still fit the budget. Only
# rows up to here are read and listed; the rest are counted (left_out_unlisted).
SCAN_BEYOND_CAP = 50


@dataclass
class Injection:
    text: str
    included: list[InjectionEntry]
    left_out: list[InjectionEntry]
    candidates: int  # active entries of the injected types (and project), and always_on skills
    left_out_unlisted: int  # left out, past what the walk reads; their reason is unlisted_reason
    unlisted_reason: LeftOutReason
    max_entries: int
    tokens_used: int
    token_budget: int
    project: str | None
    search_mode: str | None = None
    warnings: list[str] = field(default_factory=list)
    review: list[ReviewItem] = field(default_factory=list)
    sessions: list[OtherSession] = field(default_factory=list)
    facts: list[InjectedFact] = field(default_factory=list)

    def count_left_out(self, reason: LeftOutReason) -> int:
        listed = sum(1 for entry in self.left_out if entry.reason == reason)
        return listed + (self.left_out_unlisted if self.unlisted_reason == reason else 0)


def build_injection(
    *,
    team: Team,
    project: str | None = None,
    query: str | None = None,
    max_entries: int | None = None,
    max_tokens: int | None = None,
    live: bool = False,
    reader_session: uuid.UUID | None = None,
) -> Injection:
    """The injection block of `team`. `project` keeps entries of that project and those
    with no project (blank: team-wide only); None keeps every project. `max_entries` and
    `max_tokens` replace the team's defaults (injection_max_entries, injection_max_tokens)
    within the hard limits. `live`: the block is read now by an agent, so it ends with
    the team's other live sessions (never `reader_session`, the reader's own). The caller
    is inside the team's scope."""
    cap, budget = _limits(team, max_entries=max_entries, max_tokens=max_tokens)
    _check_project_and_query(project, query)

    rows = ranked_rows(team, project, limit_past_identity=cap + SCAN_BEYOND_CAP)
    candidates = rows[0].total if rows else 0
    # Every text that goes into the block is scrubbed on the way (entry_from, review).
    secrets = team_secret_matcher(team_id=team.id)
    # Facts come right after identity: what they would take of their share is held back
    # from the walk, then given to them from what identity and the walk left.
    candidate_facts = injectable_facts(team=team, project=project, secrets=secrets)
    _, reserved = fit_facts(candidate_facts, budget=budget // FACT_BUDGET_SHARE)
    fit = fit_ranked(rows, cap=cap, budget=budget - reserved, secrets=secrets)
    facts, facts_tokens = fit_facts(candidate_facts, budget=min(reserved, budget - fit.used))
    fit.used += facts_tokens
    unlisted = candidates - len(rows)
    unlisted_reason: LeftOutReason = "cap" if len(fit.included) >= cap else "budget"
    has_skills = any(row.grp == SKILL_GROUP for row in rows)
    warnings = limit_warnings(
        team=team,
        fit=fit,
        cap=cap,
        budget=budget,
        candidates=candidates,
        has_skills=has_skills,
        project=project,
    )

    search_mode = None
    if query is not None:
        relevant = add_relevant(
            fit,
            team=team,
            query=query,
            project=project,
            budget=budget,
            read={row.id for row in rows},
            secrets=secrets,
        )
        search_mode = relevant.search_mode
        warnings.extend(relevant.warnings)
        unlisted -= relevant.unlisted_taken
    if not fit.included and not facts:
        fit.used += tokens_of(EMPTY_NOTE)
    review, review_tokens = review_items(
        team=team, project=project, budget_left=budget - fit.used, secrets=secrets
    )
    fit.used += review_tokens
    sessions: list[OtherSession] = []
    sessions_text = ""
    if live:
        sessions, sessions_tokens, sessions_text = other_sessions(
            team=team, project=project, exclude=reader_session, budget_left=budget - fit.used, secrets=secrets
        )
        fit.used += sessions_tokens
    rendered = render_injection(fit.included, render_facts(facts))
    return Injection(
        facts=facts,
        text=rendered
        + ("\n" + render_review(review) if review else "")
        + ("\n" + sessions_text if sessions_text else ""),
        review=review,
        sessions=sessions,
        included=fit.included,
        left_out=fit.left_out,
        candidates=candidates,
        left_out_unlisted=unlisted,
        unlisted_reason=unlisted_reason,
        max_entries=cap,
        tokens_used=fit.used,
        token_budget=budget,
        project=project,
        search_mode=search_mode,
        warnings=warnings,
    )


def _limits(team: Team, *, max_entries: int | None, max_tokens: int | None) -> tuple[int, int]:
    """The entry cap and the token budget: the call's, within the hard limits, or the team's."""
    if max_entries is not None:
        cap = _check_range("max_entries", max_entries, 1, MAX_ENTRIES_LIMIT)
    else:
        # A team may set 0 (identity only); a team setting never lifts the hard limit.
        cap = min(team.injection_max_entries, MAX_ENTRIES_LIMIT)
    if max_tokens is not None:
        budget = _check_range("max_tokens", max_tokens, MIN_TOKENS, MAX_TOKENS)
    else:
        budget = min(team.injection_max_tokens, MAX_TOKENS)
    return cap, budget


def _check_project_and_query(project: str | None, query: str | None) -> None:
    if project is not None and len(project) > MAX_PROJECT_CHARS:
        raise InvalidInput(f"project is limited to {MAX_PROJECT_CHARS} characters", field="project")
    if query is not None and not query.strip():
        raise InvalidInput("query must not be blank", field="query")
    if query is not None and len(query) > MAX_QUERY_CHARS:
        raise InvalidInput(f"query is limited to {MAX_QUERY_CHARS} characters", field="query")


def _check_range(name: str, value: int, low: int, high: int) -> int:
    if not low <= value <= high:
        raise InvalidInput(f"{name} must be a whole number from {low} to {high}", field=name)
    return value
