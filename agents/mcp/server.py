"""The MCP server: lists the tools and runs each call as the REST API runs a request.

A call reaches its handler only after a valid token (checked before MCP by
agents.mcp.http: 401), then goes through the call runner both doors share
(teams.calls.AgentCall): the token's scope for the tool (403 `forbidden`), its read or
write budget (429 `rate_limited`), one transaction bound to the token's team, the
write slot, the `X-MemoryHub-Session` heartbeat, replica reads for the tools whose
REST endpoint has them, and the team's vault secrets redacted from the answer.

Failures are tool errors (`isError`) whose structured content is REST's error body
(core.api_errors.exception_handler makes both), never a protocol error or a trace.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any, cast

import anyio.to_thread
import mcp_types as types
from django.conf import settings
from django.db import close_old_connections
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST
from rest_framework.request import Request

from agents.mcp import resources
from agents.mcp.tools import SURFACES, TOOLS, Tool, ToolCall
from agents.sessions import SESSION_HEADER
from core.api_errors import (
    MAX_JSON_DEPTH,
    NestedTooDeeply,
    check_clean_text,
    error_body,
    is_database_unavailable,
)
from memories.facts.serializers import fact_error_extra
from memories.serializers import memory_error_extra
from teams.authentication import agent_actor
from teams.calls import AgentCall
from teams.models import AgentToken

logger = logging.getLogger(__name__)

# Where agents.mcp.http leaves the authenticated request (DRF's, with the token in
# `auth`) and the name of the endpoint's tool list (agents.mcp.tools.SURFACES) for the
# tools: the WSGI environ, which a2wsgi hands on in the ASGI scope.
REQUEST_ENVIRON_KEY = "memoryhub.mcp.request"
SURFACE_ENVIRON_KEY = "memoryhub.mcp.surface"
FULL_LIST_PATH = "/mcp/full/"

# Sent once per session, with either list: it names only the tools both lists have.
INSTRUCTIONS = (
    "MemoryHub is your team's shared memory. Start a task with memory_context; search with "
    "memory_search before deciding what the team may have settled; save what the next agent "
    "should know with memory_save (to change an entry, give a supersede_reason rather than "
    "saving a near copy). Errors carry a code in `error` and a `detail` saying what to do."
)


def build_server() -> Server[Any]:
    return Server(
        "memoryhub",
        version="1",
        title="MemoryHub",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_resource_templates,
        on_read_resource=read_resource,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )


def tool_definition(tool: Tool) -> types.Tool:
    return types.Tool(
        name=tool.name,
        title=tool.title,
        description=tool.description,
        input_schema=tool.input_schema,
        # The title once, at the top level (annotations' own `title` is the older place for it).
        annotations=types.ToolAnnotations(
            read_only_hint=tool.read_only,
            destructive_hint=tool.destructive,
            idempotent_hint=tool.idempotent,
            open_world_hint=False,
        ),
    )


async def list_tools(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[tool_definition(tool) for tool in SURFACES[_surface(ctx)].values()])


async def call_tool(
    ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    request = _authenticated_request(ctx)
    tool = find_tool(_surface(ctx), params.name)
    if request is None:
        body, is_error = error_body("unauthenticated", "send 'Authorization: Bearer <token>'"), True
    elif isinstance(tool, dict):
        body, is_error = tool, True
    else:
        # The ORM is synchronous: one worker thread per call, as one gunicorn thread per request.
        body, is_error = await anyio.to_thread.run_sync(run_tool, tool, request, params.arguments or {})
    return types.CallToolResult(
        content=[types.TextContent(text=json.dumps(body, ensure_ascii=False))],
        structured_content=body,
        is_error=is_error,
    )


def _reader(name: str, read: Callable[[ToolCall], dict[str, Any]]) -> Tool:
    """A read behind a resource, run as a read-only tool is (never listed as one)."""
    return Tool(name=name, title=name, description="", arguments=None, scope="read", read_only=True,
                destructive=False, idempotent=True, handler=lambda call, _: read(call))  # fmt: skip


LIST_RESOURCES = _reader("resources/list", resources.list_resources)
READ_RESOURCE = _reader("resources/read", resources.read_resource)
# JSON-RPC codes for a failed read; the error's data is REST's error body.
RESOURCE_NOT_FOUND = -32002
READ_ERROR_CODES = {"not_found": RESOURCE_NOT_FOUND, "invalid": INVALID_PARAMS, "forbidden": INVALID_REQUEST}


async def _read(ctx: ServerRequestContext[Any], reader: Tool, arguments: dict[str, Any]) -> dict[str, Any]:
    request = _authenticated_request(ctx)
    if request is None:
        raise MCPError(INVALID_REQUEST, "send 'Authorization: Bearer <token>'")
    body, is_error = await anyio.to_thread.run_sync(run_tool, reader, request, arguments)
    if is_error:
        raise MCPError(READ_ERROR_CODES.get(body["error"], INTERNAL_ERROR), body["detail"], data=body)
    return body


async def list_resources(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListResourcesResult:
    cursor = params.cursor if params is not None else None
    body = await _read(ctx, LIST_RESOURCES, {"cursor": cursor} if cursor else {})
    return types.ListResourcesResult(
        resources=[types.Resource(**resource) for resource in body["resources"]],
        next_cursor=body["next_cursor"],
    )


async def list_resource_templates(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListResourceTemplatesResult:
    request = _authenticated_request(ctx)
    if request is None:
        raise MCPError(INVALID_REQUEST, "send 'Authorization: Bearer <token>'")
    slug = cast(AgentToken, request.auth).team.slug
    return types.ListResourceTemplatesResult(
        resource_templates=[types.ResourceTemplate(**template) for template in resources.templates(slug)]
    )


async def read_resource(
    ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
) -> types.ReadResourceResult:
    body = await _read(ctx, READ_RESOURCE, {"uri": params.uri})
    contents = types.TextResourceContents(uri=body["uri"], mime_type=body["mime_type"], text=body["text"])
    return types.ReadResourceResult(contents=[contents])


# The prompt asks for learning_record calls: it is served where that tool is.
PROMPT_SURFACE = "full"


async def list_prompts(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListPromptsResult:
    if _surface(ctx) != PROMPT_SURFACE:
        return types.ListPromptsResult(prompts=[])
    prompt = types.Prompt(
        name=resources.PROMPT_NAME,
        title="Remember what we learned",
        description=resources.PROMPT_DESCRIPTION,
        arguments=[
            types.PromptArgument(name="topic", description="What to look back on (optional).", required=False)
        ],
    )
    return types.ListPromptsResult(prompts=[prompt])


async def get_prompt(
    ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
) -> types.GetPromptResult:
    if params.name != resources.PROMPT_NAME:
        raise MCPError(INVALID_PARAMS, f"no prompt named '{params.name[:100]}'")
    if _surface(ctx) != PROMPT_SURFACE:
        raise MCPError(INVALID_PARAMS, f"{params.name} is on the full tool list only, at {FULL_LIST_PATH}")
    text = resources.remember_prompt(params.arguments or {})
    message = types.PromptMessage(role="user", content=types.TextContent(text=text))
    return types.GetPromptResult(description=resources.PROMPT_DESCRIPTION, messages=[message])


def _environ(ctx: ServerRequestContext[Any]) -> dict[str, Any]:
    scope = getattr(ctx.request, "scope", None) or {}
    environ: dict[str, Any] = scope.get("wsgi_environ", {})
    return environ


def _authenticated_request(ctx: ServerRequestContext[Any]) -> Request | None:
    request = _environ(ctx).get(REQUEST_ENVIRON_KEY)
    return request if isinstance(request, Request) and isinstance(request.auth, AgentToken) else None


def _surface(ctx: ServerRequestContext[Any]) -> str:
    """The tool list of the endpoint the request came to (agents.mcp.http.admit names it)."""
    surface = _environ(ctx).get(SURFACE_ENVIRON_KEY)
    return surface if surface in SURFACES else "core"


def find_tool(surface: str, name: str) -> Tool | dict[str, Any]:
    """The tool of that name on that list, or the `not_found` error body: an endpoint runs
    only the tools it lists, and says where a tool of the full list is."""
    tool = SURFACES[surface].get(name)
    if tool is not None:
        return tool
    if name in TOOLS:
        return error_body("not_found", f"{name} is on the full tool list only, at {FULL_LIST_PATH}")
    return error_body("not_found", f"no tool named '{name[:100]}'")


def run_tool(tool: Tool, request: Request, arguments: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """Run one call in its own transaction; (the answer, whether it is an error)."""
    close_old_connections()
    try:
        return _run(tool, request, arguments)
    except Exception as exc:
        if is_database_unavailable(exc):
            logger.error(
                "database unavailable, MCP tool %s answered database_unavailable: %s", tool.name, exc
            )
            retry_after: int = settings.DB_UNAVAILABLE_RETRY_AFTER_SECONDS
            detail = "the database is temporarily unavailable; retry later"
            return error_body("database_unavailable", detail, retry_after=retry_after), True
        logger.exception("MCP tool %s failed", tool.name)
        return error_body("server_error", "internal error"), True
    finally:
        # Django does this at the end of every request; a tool call is one.
        close_old_connections()


class _ToolView:
    """What the call runner (and the REST permission and throttle classes it reuses)
    reads of a view, for one tool: the scope it needs. Errors naming an entry (`current`)
    render it as the REST views do."""

    action = "call"

    def __init__(self, tool: Tool) -> None:
        self.required_scopes = {self.action: tool.scope}

    def serialize_error_extra(self, name: str, value: Any) -> Any:
        return fact_error_extra(name, memory_error_extra(name, value))


def _run(tool: Tool, request: Request, arguments: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    token = cast(AgentToken, request.auth)
    view = _ToolView(tool)
    with AgentCall() as call:
        try:
            with call.acting():
                call.admit(request, view, team=token.team, replica=tool.replica_reads)
                _check_clean(arguments)
                tool_call = ToolCall(
                    team=token.team,
                    token=token,
                    actor=agent_actor(request),
                    arguments=arguments,
                    session_header=request.headers.get(SESSION_HEADER, ""),
                )
                body: Any = tool.run(tool_call)
        except Exception as exc:
            error = call.error_answer(exc, view)
            if error is None:
                raise
            return call.answer(error, is_error=True), True
        return call.answer(body, is_error=False), False


def _check_clean(node: Any, depth: int = 0) -> None:
    """What REST's strict JSON parser refuses in a body: NUL bytes, lone surrogates and
    deep nesting (core.api_errors.StrictJSONParser)."""
    if isinstance(node, str):
        check_clean_text(node, "the arguments")
    elif isinstance(node, dict | list):
        if depth >= MAX_JSON_DEPTH:
            raise NestedTooDeeply(f"JSON is limited to {MAX_JSON_DEPTH} levels of nesting")
        for key in node if isinstance(node, dict) else ():
            check_clean_text(key, "the arguments")
        for value in node.values() if isinstance(node, dict) else node:
            _check_clean(value, depth + 1)
