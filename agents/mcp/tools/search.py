"""The tools that find what the team knows: search, and the injection block."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from agents import injection
from agents.api_injection import InjectionArgumentsSerializer, injection_payload
from agents.mcp.tools.base import Tool, ToolCall, with_fields
from agents.sessions import session_in_header
from search import run_search
from search.api import SearchInputSerializer, search_payload


def memory_search(call: ToolCall, payload: SearchInputSerializer) -> dict[str, Any]:
    outcome = run_search.search_for(
        team=call.team, arguments=payload.to_arguments(), may_see_high=call.token.grants("write")
    )
    return search_payload(outcome)


SEARCH = Tool(
    name="memory_search",
    title="Search memories",
    description=(
        "Search the team's memory before you decide or answer anything the team may have settled. "
        "Returns the best matches, each key once as its current entry (key, snippet, score, type). "
        "Read one in full with memory_get."
    ),
    arguments=SearchInputSerializer,
    scope="read",
    read_only=True,
    destructive=False,
    idempotent=True,
    handler=memory_search,
    replica_reads=True,
)
# Scores, modes and the rarer filters are on the full list (`/mcp/full/`).
CORE_SEARCH = replace(
    SEARCH,
    arguments=with_fields(
        SearchInputSerializer,
        "CoreSearchArguments",
        ("query", "max_results", "types", "project", "include_superseded", "tags", "sources"),
    ),
)


def memory_context(call: ToolCall, payload: InjectionArgumentsSerializer) -> dict[str, Any]:
    result = injection.build_injection(
        team=call.team,
        **payload.to_arguments(),
        live=True,
        reader_session=session_in_header(call.session_header),
    )
    return dict(injection_payload(result, payload.validated_data.get("format", "markdown")))


CONTEXT = Tool(
    name="memory_context",
    title="What to know now",
    description=(
        "Call at the start of a task: the team's identity, lessons, decisions and context as one "
        "block to keep in mind (`text`, within a token budget). Give `project`, and `query` to add "
        "what is relevant to the task."
    ),
    arguments=InjectionArgumentsSerializer,
    scope="read",
    read_only=True,
    destructive=False,
    idempotent=True,
    handler=memory_context,
    replica_reads=True,
)
CORE_CONTEXT = replace(
    CONTEXT,
    arguments=with_fields(
        InjectionArgumentsSerializer, "CoreContextArguments", ("project", "query", "max_tokens")
    ),
)

TOOLS = (SEARCH, CONTEXT)
CORE_TOOLS = (CORE_SEARCH, CORE_CONTEXT)
