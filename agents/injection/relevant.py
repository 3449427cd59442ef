"""Step 3 of an injection (with a query only), the relevant section: up to RELEVANT_MAX
active search results (any type) that are not in yet, within the token budget.
Relevant entries count against the budget, not the cap."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from agents.injection.entries import INJECTED_TYPES, entry_from
from agents.injection.fitting import Fit
from agents.injection.rendering import SECTION_HEADINGS, block_tokens, tokens_of
from memories.models import Memory
from search.retrieval.results import SearchResult
from search.run_search import embed_and_search
from search.selectors import MAX_RESULTS
from teams.models import Team
from teams.scrubber import SecretMatcher

RELEVANT_MAX = 5
RELEVANT_SHARE_OF_BEST = 0.5  # a relevant entry scores at least half the best search result


@dataclass
class Relevant:
    search_mode: str
    warnings: list[str]
    unlisted_taken: int  # added entries that were candidates past what the walk read


def add_relevant(
    fit: Fit,
    *,
    team: Team,
    query: str,
    project: str | None,
    budget: int,
    read: set[uuid.UUID],
    secrets: SecretMatcher,
) -> Relevant:
    """Search, and add the best results that fit to `fit`. `read` holds the candidates
    the walk read: one past them is counted as left out (unlisted) and, brought in
    here, is no longer."""
    outcome = embed_and_search(
        team=team,
        query=query,
        # Some of the best results are usually in already; three times as many is
        # enough headroom, and MMR's cost grows with the square of k.
        max_results=min(MAX_RESULTS, RELEVANT_MAX * 3),
        include_superseded=False,
    )
    inside = {entry.memory_id for entry in fit.included}
    picked = _relevant_rows(team, outcome.results, project, inside=inside)
    taken = _fit_relevant(fit, picked, budget=budget, read=read, secrets=secrets)
    return Relevant(search_mode=outcome.search_mode, warnings=list(outcome.warnings), unlisted_taken=taken)


def _relevant_rows(
    team: Team, results: list[SearchResult], project: str | None, *, inside: set[uuid.UUID]
) -> list[tuple[SearchResult, Memory]]:
    """The results worth a place, best first, at most RELEVANT_MAX, with their rows."""
    # Hybrid search always returns its k nearest, related or not; a result far below
    # the best match would spend the budget on noise.
    # Skills the query triggered come first (score 1): the floor is set by the others.
    floor = RELEVANT_SHARE_OF_BEST * max((r.score for r in results if not r.via_skill_trigger), default=0.0)
    kept = [
        r for r in results if r.is_active and r.memory_id not in inside and r.score >= floor and r.score > 0
    ][: RELEVANT_MAX * 4]
    rows = {
        row.id: row
        for row in Memory.objects.for_team(team.id)
        .active()
        .filter(id__in=[r.memory_id for r in kept])
        # Every field entry_from reads: one left out would be read again, entry by entry.
        .only(
            "id", "key", "type", "project", "content", "created_at", "confirmed_by_count", "last_confirmed_at"
        )
    }
    return [
        (r, rows[r.memory_id])
        for r in kept
        if r.memory_id in rows and (project is None or rows[r.memory_id].project in (project, ""))
    ][:RELEVANT_MAX]


def _fit_relevant(
    fit: Fit,
    picked: list[tuple[SearchResult, Memory]],
    *,
    budget: int,
    read: set[uuid.UUID],
    secrets: SecretMatcher,
) -> int:
    """Add each picked result that fits the budget; returns how many of the added were
    candidates the walk never read."""
    heading = tokens_of(SECTION_HEADINGS["relevant"])
    was_left_out = {entry.memory_id: entry for entry in fit.left_out}
    unlisted_taken = 0
    for position, (result, row) in enumerate(picked, start=1):
        entry = entry_from(row, section="relevant", rank=position, reason="relevant", secrets=secrets)
        entry.score = result.score
        entry.tokens = block_tokens(entry)
        # A candidate the walk never read is already counted as left out (unlisted).
        unread_candidate = entry.type in INJECTED_TYPES and entry.memory_id not in read
        cost = entry.tokens + (0 if any(e.section == "relevant" for e in fit.included) else heading)
        if fit.used + cost > budget:
            if entry.memory_id not in was_left_out and not unread_candidate:
                entry.reason = "budget"
                fit.left_out.append(entry)
            continue
        if entry.memory_id in was_left_out:
            fit.left_out.remove(was_left_out[entry.memory_id])  # brought in by the query
        unlisted_taken += unread_candidate
        fit.included.append(entry)
        fit.used += cost
    return unlisted_taken
