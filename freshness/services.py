"""Every write of nudges, and the due job (issue 12).

- `mark_due_entries`: the beat job that opens a `due` nudge for every active entry
  unconfirmed for longer than its window (memories.freshness), team by team in each
  team's scope, bounded per run and idempotent (the open-nudge constraint).
- `resolve_nudge`: one call resolves a nudge (confirm / dismiss; archive and supersede
  belong to the prune and contradiction flows and answer 400 where they do not apply).
- hook receivers: a confirmation resolves the entry's open due and anchor nudges; a
  team shutdown deletes its nudges.

Locking: a resolution locks the nudge row, then (through memories.services) the key of
the entry it confirms, always in that order.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from core.errors import Conflict, InvalidInput, NotFound
from freshness.models import Nudge, NudgeAction, NudgeKind, NudgeState
from memories import services as memory_services
from memories.freshness import FreshnessWindows, due_condition
from memories.models import Memory
from teams.models import Team
from teams.scope import team_scope

logger = logging.getLogger(__name__)

# Entries read per query inside a team (keyset over ids); the run's `limit` bounds the total.
DUE_PAGE_SIZE = 500


class NudgeNotFound(NotFound):
    pass


class NudgeClosed(Conflict):
    """The nudge was resolved or dismissed already."""

    code = "nudge_closed"


class ActionNotApplicable(InvalidInput):
    """The action does not resolve this kind of nudge (or its entry moved on)."""

    code = "action_not_applicable"


@dataclass
class DueRun:
    """What one run of the due job did: `checked` entries found past their window
    without an open due nudge, `flagged` nudges opened (fewer when a concurrent run
    opened some first), `errors` teams whose pass failed (logged, retried next run).
    `resume_after_team` is where the next run starts (0: from the first team)."""

    checked: int = 0
    flagged: int = 0
    errors: int = 0
    teams: int = 0
    resume_after_team: int = 0
    failed_teams: list[int] = field(default_factory=list)

    def as_dict(self) -> dict[str, int]:
        return {
            "checked": self.checked,
            "flagged": self.flagged,
            "errors": self.errors,
            "teams": self.teams,
            "resume_after_team": self.resume_after_team,
        }


def mark_due_entries(
    *, now: dt.datetime | None = None, limit: int | None = None, start_after_team: int = 0
) -> DueRun:
    """Open a `due` nudge for each active entry past its team's window, at most `limit`
    (MEMORYHUB_FRESHNESS_DUE_BATCH) per run. Teams are taken in id order from after
    `start_after_team`, wrapping around once, each in its own scope (its own transaction:
    one team's failure is counted and the others go on). A run that stops at the limit
    says in `resume_after_team` which team to go on from, so a team with a large backlog
    never starves the teams after it. Idempotent: entries with an open due nudge are not
    looked at again, and the open-nudge constraint holds against a concurrent run."""
    now = now or timezone.now()
    budget = settings.MEMORYHUB_FRESHNESS_DUE_BATCH if limit is None else limit
    run = DueRun()
    # The teams table is not team-scoped: listing ids needs no bypass.
    team_ids = list(Team.objects.order_by("id").values_list("id", flat=True))
    ordered = [t for t in team_ids if t > start_after_team] + [t for t in team_ids if t <= start_after_team]
    for team_id in ordered:
        if run.checked >= budget:
            run.resume_after_team = _previous_team(ordered, team_id, start_after_team)
            break
        run.teams += 1
        try:
            with team_scope(team_id):
                checked, flagged = _mark_team_due(team_id, now=now, budget=budget - run.checked)
        except Exception:
            logger.exception("freshness due job: team %s failed", team_id)
            run.errors += 1
            run.failed_teams.append(team_id)
            continue
        run.checked += checked
        run.flagged += flagged
        if run.checked >= budget:
            # The limit may have cut this team short: the next run starts with it.
            run.resume_after_team = _previous_team(ordered, team_id, start_after_team)
            break
    logger.info("freshness due job: %s", run.as_dict())
    return run


def _previous_team(ordered: list[int], team_id: int, start_after_team: int) -> int:
    """The cursor that makes the next run start at `team_id`."""
    index = ordered.index(team_id)
    return ordered[index - 1] if index > 0 else start_after_team


def _mark_team_due(team_id: int, *, now: dt.datetime, budget: int) -> tuple[int, int]:
    """Inside the team's scope: find due entries without an open due nudge (keyset over
    ids, pages of DUE_PAGE_SIZE, at most `budget`) and open one nudge each."""
    team = Team.objects.get(id=team_id)
    windows = FreshnessWindows.for_team(team)
    open_due = Nudge.objects.filter(
        team_id=team_id, kind=NudgeKind.DUE, state=NudgeState.OPEN, memory_id=OuterRef("pk")
    )
    due = (
        Memory.objects.for_team(team_id)
        .active()
        .filter(due_condition(windows, now))
        .exclude(Exists(open_due))
        .order_by("id")
    )
    checked = flagged = 0
    last_id: uuid.UUID | None = None
    while checked < budget:
        page_rows = due if last_id is None else due.filter(id__gt=last_id)
        page = list(
            page_rows.values_list("id", "key", "last_confirmed_at")[: min(DUE_PAGE_SIZE, budget - checked)]
        )
        if not page:
            break
        checked += len(page)
        flagged += _open_due_nudges(team_id, page, now=now)
        last_id = page[-1][0]
    return checked, flagged


def due_message(key: str, days: int) -> str:
    ago = "today" if days < 1 else "1 day ago" if days == 1 else f"{days} days ago"
    return (
        f"'{key}' was last confirmed {ago}. Is it still true? Confirm it, or supersede it "
        "with what is true now."
    )


def _open_due_nudges(
    team_id: int, page: list[tuple[uuid.UUID, str, dt.datetime]], *, now: dt.datetime
) -> int:
    """One INSERT for the page; ON CONFLICT DO NOTHING leaves the open nudge a concurrent
    run made (the partial unique constraint). Returns how many were opened."""
    ids, messages, details = [], [], []
    for memory_id, key, confirmed_at in page:
        days = max(0, (now - confirmed_at).days)
        ids.append(memory_id)
        messages.append(due_message(key, days))
        details.append(
            json.dumps({"days_since_confirmed": days, "last_confirmed_at": confirmed_at.isoformat()})
        )
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
            [team_id, NudgeKind.DUE, NudgeState.OPEN, now, ids, messages, details],
        )
        return len(cursor.fetchall())


def resolve_nudge(*, team: Team, nudge_id: uuid.UUID, action: str, actor: str) -> Nudge:
    """Resolve an open nudge of the team in one call. `confirm`: the entry (both entries
    of a contradiction, as compatible) is confirmed still true; `dismiss`: nothing about
    the entries changes, the nudge is closed (and a flag it raised is lowered).
    `archive` and `supersede` resolve the prune and contradiction flows (not built yet):
    400 `action_not_applicable` where no handler applies. Raises NudgeNotFound (404),
    NudgeClosed (409) for a nudge no longer open."""
    handler = _HANDLERS.get((action, "*"))
    with transaction.atomic():
        nudge = (
            Nudge.objects.select_for_update(of=("self",))
            .select_related("memory", "other_memory")
            .filter(team=team, id=nudge_id)
            .first()
        )
        if nudge is None:
            raise NudgeNotFound("no such nudge")
        handler = _HANDLERS.get((action, nudge.kind)) or handler
        if handler is None:
            raise ActionNotApplicable(
                f"'{action}' does not resolve a {nudge.kind} nudge; use one of: "
                f"{', '.join(applicable_actions(nudge.kind))}",
                field="action",
            )
        if nudge.state != NudgeState.OPEN:
            raise NudgeClosed(f"this nudge is {nudge.state} already")
        handler(team, nudge, actor)
        _close(nudge, action=action, actor=actor)
    logger.info("nudge %s (%s) of team %s: %s by %s", nudge.id, nudge.kind, team.slug, action, actor)
    return nudge


def applicable_actions(kind: str) -> list[str]:
    return [a for a in NudgeAction.values if (a, kind) in _HANDLERS or (a, "*") in _HANDLERS]


def _close(nudge: Nudge, *, action: str, actor: str) -> None:
    nudge.refresh_from_db(fields=["state"])
    if nudge.state != NudgeState.OPEN:  # a confirmation's hook closed it already
        nudge.refresh_from_db()
        return
    nudge.state = NudgeState.DISMISSED if action == NudgeAction.DISMISS else NudgeState.RESOLVED
    nudge.resolution = action
    nudge.resolved_at = timezone.now()
    nudge.resolved_by = actor
    nudge.save(update_fields=["state", "resolution", "resolved_at", "resolved_by"])


def _entries(nudge: Nudge) -> list[Memory]:
    return [m for m in (nudge.memory, nudge.other_memory) if m is not None]


def _confirm(team: Team, nudge: Nudge, actor: str) -> None:
    """Confirm the entry (both, for a contradiction: compatible after all). Only the
    version the nudge is about: a key that moved on since is not confirmed blindly."""
    entries = _entries(nudge)
    stale = [m.key for m in entries if not Memory.objects.filter(team=team, id=m.id, is_active=True).exists()]
    if stale:
        raise ActionNotApplicable(
            f"'{stale[0]}' changed since this nudge was made (superseded or deleted): dismiss it",
            field="action",
        )
    for memory in sorted(entries, key=lambda m: m.key):  # one order of key locks
        memory_services.confirm_memory(
            team=team, key=memory.key, confirmed_by=actor, note=f"confirmed from a {nudge.kind} nudge"
        )
    if nudge.kind == NudgeKind.CONTRADICTION:
        _lower_contradiction_flags(team, nudge)


def _dismiss(team: Team, nudge: Nudge, actor: str) -> None:
    if nudge.kind == NudgeKind.ANCHOR_BROKEN:
        memory_services.set_freshness_flag(
            team=team, memory_ids=[nudge.memory_id], flag="anchor_broken_at", on=False
        )
    elif nudge.kind == NudgeKind.CONTRADICTION:
        _lower_contradiction_flags(team, nudge)


def _lower_contradiction_flags(team: Team, nudge: Nudge) -> None:
    """An entry stays contradicted while another open contradiction names it."""
    for memory in _entries(nudge):
        others = (
            Nudge.objects.filter(team=team, kind=NudgeKind.CONTRADICTION, state=NudgeState.OPEN)
            .exclude(id=nudge.id)
            .filter(memory_id=memory.id)
            .union(
                Nudge.objects.filter(team=team, kind=NudgeKind.CONTRADICTION, state=NudgeState.OPEN)
                .exclude(id=nudge.id)
                .filter(other_memory_id=memory.id)
            )
        )
        if not others.exists():
            memory_services.set_freshness_flag(
                team=team, memory_ids=[memory.id], flag="contradicted_at", on=False
            )


# (action, nudge kind or "*") -> handler. The prune flow registers ("archive", "prune"),
# the contradiction flow ("supersede", "contradiction"), by adding here.
Handler = Callable[[Team, Nudge, str], None]
_HANDLERS: dict[tuple[str, str], Handler] = {
    (NudgeAction.CONFIRM, "*"): _confirm,
    (NudgeAction.DISMISS, "*"): _dismiss,
}


def resolve_nudges_of_confirmed(*, team_id: int, memory_id: uuid.UUID, confirmed_by: str) -> None:
    """Receiver of memories.hooks.memory_confirmed: the entry is believed again, so its
    open due and anchor nudges are resolved (by that confirmation)."""
    Nudge.objects.filter(
        team_id=team_id,
        memory_id=memory_id,
        state=NudgeState.OPEN,
        kind__in=[NudgeKind.DUE, NudgeKind.ANCHOR_BROKEN],
    ).update(
        state=NudgeState.RESOLVED,
        resolution=NudgeAction.CONFIRM,
        resolved_at=timezone.now(),
        resolved_by=confirmed_by,
    )


def delete_team_nudges(*, team: Team) -> dict[str, int]:
    """Receiver of teams.hooks.team_shutdown (inside the team's scope)."""
    return {"nudges": Nudge.objects.filter(team=team).delete()[0]}
