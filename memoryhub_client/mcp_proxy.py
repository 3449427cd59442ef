"""`memoryhub mcp`: MemoryHub's MCP server on stdio, for clients that launch a command.

A proxy: it serves MCP on stdin/stdout and passes every tool listing and call to the
server's Streamable HTTP endpoint (`/mcp/`) with the agent token, answering what the
server answered (tool errors included). The token is read from an environment variable
and never printed or logged."""

from __future__ import annotations

from typing import Any

import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server

# The server answers each call within one request; a slow search or save may take a while.
REQUEST_TIMEOUT_SECONDS = 120.0


async def serve(url: str, token: str) -> None:
    """Connect to the server first (a wrong URL or token fails here, before any client
    is told it may go on), then serve stdio until the client closes it."""
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=REQUEST_TIMEOUT_SECONDS) as http,
        Client(streamable_http_client(url, http_client=http)) as remote,
    ):

        async def list_tools(
            ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
        ) -> types.ListToolsResult:
            cursor = params.cursor if params is not None else None
            return await remote.list_tools(cursor=cursor, cache_mode="refresh")

        async def call_tool(
            ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
        ) -> types.CallToolResult:
            return await remote.call_tool(params.name, params.arguments)

        async def list_resources(
            ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
        ) -> types.ListResourcesResult:
            cursor = params.cursor if params is not None else None
            return await remote.list_resources(cursor=cursor, cache_mode="refresh")

        async def list_resource_templates(
            ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
        ) -> types.ListResourceTemplatesResult:
            cursor = params.cursor if params is not None else None
            return await remote.list_resource_templates(cursor=cursor, cache_mode="refresh")

        async def read_resource(
            ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
        ) -> types.ReadResourceResult:
            return await remote.read_resource(params.uri, cache_mode="refresh")

        async def list_prompts(
            ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
        ) -> types.ListPromptsResult:
            cursor = params.cursor if params is not None else None
            return await remote.list_prompts(cursor=cursor, cache_mode="refresh")

        async def get_prompt(
            ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
        ) -> types.GetPromptResult:
            return await remote.get_prompt(params.name, params.arguments)

        # Errors of the server (MCPError, with REST's error body as data) pass through as they are.
        server: Server[Any] = Server(
            "memoryhub",
            version="1",
            title="MemoryHub",
            instructions=remote.instructions,
            on_list_tools=list_tools,
            on_call_tool=call_tool,
            on_list_resources=list_resources,
            on_list_resource_templates=list_resource_templates,
            on_read_resource=read_resource,
            on_list_prompts=list_prompts,
            on_get_prompt=get_prompt,
        )
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
