"""The MCP tools: what a model sees (name, description, input schema, annotations) and the
handler behind each, a thin call into the use case its REST endpoint calls.

A tool's arguments are parsed by the REST endpoint's input serializer, or one made of
it with what MCP adds (a page, a key REST has in the path), and its input schema is
that serializer's, generated (core.json_schema): the same fields, limits, descriptions
and `invalid` errors as REST. The serializer maps its data to the use case's
arguments as it does for REST; answers are rendered by REST's output serializers, so a
tool answers what the endpoint it mirrors answers. A handler runs inside the call's
transaction, bound to the token's team (teams.calls.AgentCall): it never looks beyond
`call.team`. One module per subdomain.

Two tool lists (docs/agents.md, "Tool surfaces"): the core list, served at `/mcp/`, is
the handful an agent uses in every session, some with only their common arguments; the
full list, at `/mcp/full/`, is every tool with every argument. An endpoint runs only the
tools it lists."""

from __future__ import annotations

from agents.mcp.tools import facts, freshness, memories, search, sessions, team
from agents.mcp.tools.base import Handler, Tool, ToolCall, paginate

__all__ = ["CORE_TOOLS", "SURFACES", "TOOLS", "Handler", "Tool", "ToolCall", "paginate"]

TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in (
        memories.SAVE,
        memories.SAVE_BATCH,
        search.SEARCH,
        memories.GET,
        memories.LIST,
        memories.HISTORY,
        memories.DELETE,
        search.CONTEXT,
        *sessions.TOOLS,
        memories.UNSUPERSEDE,
        memories.RATE,
        memories.ANNOTATE,
        *team.TOOLS,
        memories.CONFIRM,
        *freshness.TOOLS,
        *facts.TOOLS,
    )
}

CORE_TOOLS: dict[str, Tool] = {
    tool.name: tool for tool in (search.CORE_CONTEXT, search.CORE_SEARCH, *memories.CORE_TOOLS)
}
# The endpoint's name for each list (agents.mcp.http.ENDPOINTS).
SURFACES: dict[str, dict[str, Tool]] = {"core": CORE_TOOLS, "full": TOOLS}
