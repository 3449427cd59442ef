"""The near-duplicate check of an entry the batch save stored without it
(Memory.near_check_pending; memories.writes.settle_near_check), run by the worker
right after indexing stored the entry's vectors and before search.hooks.memories_indexed
announces it, so that freshness's contradiction pass sees the outcome.

It asks what search.duplicates_on_save asks of a single save, with the vectors indexing just
stored instead of an embedding in the request: the team's nearest other active entry
(one nearest-neighbour lookup, selectors.nearest_other_active_entries), judged by
duplicate_of_nearest, as a save's check (search.duplicates_on_save) judges its own nearest entry.
Nothing is embedded here.
"""

from __future__ import annotations

import logging
import uuid

from django.db import transaction

from memories.hooks import DuplicateMatch
from memories.models import Memory
from memories.writes import settle_near_check
from search import hooks
from search.selectors import nearest_other_active_entries, nearest_other_active_entries_of_batch
from teams.models import Team
from teams.scope import team_scope

logger = logging.getLogger(__name__)


def check_indexed_entry(*, team: Team, memory_id: uuid.UUID, model: str, dimensions: int) -> None:
    """Settle the pending near check of an entry just indexed with `model`'s vectors.
    A failure is logged and never fails indexing: the flag stays, and the next
    indexing of the entry tries again."""
    try:
        with team_scope(team.id):
            memory = Memory.objects.for_team(team.id).filter(id=memory_id, near_check_pending=True).first()
            if memory is None:
                return
            duplicate = _near_duplicate(team, memory, model, dimensions) if memory.is_active else None
            settle_near_check(team=team, memory_id=memory.id, duplicate=duplicate)
    except Exception:
        logger.exception("near-duplicate check of memory %s of team %s", memory_id, team.slug)


def check_indexed_entries(
    *,
    team: Team,
    memory_ids: list[uuid.UUID],
    batch_order: list[uuid.UUID],
    unseen: list[uuid.UUID],
    model: str,
    dimensions: int,
) -> None:
    """check_indexed_entry for the entries a batch just indexed (search.batch_indexing.index_batch),
    in the batch's order, with the same outcome as checking each right after its own
    indexing: an entry is compared with the team's active entries and the batch's
    entries before it, not with those after it that had no vectors before the batch
    (`unseen`: when checked one by one, their vectors did not exist yet).

    The nearest entries of all come from one exact scan (selectors.
    nearest_other_active_entries_of_batch); an entry with none at the team's threshold
    only has its flag cleared, in one UPDATE for all. Only near duplicates are settled
    one by one (settle_near_check, as before). An entry whose nearest was superseded by
    an earlier settlement of this pass is looked up again, alone. A failure is logged
    and never fails indexing; an entry whose settlement fails keeps its flag."""
    order = {memory_id: position for position, memory_id in enumerate(batch_order)}
    later_unseen = set(unseen)
    try:
        with team_scope(team.id), transaction.atomic():
            rows = list(
                Memory.objects.for_team(team.id)
                .filter(id__in=batch_order)
                .values_list("id", "key", "content", "is_active", "near_check_pending")
            )
            state = {row[0]: row for row in rows}
            checked = {m for m in memory_ids if m in state and state[m][4] and state[m][3]}
            batch = [(m, state[m][1], m in later_unseen) for m in batch_order if m in state]
            found = (
                nearest_other_active_entries_of_batch(
                    team_id=team.id, batch=batch, checked=checked, model=model
                )
                if checked
                else {}
            )
    except Exception:
        logger.exception("near-duplicate checks of %d memories of team %s", len(memory_ids), team.slug)
        found = None
    if found is None:
        for memory_id in memory_ids:
            _check_one(team, memory_id, model, dimensions, excluded=_later(memory_id, order, later_unseen))
        return
    replaced: set[uuid.UUID] = set()
    cleared: list[uuid.UUID] = []
    for memory_id in memory_ids:
        if memory_id not in state or not state[memory_id][4]:
            continue  # settled by another run meanwhile
        if memory_id in replaced or memory_id not in checked:
            cleared.append(memory_id)  # not active: nothing to merge (settle_near_check clears the flag)
            continue
        nearest = next(iter(found.get(memory_id) or []), None)
        if nearest is not None and nearest[0] in replaced:
            # The nearest left this pass: what is nearest now is looked up again.
            replaced |= _check_one(
                team, memory_id, model, dimensions, excluded=_later(memory_id, order, later_unseen)
            )
            continue
        if nearest is None or nearest[1] < team.dedup_threshold:
            cleared.append(memory_id)
            continue
        replaced |= _settle(team, memory_id, state[memory_id][2], nearest)
    if cleared:
        try:
            with team_scope(team.id):
                Memory.objects.for_team(team.id).filter(id__in=cleared, near_check_pending=True).update(
                    near_check_pending=False
                )
        except Exception:
            logger.exception("clearing the near checks of %d memories of team %s", len(cleared), team.slug)


def _later(memory_id: uuid.UUID, order: dict[uuid.UUID, int], unseen: set[uuid.UUID]) -> frozenset[uuid.UUID]:
    """The batch's entries after `memory_id` that had no vectors before the batch."""
    return frozenset(other for other in unseen if order[other] > order[memory_id])


def _check_one(
    team: Team, memory_id: uuid.UUID, model: str, dimensions: int, *, excluded: frozenset[uuid.UUID]
) -> set[uuid.UUID]:
    """check_indexed_entry of one entry, not compared with `excluded`; the entry it
    superseded, if any."""
    try:
        with team_scope(team.id):
            memory = Memory.objects.for_team(team.id).filter(id=memory_id, near_check_pending=True).first()
            if memory is None:
                return set()
            duplicate = (
                _near_duplicate(team, memory, model, dimensions, excluded=excluded)
                if memory.is_active
                else None
            )
            gone = settle_near_check(team=team, memory_id=memory.id, duplicate=duplicate)
    except Exception:
        logger.exception("near-duplicate check of memory %s of team %s", memory_id, team.slug)
        return set()
    return {gone.id} if gone is not None else set()


def _settle(
    team: Team, memory_id: uuid.UUID, content: str, nearest: tuple[uuid.UUID, float]
) -> set[uuid.UUID]:
    try:
        with team_scope(team.id):
            duplicate = duplicate_of_nearest(team, content, nearest)
            gone = settle_near_check(team=team, memory_id=memory_id, duplicate=duplicate)
    except Exception:
        logger.exception("near-duplicate check of memory %s of team %s", memory_id, team.slug)
        return set()
    return {gone.id} if gone is not None else set()


def _near_duplicate(
    team: Team, memory: Memory, model: str, dimensions: int, *, excluded: frozenset[uuid.UUID] = frozenset()
) -> DuplicateMatch | None:
    nearest = nearest_other_active_entries(
        team_id=team.id, memory_id=memory.id, model=model, dimensions=dimensions, limit=1, excluded=excluded
    )
    return duplicate_of_nearest(team, memory.content, nearest[0] if nearest else None)


def duplicate_of_nearest(
    team: Team, text: str, nearest: tuple[uuid.UUID, float] | None
) -> DuplicateMatch | None:
    """The judgement of `text`'s nearest active entry (id, cosine similarity), for a
    save's check and the batch's deferred one (search.duplicates_after_indexing): a duplicate from the
    team's threshold up, unless the entry is gone or the texts disagree."""
    if nearest is None or nearest[1] < team.dedup_threshold:
        return None
    memory = Memory.objects.for_team(team.id).active().filter(id=nearest[0]).first()
    if memory is None:
        return None
    similarity = round(min(nearest[1], 1.0), 6)
    if hooks.texts_disagree.first(team=team, new_text=text, old_text=memory.content, similarity=similarity):
        # "port is 5432" / "port is 6432": near in meaning, opposite in fact. Saved as
        # an entry of its own; the contradiction flow links the two once it is indexed.
        logger.info(
            "team %s: near %s (%.3f) but disagrees: not a duplicate", team.slug, memory.key, similarity
        )
        return None
    return DuplicateMatch(
        memory=memory,
        similarity=similarity,
        matched_by="embedding",
        threshold=team.dedup_threshold,
    )
