"""Answering a search query: embed the query with the team's provider (the one network
call of a search, made outside the API request's transaction), then run the selector
with that vector.

No provider, a broken profile or a dead endpoint → keyword only, search_mode
"keyword", a logged warning that also goes back in the outcome; never an error.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from core.metric_definitions import QUERY_EMBEDDING_SECONDS
from core.request_transaction import outside_request_transaction
from memories import feedback
from search import selectors
from search.embeddings.base import EmbeddingUnavailable
from search.retrieval.candidates import QueryVector, SearchMode
from search.retrieval.results import SearchOutcome
from search.services import team_provider
from teams.models import Team
from teams.scrubber import scrub
from teams.vault_matcher import team_secret_matcher

logger = logging.getLogger(__name__)

PROVIDER_UNAVAILABLE_WARNING = "embedding provider unavailable: answering keyword-only"


def embed_query(*, team: Team, query: str) -> tuple[QueryVector | None, list[str]]:
    """The query's vector in the team's vector space, and the warnings to show: None
    and no warning when the team's profile has no embeddings, None and a warning when
    the provider is unavailable."""
    started = time.perf_counter()
    try:
        provider = team_provider(team)
        if provider is None:
            return None, []
        with outside_request_transaction():
            started = time.perf_counter()
            values = provider.embed_query(query)
        QUERY_EMBEDDING_SECONDS.labels(outcome="ok").observe(time.perf_counter() - started)
    except EmbeddingUnavailable as exc:
        QUERY_EMBEDDING_SECONDS.labels(outcome="unavailable").observe(time.perf_counter() - started)
        # The detail (the provider's URL, its error body) is for operators: the log
        # has it, the caller only learns that search fell back to keywords.
        logger.warning("team %s: vector search unavailable, answering keyword-only: %s", team.slug, exc)
        return None, [PROVIDER_UNAVAILABLE_WARNING]
    return QueryVector(values=values, model=provider.model, dimensions=provider.dimensions), []


def embed_and_search(
    *, team: Team, query: str, mode: SearchMode = "hybrid", max_results: int = 5, **options: Any
) -> SearchOutcome:
    """Search the team's memories, embedding the query first unless `mode` is keyword;
    `options` are search.selectors.search_memories' keyword arguments (filters, explain,
    diversify, decay...). Bad input is refused before anything is sent to the provider.
    The caller is inside the team's scope."""
    query = selectors.check_search_input(query=query, max_results=max_results)
    embedding, warnings = embed_query(team=team, query=query) if mode != "keyword" else (None, [])
    outcome = selectors.search_memories(
        team=team, query=query, embedding=embedding, mode=mode, max_results=max_results, **options
    )
    return replace(outcome, warnings=[*warnings, *outcome.warnings])


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


def search_arguments(data: Mapping[str, Any]) -> SearchArguments:
    """A search in the API's words (the fields of search.api.SearchInputSerializer,
    validated) as the search's arguments; a field left out keeps its default."""
    names = SearchArguments.__dataclass_fields__
    return SearchArguments(**{name: value for name, value in data.items() if name in names})


def search_for(*, team: Team, arguments: SearchArguments, count_access: bool = True) -> SearchOutcome:
    """A search as the doors run it. With `count_access` (an agent's search, over REST
    or MCP), every result handed over counts as an access of its entry, in one UPDATE;
    a person browsing the dashboard does not count.

    Every snippet handed over is scrubbed (credential shapes and the team's vault
    secrets): text stored before a scrubber rule or a vault secret existed never leaves
    through a search."""
    outcome = embed_and_search(team=team, **asdict(arguments))
    if outcome.results:
        secrets = team_secret_matcher(team_id=team.id)
        for result in outcome.results:
            result.snippet = scrub(result.snippet, secrets).text
    if count_access:
        feedback.record_access(team=team, memory_ids=[r.memory_id for r in outcome.results])
    return outcome
