"""Answering a search query: embed the query with the team's provider (the one network
call of a search, made outside the API request's transaction; a model in this process
runs on a thread while the keyword path reads), then run the selector with that vector.

No provider, a broken profile or a dead endpoint → keyword only, search_mode
"keyword", a logged warning that also goes back in the outcome; never an error.
"""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import asdict, dataclass, replace
from functools import partial
from typing import Any

from core.metric_definitions import QUERY_EMBEDDING_SECONDS
from core.process_thread_pools import ProcessThreadPool
from core.request_transaction import outside_request_transaction
from memories import feedback
from search import selectors, unified
from search.embeddings.base import EmbeddingProvider, EmbeddingUnavailable
from search.retrieval.candidates import QueryVector, SearchMode
from search.retrieval.results import SearchOutcome, SearchResult, shorten
from search.services import team_provider
from teams.models import Team
from teams.scrubber import scrub
from teams.vault_matcher import team_secret_matcher

logger = logging.getLogger(__name__)

PROVIDER_UNAVAILABLE_WARNING = "embedding provider unavailable: answering keyword-only"


Embedded = tuple[QueryVector | None, list[str]]


def embed_query(*, team: Team, query: str) -> Embedded:
    """The query's vector in the team's vector space, and the warnings to show: None
    and no warning when the team's profile has no embeddings, None and a warning when
    the provider is unavailable."""
    return start_query_embedding(team=team, query=query, on_a_thread=False).wait()


class QueryEmbedding:
    """A query's embedding, started by start_query_embedding: `wait` answers what
    embed_query answers, once it is ready; `vector` is its vector alone (a call
    search_memories may wait on: search.retrieval.candidates.VectorOrWait)."""

    def __init__(self, future: Future[Embedded]) -> None:
        self._future = future

    @classmethod
    def ready(cls, embedded: Embedded) -> QueryEmbedding:
        future: Future[Embedded] = Future()
        future.set_result(embedded)
        return cls(future)

    def wait(self) -> Embedded:
        return self._future.result()

    def vector(self) -> QueryVector | None:
        return self.wait()[0]


def start_query_embedding(*, team: Team, query: str, on_a_thread: bool = True) -> QueryEmbedding:
    """Start embedding the query in the team's vector space. A model in this process
    runs on a thread of its own (`on_a_thread`): the model releases the GIL, so the
    keyword path's statements run meanwhile and a hybrid search waits for the longer of
    the two, not their sum. A model behind the network is called here, outside the
    request's transaction, as before."""
    started = time.perf_counter()
    try:
        provider = team_provider(team)
        if provider is None:
            return QueryEmbedding.ready((None, []))
        if on_a_thread and not provider.waits_on_network:
            # The caller's context (its request id in log lines) goes with the call.
            call = partial(contextvars.copy_context().run, _embed, team, provider, query)
            return QueryEmbedding(future=_EMBEDDING_THREADS.pool().submit(call))
        # A query to a model in this process keeps the transaction: stepping out and back
        # in would cost a COMMIT, a BEGIN and the team's binding, more than the wait.
        with outside_request_transaction() if provider.waits_on_network else nullcontext():
            return QueryEmbedding.ready(_embed(team, provider, query))
    except EmbeddingUnavailable as exc:
        return QueryEmbedding.ready(_unavailable(team, exc, started))


def _embed(team: Team, provider: EmbeddingProvider, query: str) -> Embedded:
    started = time.perf_counter()
    try:
        values = provider.embed_query(query)
    except EmbeddingUnavailable as exc:
        return _unavailable(team, exc, started)
    QUERY_EMBEDDING_SECONDS.labels(outcome="ok").observe(time.perf_counter() - started)
    return QueryVector(values=values, model=provider.model, dimensions=provider.dimensions), []


def _unavailable(team: Team, exc: EmbeddingUnavailable, started: float) -> Embedded:
    QUERY_EMBEDDING_SECONDS.labels(outcome="unavailable").observe(time.perf_counter() - started)
    # The detail (the provider's URL, its error body) is for operators: the log
    # has it, the caller only learns that search fell back to keywords.
    logger.warning("team %s: vector search unavailable, answering keyword-only: %s", team.slug, exc)
    return None, [PROVIDER_UNAVAILABLE_WARNING]


# Threads per process that embed queries: as many searches as a web process serves at
# once (gunicorn's threads) embed side by side; more would only queue for the cores.
QUERY_EMBEDDING_THREADS = 4
_EMBEDDING_THREADS = ProcessThreadPool(
    lambda: ThreadPoolExecutor(QUERY_EMBEDDING_THREADS, thread_name_prefix="query-embedding")
)


SOURCES = ("memories", "facts", "conversations")
DEFAULT_SOURCES = ("memories", "facts")


def embed_and_search(
    *,
    team: Team,
    query: str,
    mode: SearchMode = "hybrid",
    max_results: int = 5,
    sources: tuple[str, ...] = ("memories",),
    may_see_high: bool = False,
    **options: Any,
) -> SearchOutcome:
    """Search the team's `sources` (memories, facts, conversations), embedding the query
    first unless `mode` is keyword (or only facts are searched); `options` are
    search.selectors.search_memories' keyword arguments (filters, explain, diversify,
    decay...). Each source gives at most `max_results` hits; they merge into one list by
    score (merge_sources). Bad input is refused before anything is sent to the provider.
    The caller is inside the team's scope."""
    query = selectors.check_search_input(query=query, max_results=max_results)
    needs_vector = mode != "keyword" and ("memories" in sources or "conversations" in sources)
    pending = (
        start_query_embedding(team=team, query=query) if needs_vector else QueryEmbedding.ready((None, []))
    )
    if "memories" in sources:
        outcome = selectors.search_memories(
            team=team, query=query, embedding=pending.vector, mode=mode, max_results=max_results, **options
        )
    embedding, warnings = pending.wait()
    if "memories" not in sources:
        outcome = SearchOutcome(search_mode=mode if embedding is not None else "keyword", results=[])
    others: list[SearchResult] = []
    if "facts" in sources:
        facts = unified.search_facts(team=team, query=query, may_see_high=may_see_high, limit=max_results)
        others += [fact_result(hit) for hit in facts]
    if "conversations" in sources:
        effective = mode if embedding is not None or mode == "keyword" else "keyword"
        found = unified.search_conversations(
            team=team, query=query, embedding=embedding, mode=effective, limit=max_results
        )
        others += [conversation_result(hit) for hit in found]
    min_score = options.get("min_score")
    if min_score is not None:
        others = [hit for hit in others if hit.score >= min_score]
    return replace(
        outcome, results=merge_sources(outcome.results, others), warnings=[*warnings, *outcome.warnings]
    )


def merge_sources(memories: list[SearchResult], others: list[SearchResult]) -> list[SearchResult]:
    """One list: the memory results in their own order (skills first, a superseded
    version right after its key's current entry, as the memory pipeline placed them),
    with the other sources' hits placed before the first memory result that scores
    lower. The memory results keep their order among themselves whatever is added."""
    if not others:
        return memories
    pending = sorted(others, key=lambda hit: -hit.score)
    merged: list[SearchResult] = []
    for result in memories:
        if not result.via_skill_trigger and not result.superseded:
            while pending and pending[0].score > result.score:
                merged.append(pending.pop(0))
        merged.append(result)
    return merged + pending


def fact_result(hit: unified.FactHit) -> SearchResult:
    return SearchResult(
        memory_id=hit.id,
        key=f"{hit.entity}/{hit.key}",
        snippet=shorten(hit.value),
        score=hit.score,
        type="fact",
        is_active=True,
        source=hit.found_by,
        created_at=hit.created_at,
        origin="facts",
        fact={
            "entity": hit.entity,
            "key": hit.key,
            "value": hit.value,
            "scope": hit.scope,
            "sensitivity": hit.sensitivity,
        },
    )


def conversation_result(hit: unified.ConversationHit) -> SearchResult:
    return SearchResult(
        memory_id=hit.conversation_id,
        key=hit.title or str(hit.conversation_id),
        snippet=shorten(hit.text),
        score=hit.score,
        type="conversation",
        is_active=True,
        source=hit.found_by,
        created_at=hit.created_at,
        origin="conversations",
        conversation={
            "id": hit.conversation_id,
            "title": hit.title,
            "session": hit.session,
            "first_line": hit.first_line,
            "last_line": hit.last_line,
            "text": hit.text,
        },
    )


@dataclass(frozen=True)
class SearchArguments:
    """embed_and_search's arguments but the team, as every door passes them."""

    query: str
    max_results: int = 5
    min_score: float | None = None
    types: list[str] | None = None
    project: str | None = None
    include_superseded: bool = True
    include_archived: bool = False
    tags: list[str] | None = None
    people: list[str] | None = None
    topics: list[str] | None = None
    explain: bool = False
    mode: SearchMode = "hybrid"
    # The dashboard's searches are of memories; the doors' default is DEFAULT_SOURCES.
    sources: tuple[str, ...] = ("memories",)


def search_arguments(data: Mapping[str, Any]) -> SearchArguments:
    """A search in the API's words (the fields of search.api.SearchInputSerializer,
    validated) as the search's arguments; a field left out keeps its default."""
    names = SearchArguments.__dataclass_fields__
    arguments = {name: value for name, value in data.items() if name in names}
    if "sources" in arguments:
        arguments["sources"] = tuple(arguments["sources"])
    return SearchArguments(**arguments)


def search_for(
    *, team: Team, arguments: SearchArguments, count_access: bool = True, may_see_high: bool = False
) -> SearchOutcome:
    """A search as the doors run it. With `count_access` (an agent's search, over REST
    or MCP), every memory result handed over counts as an access of its entry, in one
    UPDATE; a person browsing the dashboard does not count. `may_see_high`: the reader
    may see `high` facts (a token with write scope).

    Every text handed over is scrubbed (credential shapes and the team's vault
    secrets): text stored before a scrubber rule or a vault secret existed never leaves
    through a search."""
    outcome = embed_and_search(team=team, may_see_high=may_see_high, **asdict(arguments))
    if outcome.results:
        # The team's row was read in this request's transaction, with its vault's version.
        secrets = team_secret_matcher(team_id=team.id, vault_version=team.vault_version)
        for result in outcome.results:
            result.snippet = scrub(result.snippet, secrets).text
            if result.fact is not None:
                result.fact["value"] = scrub(result.fact["value"], secrets).text
            if result.conversation is not None:
                result.conversation["text"] = scrub(result.conversation["text"], secrets).text
    if count_access:
        feedback.record_access(
            team=team, memory_ids=[r.memory_id for r in outcome.results if r.origin == "memories"]
        )
    return outcome
