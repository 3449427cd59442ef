"""The contradiction pass: after the worker indexed entries (search.hooks.memories_indexed),
their nearest active entries of other keys are judged (freshness.contradictions) and a
contradicting pair opens one `contradiction` nudge; `texts_disagree` tells the
duplicate check that a near match disagreeing is no duplicate."""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet
from django.db.models.functions import Left

from freshness import contradictions
from freshness.models import Nudge, NudgeKind
from memories import writes
from memories.models import Memory
from search.hooks import IndexedEntry
from search.selectors import nearest_other_active_entries, nearest_other_active_entries_of_batch
from teams.models import Team
from teams.scope import team_scope
from teams.scrubber import SecretMatcher, scrub
from teams.vault_matcher import team_secret_matcher

logger = logging.getLogger(__name__)

# At most this many contradiction nudges open for one saved entry; past it, none (see
# raise_contradictions).
MAX_CONTRADICTIONS_PER_SAVE = 3


@dataclass
class ContradictionRun:
    """What one look for contradictions did: `compared` candidates judged, `raised`
    nudges opened (0 on a re-run: the pair has its nudge)."""

    compared: int = 0
    raised: int = 0


def raise_contradictions(*, entries: list[IndexedEntry]) -> ContradictionRun:
    """After search.hooks.memories_indexed: each freshly indexed active entry (all of
    one team and model) against the team's other active entries nearest to it
    (pgvector, at most contradictions.MAX_CANDIDATES, from contradictions.BAND_FLOOR
    up), each pair judged by contradictions.judge_pair. A contradicting pair opens one
    `contradiction` nudge: `memory` the newer entry, `other_memory` the older (one order,
    whichever of the two was indexed, so the open-nudge constraint sees one pair), the
    seed's message, the verdict's confidence, and flags the older entry `contradicted_at`.

    At most MAX_CONTRADICTIONS_PER_SAVE nudges per entry: an entry that disagrees with
    more of its neighbours than that at once is one of a family of template-like entries
    far more often than a reversal, so none is opened (and the count is logged).

    The band reaches past the duplicate threshold: a near-duplicate that disagrees is
    saved (search.duplicates_on_save asks texts_disagree) and must be flagged here. A pair that ever
    had a contradiction nudge, open or closed (compatible, confirmed, dismissed,
    superseded), is never raised again. Idempotent and bounded.

    A batch costs what one entry does, a few times over: its neighbours come from one
    exact scan (or one index search per entry on a large team), the texts and past
    nudges of every pair from one read each, every text is scrubbed once and every pair
    judged once. The reads are one transaction; each nudge is opened in its own."""
    run = ContradictionRun()
    if not entries:
        return run
    team_id, model, dimensions = entries[0].team_id, entries[0].model, entries[0].dimensions
    with team_scope(team_id):
        team = Team.objects.get(id=team_id)
        wanted = list(dict.fromkeys(entry.memory_id for entry in entries))
        found = {
            m.id: m for m in _with_openings(Memory.objects.filter(team=team, id__in=wanted, is_active=True))
        }
        batch = [found[memory_id] for memory_id in wanted if memory_id in found]
        if not batch:
            return run
        bands = _bands_of(team, batch, model=model, dimensions=dimensions)
        near_ids = {other_id for band in bands.values() for other_id in band}
        others = {
            m.id: m
            for m in _with_openings(Memory.objects.filter(team=team, id__in=list(near_ids), is_active=True))
        }
        others.update(found)
        raised_pairs = _pairs_ever_raised(team, list(found), list(near_ids))
        # The texts are judged as scrubbed now (credential shapes, the team's vault secrets):
        # the verdict's subject and the nudge quote them, and a rule or secret added since
        # the save must still hold.
        secrets = team_secret_matcher(team_id=team.id) if near_ids else SecretMatcher(())
    scrubbed: dict[uuid.UUID, str] = {}
    verdicts: dict[frozenset[uuid.UUID], contradictions.Verdict] = {}

    def text_of(memory: Memory) -> str:
        if memory.id not in scrubbed:
            scrubbed[memory.id] = scrub(memory.opening, secrets).text  # type: ignore[attr-defined]
        return scrubbed[memory.id]

    for memory in batch:
        found_here: list[tuple[Memory, Memory, float, contradictions.Verdict]] = []
        for other_id, band_similarity in bands[memory.id].items():
            pair = frozenset((memory.id, other_id))
            other = others.get(other_id)
            if other is None or pair in raised_pairs:
                continue
            similarity = min(band_similarity, 1.0)
            newer, older = sorted([memory, other], key=lambda m: (m.created_at, str(m.id)), reverse=True)
            run.compared += 1
            if pair not in verdicts:
                verdicts[pair] = contradictions.judge_pair(
                    text_of(newer), text_of(older), similarity, duplicate_threshold=team.dedup_threshold
                )
            if verdicts[pair].label == contradictions.Label.CONTRADICTING:
                found_here.append((newer, older, similarity, verdicts[pair]))
        if len(found_here) > MAX_CONTRADICTIONS_PER_SAVE:
            logger.info(
                "team %s: %s disagrees with %d entries at once; read as template-like, no nudge opened",
                team.slug,
                memory.key,
                len(found_here),
            )
            continue
        opened = 0
        for newer, older, similarity, verdict in found_here:
            message = contradictions.contradiction_message(old_text=text_of(older), new_text=text_of(newer))
            with team_scope(team_id):
                if _open_contradiction(
                    team, newer, older, similarity=similarity, verdict=verdict, message=message
                ):
                    raised_pairs.add(frozenset((newer.id, older.id)))
                    opened += 1
        if opened:
            logger.info("team %s: %d contradiction(s) with %s", team.slug, opened, memory.key)
        run.raised += opened
    return run


def _with_openings(entries: QuerySet[Memory]) -> QuerySet[Memory]:
    """The entries with what the pass needs of them: their `opening`, twice what the judge
    reads (so a secret across the judge's bound is scrubbed whole), not their whole text:
    a batch's 2,000 neighbours of up to 64 KiB each would be 128 MB."""
    return entries.only("id", "team_id", "key", "created_at").annotate(
        opening=Left("content", 2 * contradictions.MAX_JUDGED_CHARS)
    )


def _bands_of(
    team: Team, batch: list[Memory], *, model: str, dimensions: int
) -> dict[uuid.UUID, dict[uuid.UUID, float]]:
    """Each entry's nearest other active entries from contradictions.BAND_FLOOR up
    (closest first, at most contradictions.MAX_CANDIDATES): one exact scan for the
    batch, or one search per entry when the team is searched through the index."""
    ids = [memory.id for memory in batch]
    nearest = nearest_other_active_entries_of_batch(
        team_id=team.id,
        batch=[(memory.id, memory.key, False) for memory in batch],
        checked=set(ids),
        model=model,
        limit=contradictions.MAX_CANDIDATES,
    )
    if nearest is None:
        nearest = {
            memory_id: nearest_other_active_entries(
                team_id=team.id,
                memory_id=memory_id,
                model=model,
                dimensions=dimensions,
                limit=contradictions.MAX_CANDIDATES,
            )
            for memory_id in ids
        }
    return {
        memory_id: {
            other_id: similarity
            for other_id, similarity in nearest.get(memory_id, [])
            if similarity >= contradictions.BAND_FLOOR
        }
        for memory_id in ids
    }


def contradictions_after_indexing(*, entries: list[IndexedEntry]) -> None:
    """Receiver of search.hooks.memories_indexed: raise_contradictions."""
    raise_contradictions(entries=entries)


def _pairs_ever_raised(
    team: Team, memory_ids: list[uuid.UUID], other_ids: list[uuid.UUID]
) -> set[frozenset[uuid.UUID]]:
    """The pairs of one of `memory_ids` and one of `other_ids` that ever had a
    contradiction nudge, open or closed, in either order."""
    if not memory_ids or not other_ids:
        return set()
    either_order = Q(memory_id__in=memory_ids, other_memory_id__in=other_ids) | Q(
        other_memory_id__in=memory_ids, memory_id__in=other_ids
    )
    pairs = Nudge.objects.filter(team=team, kind=NudgeKind.CONTRADICTION).filter(either_order)
    return {frozenset(pair) for pair in pairs.values_list("memory_id", "other_memory_id")}


def _open_contradiction(
    team: Team,
    newer: Memory,
    older: Memory,
    *,
    similarity: float,
    verdict: contradictions.Verdict,
    message: str,
) -> bool:
    """One nudge for the pair (`message` quotes the scrubbed texts); False when a
    concurrent run opened it first."""
    try:
        with transaction.atomic():
            Nudge.objects.create(
                team=team,
                kind=NudgeKind.CONTRADICTION,
                memory=newer,
                other_memory=older,
                message=message,
                confidence=verdict.confidence,
                details={
                    "similarity": round(similarity, 4),
                    "reason": verdict.reason,
                    "rule": verdict.rule,
                    "subject": list(verdict.subject),
                },
            )
    except IntegrityError:
        return False
    writes.set_freshness_flag(team=team, memory_ids=[older.id], flag="contradicted_at", on=True)
    return True


def texts_disagree(*, team: Team, new_text: str, old_text: str, similarity: float) -> bool:
    """Receiver of search.hooks.texts_disagree: the duplicate check's near match is no
    duplicate when the rules find a contradiction ("port is 5432" / "port is 6432")."""
    verdict = contradictions.judge_pair(
        new_text, old_text, similarity, duplicate_threshold=team.dedup_threshold
    )
    return verdict.label == contradictions.Label.CONTRADICTING
