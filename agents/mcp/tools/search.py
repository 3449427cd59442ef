"""The tools that find what the team knows: search, and the injection block."""

from __future__ import annotations

from typing import Any

from agents import injection
from agents.api_injection import InjectionArgumentsSerializer, injection_payload
from agents.mcp.tools.base import Tool, ToolCall
from search import run_search
from search.api import SearchInputSerializer, SearchOutputSerializer


def memory_search(call: ToolCall, payload: SearchInputSerializer) -> dict[str, Any]:
    outcome = run_search.search_for(team=call.team, arguments=payload.to_arguments())
    return dict(SearchOutputSerializer(outcome).data)


SEARCH = Tool(
    name="memory_search",
    title="Search memories",
    description=(
        "Find what the team knows about something: hybrid keyword and vector search over every "
        "memory. Use it before deciding or answering "
        "about anything the team may have settled before. Returns results with key, snippet, score, "
        "type, whether the version is still active (a superseded one says what replaced it in "
        "`superseded_by`) and notes; skills whose keyword is in the query come first. `search_mode` "
        "says which paths ran (keyword only when embeddings are unavailable). Use memory_get for "
        "the full text. Errors: invalid."
    ),
    arguments=SearchInputSerializer,
    scope="read",
    read_only=True,
    destructive=False,
    idempotent=True,
    handler=memory_search,
    replica_reads=True,
)


def memory_context(call: ToolCall, payload: InjectionArgumentsSerializer) -> dict[str, Any]:
    result = injection.build_injection(team=call.team, **payload.to_arguments())
    return dict(injection_payload(result, payload.validated_data["format"]))


CONTEXT = Tool(
    name="memory_context",
    title="What to know now",
    description=(
        "The team's memory block to put in your context at the start of a task: every identity "
        "entry, always-on skills, lessons, then decisions, then context, each newest first, within a "
        "token budget (markdown in `text`), ending with up to 3 nudges to review. Errors: invalid."
    ),
    arguments=InjectionArgumentsSerializer,
    scope="read",
    read_only=True,
    destructive=False,
    idempotent=True,
    handler=memory_context,
    replica_reads=True,
)

TOOLS = (SEARCH, CONTEXT)
