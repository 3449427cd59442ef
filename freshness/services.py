"""Every write of nudges but the contradiction pass's (freshness.contradiction_pass), and
the due and prune jobs.

- `mark_due_entries`: the beat job that opens a `due` nudge for every active entry
  unconfirmed for longer than its window (memories.freshness), team by team in each
  team's scope, bounded per run and idempotent (the open-nudge constraint).
- `resolve_nudge`: one call resolves a nudge: confirm / dismiss any; supersede and
  compatible a contradiction; archive a prune proposal (400 where they do not apply).
- `propose_prunes`: the beat job that proposes archiving old, never read, unrated entries.
- hook receivers: a confirmation resolves the entry's open due and anchor nudges; an
  archive resolves the entry's open nudges; a team shutdown deletes its nudges.

The jobs walk the teams, page their candidates and open nudges with freshness.sweeps.

Locking: a resolution locks the nudge row, then (through memories.writes) the key of
the entry it confirms, always in that order.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from core.errors import Conflict, InvalidInput, NotFound
from freshness import fact_contradictions
from freshness.models import Nudge, NudgeAction, NudgeKind, NudgeState
from freshness.sweeps import TeamSweep, new_candidates, nudged_entries, open_nudges, sweep_teams
from memories import writes
from memories.exceptions import MemoryNotFound, StaleVersion
from memories.freshness import FreshnessWindows, due_condition
from memories.models import Memory
from teams.models import Team

logger = logging.getLogger(__name__)

# Candidates read per query inside a team (keyset over (last_confirmed_at, id)); the run's
# `limit` bounds how many are flagged. A page of ids, keys and times is a few hundred KB.
DUE_PAGE_SIZE = 5000


class NudgeNotFound(NotFound):
    pass


class NudgeClosed(Conflict):
    """The nudge was resolved or dismissed already."""

    code = "nudge_closed"


class ActionNotApplicable(InvalidInput):
    """The action does not resolve this kind of nudge (or its entry moved on)."""

    code = "action_not_applicable"


@dataclass
class DueRun(TeamSweep):
    """The due job's run: its nudges are `flagged` entries."""

    OPENED_NAME: ClassVar[str] = "flagged"

    @property
    def flagged(self) -> int:
        return self.opened


def mark_due_entries(
    *, now: dt.datetime | None = None, limit: int | None = None, start_after_team: int = 0
) -> DueRun:
    """Open a `due` nudge for each active entry past its team's window, at most `limit`
    (MEMORYHUB_FRESHNESS_DUE_BATCH) per run, every team in its own scope from after
    `start_after_team` (freshness.sweeps.sweep_teams). Idempotent: entries with an open due nudge are
    skipped, and the open-nudge constraint holds against a concurrent run."""
    now = now or timezone.now()
    run = DueRun()
    sweep_teams(
        run,
        job="due",
        budget=settings.MEMORYHUB_FRESHNESS_DUE_BATCH if limit is None else limit,
        start_after_team=start_after_team,
        visit=lambda team_id, budget: _mark_team_due(team_id, now=now, budget=budget),
    )
    return run


def _mark_team_due(team_id: int, *, now: dt.datetime, budget: int) -> tuple[int, int]:
    """Inside the team's scope: the due entries without an open due nudge, the longest
    unconfirmed first (freshness.sweeps.new_candidates), at most `budget`; open one nudge each."""
    team = Team.objects.get(id=team_id)
    windows = FreshnessWindows.for_team(team)
    due = Memory.objects.for_team(team_id).active().filter(due_condition(windows, now))

    def open_due(ids: list[uuid.UUID]) -> set[uuid.UUID]:
        return nudged_entries(team_id, NudgeKind.DUE, ids, open_only=True)

    checked = flagged = 0
    for page in new_candidates(due, named=open_due, budget=budget, fields=("key",), page_size=DUE_PAGE_SIZE):
        checked += len(page)
        flagged += _open_due_nudges(team_id, page, now=now)
    return checked, flagged


def due_message(key: str, days: int) -> str:
    ago = "today" if days < 1 else "1 day ago" if days == 1 else f"{days} days ago"
    return (
        f"'{key}' was last confirmed {ago}. Is it still true? Confirm it, or supersede it "
        "with what is true now."
    )


def _open_due_nudges(team_id: int, page: list[tuple[Any, ...]], *, now: dt.datetime) -> int:
    nudges = []
    for memory_id, confirmed_at, key in page:
        days = max(0, (now - confirmed_at).days)
        details = {"days_since_confirmed": days, "last_confirmed_at": confirmed_at.isoformat()}
        nudges.append((memory_id, due_message(key, days), details))
    return open_nudges(team_id, NudgeKind.DUE, nudges, now=now)


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
            .select_related("memory", "other_memory", "fact")
            .filter(team=team, id=nudge_id)
            .first()
        )
        if nudge is None:
            raise NudgeNotFound("no such nudge")
        handler = _HANDLERS.get((action, nudge.kind)) or (
            None if (action, nudge.kind) in _NOT_FOR_KIND else handler
        )
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
    return [
        a
        for a in NudgeAction.values
        if (a, kind) in _HANDLERS or ((a, "*") in _HANDLERS and (a, kind) not in _NOT_FOR_KIND)
    ]


def _close(nudge: Nudge, *, action: str, actor: str) -> None:
    """Record the action that resolved the nudge, even when a hook of the handler's own
    write (a confirmation, an archive) closed it a moment before: the action says why."""
    nudge.refresh_from_db()
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
        writes.confirm_memory(
            team=team, key=memory.key, confirmed_by=actor, note=f"confirmed from a {nudge.kind} nudge"
        )
    if nudge.kind == NudgeKind.CONTRADICTION:
        _lower_contradiction_flags(team, nudge)


def _dismiss(team: Team, nudge: Nudge, actor: str) -> None:
    if nudge.kind == NudgeKind.ANCHOR_BROKEN and nudge.memory_id is not None:
        writes.set_freshness_flag(team=team, memory_ids=[nudge.memory_id], flag="anchor_broken_at", on=False)
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
            writes.set_freshness_flag(team=team, memory_ids=[memory.id], flag="contradicted_at", on=False)


def _supersede(team: Team, nudge: Nudge, actor: str) -> None:
    """A contradiction settled for the newer entry: the older one is archived (with who
    and when; never deleted, restorable), the newer one stays and is confirmed. The
    nudge's details record which entry was kept and which archived."""
    newer, older = nudge.memory, nudge.other_memory
    if newer is None or older is None:  # never: a contradiction links two (the model's check)
        raise ActionNotApplicable("this nudge links one entry", field="action")
    _require_active(team, [newer, older])
    archived = _archive_version(team, older, actor=actor)
    writes.confirm_memory(
        team=team, key=newer.key, confirmed_by=actor, note=f"kept over '{older.key}' (contradiction)"
    )
    nudge.details = {
        **nudge.details,
        "kept": {"id": str(newer.id), "key": newer.key},
        "archived": {
            "id": str(archived.id),
            "key": archived.key,
            "at": archived.archived_at.isoformat() if archived.archived_at else None,
        },
    }
    nudge.save(update_fields=["details"])
    _lower_contradiction_flags(team, nudge)


def _compatible(team: Team, nudge: Nudge, actor: str) -> None:
    """Both entries hold: confirmed, flags lowered, and the resolution (`compatible`,
    kept on the nudge) stops the detector from raising the pair again."""
    _confirm(team, nudge, actor)


def _archive(team: Team, nudge: Nudge, actor: str) -> None:
    """A prune proposal accepted: the entry is archived (never deleted, restorable)."""
    if nudge.memory is None:  # never: only a fact contradiction has none (the model's check)
        raise ActionNotApplicable("this nudge is about no entry", field="action")
    _require_active(team, [nudge.memory])
    _archive_version(team, nudge.memory, actor=actor)


def _require_active(team: Team, entries: list[Memory]) -> None:
    for memory in entries:
        if not Memory.objects.filter(team=team, id=memory.id, is_active=True).exists():
            raise ActionNotApplicable(
                f"'{memory.key}' changed since this nudge was made (superseded, archived or deleted): "
                "dismiss it",
                field="action",
            )


def _archive_version(team: Team, memory: Memory, *, actor: str) -> Memory:
    """Archive exactly this version (the key's lock checks it is still the active one)."""
    try:
        return writes.archive_memory(team=team, key=memory.key, archived_by=actor, expected_version=memory.id)
    except (StaleVersion, MemoryNotFound):
        raise ActionNotApplicable(
            f"'{memory.key}' changed since this nudge was made: dismiss it", field="action"
        ) from None


# (action, nudge kind or "*") -> handler; the kind's own handler wins over "*".
Handler = Callable[[Team, Nudge, str], None]
_HANDLERS: dict[tuple[str, str], Handler] = {
    (NudgeAction.CONFIRM, "*"): _confirm,
    (NudgeAction.DISMISS, "*"): _dismiss,
    (NudgeAction.SUPERSEDE, NudgeKind.CONTRADICTION): _supersede,
    (NudgeAction.COMPATIBLE, NudgeKind.CONTRADICTION): _compatible,
    (NudgeAction.ARCHIVE, NudgeKind.PRUNE): _archive,
    (NudgeAction.SUPERSEDE, NudgeKind.FACT_CONTRADICTION): fact_contradictions.supersede_from_nudge,
}
# Actions of "*" that do not resolve a kind: a fact contradiction has no entry to confirm.
_NOT_FOR_KIND = {(NudgeAction.CONFIRM, NudgeKind.FACT_CONTRADICTION)}


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


def close_nudges_of_archived(*, team: Team, memory_id: uuid.UUID, archived_by: str) -> None:
    """Receiver of memories.hooks.memory_archived: an archived entry needs no more
    looking at, so the open nudges that name it are resolved (`archive`), and the other
    entry of each such contradiction loses its flag unless another open one names it."""
    names_it = Q(memory_id=memory_id) | Q(other_memory_id=memory_id)
    open_nudges = list(Nudge.objects.filter(team=team, state=NudgeState.OPEN).filter(names_it))
    if not open_nudges:
        return
    Nudge.objects.filter(id__in=[n.id for n in open_nudges]).update(
        state=NudgeState.RESOLVED,
        resolution=NudgeAction.ARCHIVE,
        resolved_at=timezone.now(),
        resolved_by=archived_by,
    )
    partners = {
        partner
        for n in open_nudges
        if n.kind == NudgeKind.CONTRADICTION
        for partner in (n.memory_id, n.other_memory_id)
        if partner is not None and partner != memory_id
    }
    for partner in sorted(partners, key=str):
        still = Nudge.objects.filter(team=team, kind=NudgeKind.CONTRADICTION, state=NudgeState.OPEN).filter(
            Q(memory_id=partner) | Q(other_memory_id=partner)
        )
        if not still.exists():
            writes.set_freshness_flag(team=team, memory_ids=[partner], flag="contradicted_at", on=False)


# --------------------------------------------------------------------------- prune


@dataclass
class PruneRun(TeamSweep):
    """The prune job's run: its nudges are archive proposals."""

    OPENED_NAME: ClassVar[str] = "proposed"

    @property
    def proposed(self) -> int:
        return self.opened


def prune_condition(now: dt.datetime) -> Q:
    """Entries worth proposing to archive: created and last confirmed before the
    cut-off (MEMORYHUB_FRESHNESS_PRUNE_AFTER_DAYS), never read, never rated. Identity
    and skills are never proposed: they are loaded without a search that would count."""
    cutoff = now - dt.timedelta(days=settings.MEMORYHUB_FRESHNESS_PRUNE_AFTER_DAYS)
    return (
        Q(created_at__lt=cutoff, last_confirmed_at__lt=cutoff)
        & Q(access_count=0, last_accessed_at__isnull=True)
        & Q(upvotes=0, downvotes=0)
        & Q(skill_trigger__isnull=True)
        & ~Q(type="identity")
    )


def propose_prunes(
    *, now: dt.datetime | None = None, limit: int | None = None, start_after_team: int = 0
) -> PruneRun:
    """Open a `prune` nudge proposing to archive each stale entry (prune_condition), at
    most `limit` (MEMORYHUB_FRESHNESS_PRUNE_BATCH) per run, teams in id order from after
    `start_after_team`, each in its own scope (one team's failure is counted and the
    others go on), like mark_due_entries. Idempotent: an entry that ever had a prune
    nudge is not proposed again (a dismissed proposal means "keep it"). Nothing is
    archived here: archiving is a person's or agent's answer to the nudge."""
    now = now or timezone.now()
    run = PruneRun()
    sweep_teams(
        run,
        job="prune",
        budget=settings.MEMORYHUB_FRESHNESS_PRUNE_BATCH if limit is None else limit,
        start_after_team=start_after_team,
        visit=lambda team_id, budget: _propose_team_prunes(team_id, now=now, budget=budget),
    )
    return run


def prune_message(key: str, days: int) -> str:
    return (
        f"'{key}' is {days} days old and was never read or rated. Archive it? It stays in the "
        "key's history and can be restored."
    )


def _propose_team_prunes(team_id: int, *, now: dt.datetime, budget: int) -> tuple[int, int]:
    """Inside the team's scope: the stale entries that never had a prune nudge, the
    longest unconfirmed first (freshness.sweeps.new_candidates, as the due job), at most `budget`."""
    candidates = Memory.objects.for_team(team_id).active().filter(prune_condition(now))

    def ever_proposed(ids: list[uuid.UUID]) -> set[uuid.UUID]:
        return nudged_entries(team_id, NudgeKind.PRUNE, ids, open_only=False)

    pages = new_candidates(
        candidates, named=ever_proposed, budget=budget, fields=("key", "created_at"), page_size=DUE_PAGE_SIZE
    )
    stale = [row for page in pages for row in page]
    nudges = []
    for memory_id, _confirmed_at, key, created_at in stale:
        days = max(0, (now - created_at).days)
        nudges.append(
            (memory_id, prune_message(key, days), {"days_old": days, "created_at": created_at.isoformat()})
        )
    return len(stale), open_nudges(team_id, NudgeKind.PRUNE, nudges, now=now)
