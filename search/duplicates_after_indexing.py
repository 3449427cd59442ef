"""The near-duplicate check of an entry the batch save stored without it
(Memory.near_check_pending; memories.writes.settle_near_check), run by the worker
right after indexing stored the entry's vectors and before search.hooks.memory_indexed
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

from memories.hooks import DuplicateMatch
from memories.models import Memory
from memories.writes import settle_near_check
from search import hooks
from search.selectors import nearest_other_active_entries
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


def _near_duplicate(team: Team, memory: Memory, model: str, dimensions: int) -> DuplicateMatch | None:
    nearest = nearest_other_active_entries(
        team_id=team.id, memory_id=memory.id, model=model, dimensions=dimensions, limit=1
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
