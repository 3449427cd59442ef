"""What the freshness jobs share: walking every team in its own scope within a budget
(sweep_teams), paging one team's candidates against the nudges that already name them
(new_candidates), and opening a page of nudges in one statement (open_nudges). The due
and prune jobs (freshness.services) and the anchor job (freshness.anchor_checks) run on
them."""

from __future__ import annotations

import datetime as dt
import json
import logging
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from django.db import connection
from django.db.models import Q, QuerySet

from freshness.models import NudgeState
from memories.models import Memory
from teams.models import Team
from teams.scope import team_scope

logger = logging.getLogger(__name__)


@dataclass
class TeamSweep:
    """What one run of a job over every team did: `checked` entries found, `opened`
    nudges opened for them (fewer when a concurrent run opened some first), `errors`
    teams whose pass failed (logged, retried next run). `resume_after_team` is where
    the next run starts (0: from the first team)."""

    checked: int = 0
    opened: int = 0
    errors: int = 0
    teams: int = 0
    resume_after_team: int = 0
    failed_teams: list[int] = field(default_factory=list)
    OPENED_NAME: ClassVar[str] = "opened"

    def as_dict(self) -> dict[str, int]:
        return {
            "checked": self.checked,
            self.OPENED_NAME: self.opened,
            "errors": self.errors,
            "teams": self.teams,
            "resume_after_team": self.resume_after_team,
        }


def sweep_teams(
    run: TeamSweep,
    *,
    job: str,
    budget: int,
    start_after_team: int,
    visit: Callable[[int, int], tuple[int, int]],
) -> None:
    """Call `visit(team_id, budget_left) -> (checked, opened)` for each team, in id order
    from after `start_after_team`, wrapping around once, each in its own scope (its own
    transaction: one team's failure is counted and the others go on), until `budget`
    entries were checked. A run that stops at the budget says in `resume_after_team`
    which team to go on from, so a team with a large backlog never starves the others."""
    # The teams table is not team-scoped: listing ids needs no bypass.
    team_ids = list(Team.objects.order_by("id").values_list("id", flat=True))
    ordered = [t for t in team_ids if t > start_after_team] + [t for t in team_ids if t <= start_after_team]
    for team_id in ordered:
        if run.checked >= budget:
            run.resume_after_team = previous_team(ordered, team_id, start_after_team)
            break
        run.teams += 1
        try:
            with team_scope(team_id):
                checked, opened = visit(team_id, budget - run.checked)
        except Exception:
            logger.exception("freshness %s job: team %s failed", job, team_id)
            run.errors += 1
            run.failed_teams.append(team_id)
            continue
        run.checked += checked
        run.opened += opened
        if run.checked >= budget:
            # The budget may have cut this team short: the next run starts with it.
            run.resume_after_team = previous_team(ordered, team_id, start_after_team)
            break
    logger.info("freshness %s job: %s", job, run.as_dict())


def previous_team(ordered: list[int], team_id: int, start_after_team: int) -> int:
    """The cursor that makes the next run start at `team_id`."""
    index = ordered.index(team_id)
    return ordered[index - 1] if index > 0 else start_after_team


def new_candidates(
    candidates: QuerySet[Memory],
    *,
    named: Callable[[list[uuid.UUID]], set[uuid.UUID]],
    budget: int,
    fields: tuple[str, ...],
    page_size: int,
) -> Iterator[list[tuple[Any, ...]]]:
    """Pages of `page_size` (id, last_confirmed_at, *fields) of `candidates` (one team's
    active entries a job looks for) whose id is not in `named(ids)` (those a nudge of the
    job names), the longest unconfirmed first, at most `budget` rows in all.

    The candidates and the nudges are read apart, never as an anti-join: a keyset page
    of candidates over (last_confirmed_at, id) (the partial index
    memory_team_active_confirmed), then the nudges naming that page's ids
    (nudged_entries). The planner's estimate of a team's nudges is often far off (a team
    created since the nudge table was last analyzed is estimated at 1 row, and the
    jobs add thousands a run), and the anti-join it then chose was a nested loop that
    re-read each of the team's nudges for every candidate (docs/freshness.md,
    "The due job"). Each query here reads one table, at most a page or
    the team's nudges, whatever the estimates. The walk ends at the budget or at the
    team's last candidate: each page moves the keyset on."""
    ordered = candidates.order_by("last_confirmed_at", "id")
    taken = 0
    last: tuple[dt.datetime, uuid.UUID] | None = None
    while taken < budget:
        rows = ordered if last is None else ordered.filter(after_position(*last))
        page = list(rows.values_list("id", "last_confirmed_at", *fields)[:page_size])
        if not page:
            return
        last = (page[-1][1], page[-1][0])
        nudged = named([row[0] for row in page])
        new = [row for row in page if row[0] not in nudged][: budget - taken]
        if new:
            taken += len(new)
            yield new


def nudged_entries(team_id: int, kind: str, ids: list[uuid.UUID], *, open_only: bool) -> set[uuid.UUID]:
    """Which of `ids` a nudge of `kind` of the team names (only open ones with
    `open_only`). The ids go as one array parameter: an IN list of a page's 5,000
    placeholders costs more to build and parse than the lookup itself."""
    # The query is a constant: each kind's open nudges, or all of them.
    states = [NudgeState.OPEN] if open_only else list(NudgeState.values)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT memory_id FROM freshness_nudge "
            "WHERE team_id = %s AND kind = %s AND state = ANY(%s) AND memory_id = ANY(%s::uuid[])",
            [team_id, kind, states, ids],
        )
        return {row[0] for row in cursor.fetchall()}


def after_position(confirmed_at: dt.datetime, memory_id: uuid.UUID) -> Q:
    """Rows after (confirmed_at, memory_id) in (last_confirmed_at, id) order (the first
    term, implied by the others, lets the index start the page at its position)."""
    return Q(last_confirmed_at__gte=confirmed_at) & (
        Q(last_confirmed_at__gt=confirmed_at) | Q(last_confirmed_at=confirmed_at, id__gt=memory_id)
    )


def open_nudges(
    team_id: int, kind: str, nudges: list[tuple[uuid.UUID, str, dict[str, Any]]], *, now: dt.datetime
) -> int:
    """Open one `kind` nudge per (memory id, message, details) in one INSERT; ON CONFLICT
    DO NOTHING leaves the open nudge a concurrent run made (the partial unique
    constraint). Returns how many were opened."""
    if not nudges:
        return 0
    ids = [memory_id for memory_id, _, _ in nudges]
    messages = [message for _, message, _ in nudges]
    details = [json.dumps(detail) for _, _, detail in nudges]
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO freshness_nudge (id, team_id, kind, memory_id, other_memory_id, message, details,
                                         state, resolution, created_at, resolved_at, resolved_by)
            SELECT gen_random_uuid(), %s, %s, page.memory_id, NULL, page.message, page.details::jsonb,
                   %s, '', %s, NULL, ''
            FROM unnest(%s::uuid[], %s::text[], %s::text[]) AS page(memory_id, message, details)
            ON CONFLICT DO NOTHING
            RETURNING id
            """,
            [team_id, kind, NudgeState.OPEN, now, ids, messages, details],
        )
        return len(cursor.fetchall())
