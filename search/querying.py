"""Answering a search query: embed the query with the team's provider (the one network
call of a search, made outside the API request's transaction), then run the selector
with that vector.

No provider, a broken profile or a dead endpoint → keyword only, search_mode
"keyword", a logged warning that also goes back in the outcome; never an error.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any

from core.metrics import QUERY_EMBEDDING_SECONDS
from core.request_transaction import outside_request_transaction
from search import selectors
from search.embeddings.base import EmbeddingUnavailable
from search.retrieval.candidates import QueryVector, SearchMode
from search.retrieval.results import SearchOutcome
from search.services import team_provider
from teams.models import Team

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
