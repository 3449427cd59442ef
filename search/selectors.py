"""Search reads: the hybrid search of a team's memories, and the nearest-entry lookup
of the duplicate check. The pipeline's steps live in search.retrieval (see its
docstring); `search_memories` runs them. No function here calls an embedding
provider: the query's vector comes in ready, or as a call that waits for it
(search.run_search embeds it).

A key comes back once, as its current entry, ranked by the best of its versions'
matches; replaced (superseded) versions only when asked (`include_superseded`), marked
with what replaced them and below their key's current entry (search.retrieval.versions).
Deleted ones never come back; archived ones only when asked (`include_archived`).
Counting the results as accesses is the caller's write (the API calls
memories.feedback.record_access).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from core.db_router import read_connection, statements_limited_to
from core.errors import InvalidInput
from core.metric_definitions import observe_search, timed
from core.prepared_statements import model_columns, model_instances
from memories.metadata_extraction import metadata_filter_document, normalise_filter_values
from memories.models import Memory
from memories.personal import personal_owner_name
from memories.scopes import ScopeWindows
from memories.selectors import annotations_for, successors_of
from search.models import ChunkEmbedding
from search.retrieval.candidates import (
    NESTED_LOOPS_BACK,
    NESTED_LOOPS_OFF,
    Candidate,
    QueryVector,
    SearchFilters,
    SearchMode,
    VectorOrWait,
    gather_candidates,
    scanned_through_index,
    vector_matches,
)
from search.retrieval.entities import query_entities
from search.retrieval.identifiers import is_identifier_query
from search.retrieval.mmr import diversify as diversify_top
from search.retrieval.results import SearchOutcome, chunk_snippets, scored_results
from search.retrieval.scoring import Weights, score_candidates
from search.retrieval.skills import FiredSkill, drop_fired, fire_skills, skill_results
from search.retrieval.versions import attach_versions, collapse_versions, heads_first, superseded_keys
from teams.models import Team

# A search's candidates, by id (every version: a key's current entry takes the best match).
_CANDIDATE_MEMORIES = (
    f"SELECT {model_columns(Memory, 'm')} FROM memories_memory m"  # noqa: S608 (constants)
    " WHERE m.team_id = %s AND m.id = ANY(%s)"
)

MAX_QUERY_CHARS = 8000
MAX_RESULTS = 50
# A hybrid search that is not given a min_score leaves out candidates whose relevance
# (w_vec * cosine + w_kw * keyword plus the entity bonus, before age decay and rating)
# is below this: filler that matched nothing well. Chosen on the quality bench as the highest floor
# that costs no R@5 on any task (docs/search.md, "Relevance floor").
RELEVANCE_FLOOR = 0.2


def check_search_input(*, query: str, max_results: int) -> str:
    """The query without surrounding whitespace; InvalidInput when it is empty or too
    long, or when max_results is out of range."""
    query = query.strip()
    if not query:
        raise InvalidInput("query must not be empty", field="query")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidInput(f"query is limited to {MAX_QUERY_CHARS} characters", field="query")
    if not 1 <= max_results <= MAX_RESULTS:
        raise InvalidInput(f"max_results must be between 1 and {MAX_RESULTS}", field="max_results")
    return query


def search_memories(
    *,
    team: Team,
    query: str,
    embedding: VectorOrWait,
    max_results: int = 5,
    min_score: float | None = None,
    types: list[str] | None = None,
    project: str | None = None,
    include_superseded: bool = False,
    include_archived: bool = False,
    tags: list[str] | None = None,
    people: list[str] | None = None,
    topics: list[str] | None = None,
    explain: bool = False,
    mode: SearchMode = "hybrid",
    diversify: bool = True,
    decay: bool = True,
    entity_boost: bool = True,
    identifier_lead: bool = True,
) -> SearchOutcome:
    """Search the team's memories with the query's `embedding` (None: keyword only,
    search_mode "keyword"; a call that waits for it: called once the keyword path has
    read, in hybrid mode). `entity_boost`: the query's names and quoted phrases found
    exactly in an entry raise it (hybrid only, search.retrieval.entities).
    `identifier_lead`: an identifier-like query (search.retrieval.identifiers) lets the
    keyword path lead in hybrid mode. The caller is inside the team's scope."""
    query = check_search_input(query=query, max_results=max_results)
    vector: VectorOrWait = None
    if mode == "hybrid":
        vector = embedding
    elif mode == "vector":
        vector = embedding() if callable(embedding) else embedding
    search_mode: SearchMode = mode if vector is not None else "keyword"
    filters = SearchFilters(
        team_id=team.id,
        types=types,
        project=project,
        include_superseded=include_superseded,
        include_archived=include_archived,
        metadata=metadata_filter_document(tags, people),
        topics=normalise_filter_values(topics) or None,
    )
    timings: dict[str, float] = {}
    read = _read_candidates(
        team,
        query,
        vector,
        filters,
        mode=search_mode,
        limit=max(max_results * 4, 40),
        tags=tags,
        people=people,
        timings=timings,
    )
    if callable(vector) and vector() is None:
        search_mode = "keyword"
    with timed(timings, "merge"):
        ranked = score_candidates(
            read.found.values(),
            read.memories,
            mode=search_mode,
            weights=Weights(vector=team.hybrid_vector_weight, keyword=team.hybrid_keyword_weight),
            half_life_days=team.decay_half_life_days,
            scopes=ScopeWindows.for_team(team),
            now=timezone.now(),
            decay=decay,
            min_score=min_score,
            entities=query_entities(query) if entity_boost else (),
            keyword_leads=identifier_lead and is_identifier_query(query),
            # A caller's min_score replaces the floor: it keeps its meaning as given.
            relevance_floor=RELEVANCE_FLOOR if min_score is None and search_mode == "hybrid" else None,
        )
        # A head scores at least as high as its versions; the versions kept (when asked)
        # do not compete in diversification, they follow their head.
        ranked = heads_first(ranked, read.head_of)
        versions = [item for item in ranked if item.candidate.memory_id in read.head_of]
        ranked = [item for item in ranked if item.candidate.memory_id not in read.head_of]
        if diversify:
            ranked = diversify_top(ranked, {m.id: m.content for m in read.memories.values()}, max_results)
    picked = attach_versions(ranked[:max_results], versions, read.head_of, max_results)
    notes = annotations_for(team.id, [m.id for m, _ in read.fired] + [s.candidate.memory_id for s in picked])
    results = skill_results(read.fired, notes) + scored_results(
        picked,
        read.memories,
        snippets=read.snippets,
        successors=read.successors,
        notes=notes,
        explain=explain,
    )
    observe_search(mode=search_mode, timings=timings)
    return SearchOutcome(search_mode=search_mode, results=results)


@dataclass
class _Read:
    """What one search reads from the database, in one snapshot."""

    fired: list[FiredSkill]
    found: dict[uuid.UUID, Candidate]
    memories: dict[uuid.UUID, Memory]
    snippets: dict[uuid.UUID, str]
    successors: dict[uuid.UUID, dict[str, Any]]
    # Each superseded version kept in the results: the current entry of its key.
    head_of: dict[uuid.UUID, uuid.UUID]


def _read_candidates(
    team: Team,
    query: str,
    vector: VectorOrWait,
    filters: SearchFilters,
    *,
    mode: SearchMode,
    limit: int,
    tags: list[str] | None,
    people: list[str] | None,
    timings: dict[str, float],
) -> _Read:
    """The fired skills (in the filters' project and types, with the tags and people)
    and the candidates, a fired skill not being a candidate too, collapsed to one entry
    per key (search.retrieval.versions), with their memories, snippets and successors.
    In a replica block, on the replica (core.db_router)."""
    # No savepoint of its own: a statement that fails here fails the whole search (a
    # cancelled one answers 503), so there is nothing to roll back to and go on from.
    with (
        transaction.atomic(using=read_connection().alias, savepoint=False),
        statements_limited_to(settings.MEMORYHUB_SEARCH_STATEMENT_TIMEOUT_MS),
    ):
        fired = fire_skills(
            team_id=team.id,
            query=query,
            project=filters.project,
            types=filters.types,
            tags=tags,
            people=people,
            topics=filters.topics,
        )
        # Every version is read, so that a key's current entry can take the best match.
        everything = replace(filters, include_superseded=True)
        found = gather_candidates(
            query=query, vector=vector, filters=everything, mode=mode, limit=limit, timings=timings
        )
        drop_fired(found, fired)
        memories = {m.id: m for m in model_instances(Memory, _CANDIDATE_MEMORIES, [team.id, list(found)])}
        heads = _heads(everything, superseded_keys(memories.values()))
        memories.update((head.id, head) for head in heads.values())
        head_of = collapse_versions(
            found,
            memories,
            heads,
            include_superseded=filters.include_superseded,
            left_out=frozenset(memory.id for memory, _ in fired),
        )
        snippets = chunk_snippets(team_id=team.id, candidates=found)
        inactive = [memory_id for memory_id in found if not memories[memory_id].is_active]
        successors = successors_of(team_id=team.id, memory_ids=inactive)
    return _Read(fired, found, memories, snippets, successors, head_of)


def _heads(filters: SearchFilters, keys: set[str]) -> dict[str, Memory]:
    """The current entry (active, or archived when the filters let archived entries in)
    of each of `keys` that passes the filters, by key. One query."""
    if not keys:
        return {}
    where, params = filters.sql()
    rows = model_instances(
        Memory,
        f"SELECT {model_columns(Memory, 'm')} FROM memories_memory m WHERE {where} AND m.key = ANY(%s)"  # noqa: S608 (constants)
        " AND (m.is_active OR m.archived_at IS NOT NULL)",
        [*params, sorted(keys)],
    )
    return {row.key: row for row in rows}


def has_active_vectors(*, team_id: int, model: str) -> bool:
    """Whether any active entry of the team has a vector of `model` (a save skips
    embedding for the duplicate check when there is nothing to compare with)."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT EXISTS (
                SELECT 1 FROM search_chunkembedding e
                JOIN search_chunk c ON c.id = e.chunk_id
                JOIN memories_memory m ON m.id = c.memory_id
                WHERE e.team_id = %s AND e.model = %s AND m.team_id = %s AND m.is_active
            )
            """,
            [team_id, model, team_id],
        )
        return bool(cursor.fetchone()[0])


def nearest_active_memory(
    *, team_id: int, model: str, dimensions: int, vectors: list[list[float]], key: str
) -> tuple[uuid.UUID, float] | None:
    """The active entry of the team, of the same owner as `key` (the key about to be
    saved), whose nearest chunk is closest to any of `vectors` (the chunks of its text,
    embedded with `model`), with that cosine similarity: the similarity of two entries
    is the best over all pairs of their chunks. Only vectors of `model` count; entries
    not indexed yet are not seen."""
    filters = SearchFilters(
        team_id=team_id, types=None, project=None, include_superseded=False, same_owner_as=key
    )
    best: tuple[uuid.UUID, float] | None = None
    for values in vectors:
        query = QueryVector(values=values, model=model, dimensions=dimensions)
        for memory_id, similarity, _chunk in vector_matches(query, filters, limit=1):
            if best is None or similarity > best[1]:
                best = (memory_id, similarity)
    return best


# An entry's chunks compared with the team's other entries: the opening ones only (an
# entry states its point first), so a long entry costs what a short one does.
MAX_COMPARED_CHUNKS = 4


def nearest_other_active_entries(
    *,
    team_id: int,
    memory_id: uuid.UUID,
    model: str,
    dimensions: int,
    limit: int,
    excluded: frozenset[uuid.UUID] = frozenset(),
) -> list[tuple[uuid.UUID, float]]:
    """The team's other active entries nearest to the entry `memory_id` (its vectors of
    `model`, as indexing stored them), with their cosine similarity (the best over
    pairs of chunks), closest first, at most `limit`. Archived, superseded and deleted
    entries are not compared; another team's never (the team filter, and the scope), nor
    another owner's (SearchFilters.same_owner_as), nor those `excluded`."""
    vectors = list(
        ChunkEmbedding.objects.filter(team_id=team_id, chunk__memory_id=memory_id, model=model)
        .order_by("chunk__chunk_index")
        .values_list("embedding", flat=True)[:MAX_COMPARED_CHUNKS]
    )
    key = Memory.objects.filter(team_id=team_id, id=memory_id).values_list("key", flat=True).first()
    if key is None:
        return []
    filters = SearchFilters(
        team_id=team_id, types=None, project=None, include_superseded=False, same_owner_as=key
    )
    best: dict[uuid.UUID, float] = {}
    for values in vectors:
        query = QueryVector(values=[float(v) for v in values], model=model, dimensions=dimensions)
        # One more than asked: the entry itself is its own nearest (and the excluded).
        for other_id, similarity, _chunk in vector_matches(query, filters, limit=limit + 1 + len(excluded)):
            if other_id != memory_id and other_id not in excluded and similarity > best.get(other_id, -1.0):
                best[other_id] = similarity
    ranked = sorted(best.items(), key=lambda item: (-item[1], str(item[0])))
    return ranked[:limit]


def nearest_other_active_entries_of_batch(
    *,
    team_id: int,
    batch: list[tuple[uuid.UUID, str, bool]],
    checked: set[uuid.UUID],
    model: str,
    limit: int = 1,
) -> dict[uuid.UUID, list[tuple[uuid.UUID, float]]] | None:
    """nearest_other_active_entries of each `checked` entry of a batch, in one exact
    scan per owner instead of one per entry and chunk. `batch` is the batch's
    entries in indexing order, (id, key, unseen): an `unseen` entry had no vector before
    the batch stored them, and is not compared with the entries before it, as when each
    entry was checked right after its own indexing (a later entry's vectors did not
    exist yet). None when the team is searched through the HNSW index (EXACT_SCAN_BELOW
    vectors or more): the caller looks entry by entry then. The caller is inside the
    team's scope and a transaction."""
    with connection.cursor() as cursor:
        if scanned_through_index(cursor, team_id, model):
            return None
        # Hash joins only, as the single entry's exact scan (search.retrieval.candidates).
        cursor.execute(NESTED_LOOPS_OFF)
        owners: dict[str | None, list[uuid.UUID]] = {}
        keys = {memory_id: key for memory_id, key, _unseen in batch}
        for memory_id, key, _unseen in batch:
            if memory_id in checked:
                owners.setdefault(personal_owner_name(key), []).append(memory_id)
        found: dict[uuid.UUID, list[tuple[uuid.UUID, float]]] = {memory_id: [] for memory_id in checked}
        for ids in owners.values():
            filters = SearchFilters(
                team_id=team_id,
                types=None,
                project=None,
                include_superseded=False,
                same_owner_as=keys[ids[0]],
            )
            where, params = filters.sql()
            cursor.execute(
                f"""
                WITH batch AS MATERIALIZED (
                    SELECT * FROM unnest(%s::uuid[], %s::int[], %s::bool[]) AS b(id, position, unseen)
                ), queries AS MATERIALIZED (
                    SELECT c.memory_id AS id, b.position, e.embedding
                    FROM search_chunk c JOIN batch b ON b.id = c.memory_id
                    JOIN search_chunkembedding e ON e.chunk_id = c.id
                    WHERE c.team_id = %s AND e.team_id = %s AND e.model = %s
                      AND c.memory_id = ANY(%s::uuid[]) AND c.chunk_index < %s
                ), candidates AS MATERIALIZED (
                    SELECT c.memory_id AS id, e.embedding
                    FROM search_chunkembedding e
                    JOIN search_chunk c ON c.id = e.chunk_id
                    JOIN memories_memory m ON m.id = c.memory_id
                    WHERE e.team_id = %s AND e.model = %s AND {where}
                ), pairs AS (
                    SELECT q.id AS query_id, k.id AS other_id, min(q.embedding <=> k.embedding) AS distance
                    FROM queries q CROSS JOIN candidates k LEFT JOIN batch later ON later.id = k.id
                    WHERE k.id <> q.id
                      AND NOT (later.id IS NOT NULL AND later.unseen AND later.position > q.position)
                    GROUP BY q.id, k.id
                )
                SELECT query_id, other_id, distance FROM (
                    SELECT query_id, other_id, distance,
                           row_number() OVER (PARTITION BY query_id ORDER BY distance, other_id) AS place
                    FROM pairs
                ) ranked
                WHERE place <= %s ORDER BY query_id, place
                """,  # noqa: S608 (constants and SearchFilters' clauses)
                [
                    [memory_id for memory_id, _key, _unseen in batch],
                    list(range(len(batch))),
                    [unseen for _id, _key, unseen in batch],
                    team_id,
                    team_id,
                    model,
                    ids,
                    MAX_COMPARED_CHUNKS,
                    team_id,
                    model,
                    *params,
                    limit,
                ],
            )
            for query_id, other_id, distance in cursor.fetchall():
                found[query_id].append((other_id, max(0.0, 1.0 - float(distance))))
        cursor.execute(NESTED_LOOPS_BACK)
    return found
