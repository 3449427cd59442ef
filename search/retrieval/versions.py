"""Step 1b, one entry per key: a key shows up in results as its current entry, and a
replaced version only when asked, below that entry.

- The paths read replaced (superseded) versions too, so that the current entry of a
  key can take the best of its versions' matches: if an old wording matches the query
  better, the key still ranks by it, but it is the current entry that is shown.
- `head`: the version of a key that was not replaced (its active entry, or its
  archived one when archived entries are asked for) and passes the search's filters.
- A superseded version is dropped unless `include_superseded`; when kept it never
  ranks above its head (`attach_versions`): it comes right after it.
- A superseded version whose key has no head in the search (its current entry is
  filtered out, or archived and not asked for) stands on its own when asked for.

Pure functions over the candidates and their memories, linear in their number; the
heads missing from the candidates are read by the caller (search.selectors).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import replace

from memories.models import Memory
from search.retrieval.candidates import Candidate
from search.retrieval.scoring import Scored


def is_superseded(memory: Memory) -> bool:
    """Replaced by a newer version of its key (not deleted, not archived)."""
    return not memory.is_active and memory.deleted_at is None and memory.archived_at is None


def superseded_keys(memories: Iterable[Memory]) -> set[str]:
    """The keys of the superseded versions among `memories`: those whose head to look up."""
    return {m.key for m in memories if is_superseded(m)}


def collapse_versions(
    found: dict[uuid.UUID, Candidate],
    memories: Mapping[uuid.UUID, Memory],
    heads: Mapping[str, Memory],
    *,
    include_superseded: bool,
    left_out: frozenset[uuid.UUID] = frozenset(),
) -> dict[uuid.UUID, uuid.UUID]:
    """Give each head in `heads` (by key) the best of its versions' matches, path by
    path, adding it to `found` when only an old version was found; drop superseded
    versions unless `include_superseded`. Returns {kept superseded version: its head}.
    A head in `left_out` (a skill the query fired, listed above the results) is not
    added. Changes `found` in place."""
    head_of: dict[uuid.UUID, uuid.UUID] = {}
    for version in list(found.values()):
        memory = memories[version.memory_id]
        if not is_superseded(memory):
            continue
        head = heads.get(memory.key)
        if head is not None and head.id not in left_out:
            _take_best(found.setdefault(head.id, Candidate(head.id)), version)
            if include_superseded:
                head_of[version.memory_id] = head.id
        if not include_superseded:
            del found[version.memory_id]
    return head_of


def _take_best(head: Candidate, version: Candidate) -> None:
    """The head's path scores become the best of its own and the version's. Its chunks
    stay its own, so a snippet never shows replaced text as the current one."""
    head.keyword_rank = max(head.keyword_rank, version.keyword_rank)
    if version.similarity is not None:
        head.similarity = max(head.similarity or 0.0, version.similarity)
    head.found_by |= version.found_by


def heads_first(ranked: list[Scored], head_of: Mapping[uuid.UUID, uuid.UUID]) -> list[Scored]:
    """`ranked` (best first) with each head scoring at least as high as its best kept
    version: a version may still score higher after decay or rating (an old
    `identity` wording does not decay, a current `context` one does). Re-sorted."""
    best: dict[uuid.UUID, float] = {}
    for item in ranked:
        head = head_of.get(item.candidate.memory_id)
        if head is not None:
            best[head] = max(best.get(head, 0.0), item.score)
    if not best:
        return ranked
    raised = [
        replace(item, score=best[item.candidate.memory_id])
        if best.get(item.candidate.memory_id, 0.0) > item.score
        else item
        for item in ranked
    ]
    raised.sort(key=lambda item: (-item.score, str(item.candidate.memory_id)))
    return raised


def attach_versions(
    picked: list[Scored], versions: list[Scored], head_of: Mapping[uuid.UUID, uuid.UUID], limit: int
) -> list[Scored]:
    """`picked` (heads and lone versions, in rank order) with each kept version of a
    picked head right after that head, best first, cut at `limit`. Versions of heads
    that were not picked are not shown."""
    by_head: dict[uuid.UUID, list[Scored]] = {}
    for item in versions:  # best first already
        by_head.setdefault(head_of[item.candidate.memory_id], []).append(item)
    ordered: list[Scored] = []
    for item in picked:
        ordered.append(item)
        ordered.extend(by_head.get(item.candidate.memory_id, ()))
        if len(ordered) >= limit:
            break
    return ordered[:limit]
