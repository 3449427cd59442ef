"""The near-duplicate check of an entry the batch save stored without it
(Memory.near_check_pending; memories.batch.settle_near_check), run by the worker
right after indexing stored the entry's vectors and before search.hooks.memory_indexed
announces it, so that freshness's contradiction pass sees the outcome.

It asks what search.dedup asks of a single save, with the vectors indexing just
stored instead of an embedding in the request: the team's nearest other active entry
(one nearest-neighbour lookup, selectors.nearest_other_active_entries), a duplicate
from Team.dedup_threshold up unless the texts disagree (search.hooks.texts_disagree).
Nothing is embedded here.
"""

from __future__ import annotations

import logging
import uuid

from memories.batch import settle_near_check
from memories.hooks import DuplicateMatch
from memories.models import Memory
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
    if not nearest or nearest[0][1] < team.dedup_threshold:
        return None
    other = Memory.objects.for_team(team.id).active().filter(id=nearest[0][0]).first()
    if other is None:
        return None
    similarity = round(min(nearest[0][1], 1.0), 6)
    if hooks.texts_disagree.first(
        team=team, new_text=memory.content, old_text=other.content, similarity=similarity
    ):
        logger.info(
            "team %s: %s near %s (%.3f) but disagrees: kept", team.slug, memory.key, other.key, similarity
        )
        return None
    return DuplicateMatch(
        memory=other, similarity=similarity, matched_by="embedding", threshold=team.dedup_threshold
    )
