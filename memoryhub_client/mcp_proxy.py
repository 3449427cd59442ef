"""`memoryhub mcp`: MemoryHub's MCP server on stdio, for clients that launch a command.

A bridge: it serves MCP on stdin/stdout with the SDK's server and sends each request of
the client to the server's MCP endpoint as one JSON-RPC POST with the agent token,
answering what the server answered (tool errors and JSON-RPC errors included). The
server is stateless and answers JSON (docs/agents.md, "stdio proxy"): one POST per
request is all there is to that side, and the bridge sees every refusal with its HTTP
status and body, which the SDK's HTTP client reduces to "Server returned an error
response".

When the server refuses or cannot be reached the bridge says why, twice: one line on
stderr (the client's log) and a JSON-RPC error to the client with the same message and,
as data, what failed (`url`, `status`, `error`, `detail`): the token refused (401), no
MCP endpoint at the URL (404), a redirect, the server not reachable (connection refused,
an unknown host, no answer in time). At start-up the bridge then keeps answering every
request with that error until the client closes stdin, so the client shows the reason
rather than "connection closed".

The token is read from an environment variable and never printed or logged."""

from __future__ import annotations

import itertools
import json
import sys
from typing import IO, Any, TypeVar

import httpx2
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, INTERNAL_ERROR
from pydantic import BaseModel

# The server answers each call within one request; a slow search or save may take a while.
REQUEST_TIMEOUT_SECONDS = 120.0
CONNECT_TIMEOUT_SECONDS = 10.0
# The protocol era of the POSTs (the client on stdio may speak another: the SDK's server
# answers it in its own).
PROTOCOL_VERSION = "2025-11-25"
CLIENT_INFO = {"name": "memoryhub-mcp", "version": "1"}
MAX_LINE_BYTES = 4 * 1024 * 1024  # a request read while refusing; the rest of a longer line is skipped
MAX_DETAIL_CHARS = 300

ResultT = TypeVar("ResultT", bound=BaseModel)


class Unavailable(Exception):
    """The server did not answer MCP. The message is one line for a person (never the
    token); `data` says what failed."""

    def __init__(self, reason: str, **data: Any) -> None:
        super().__init__(reason)
        self.data = {name: value for name, value in data.items() if value is not None}

    def as_error(self) -> MCPError:
        return MCPError(CONNECTION_CLOSED, f"MemoryHub: {self}", data=self.data)


def say(problem: Unavailable) -> None:
    print(f"memoryhub mcp: {problem}", file=sys.stderr, flush=True)


class Remote:
    """The server's MCP endpoint, one JSON-RPC POST per request."""

    def __init__(self, url: str, http: httpx2.AsyncClient, *, token_env: str) -> None:
        self.url = url
        self._http = http
        self._token_env = token_env
        self._ids = itertools.count(1)
        self.protocol_version: str | None = None

    async def initialize(self) -> types.InitializeResult:
        params = {"protocolVersion": PROTOCOL_VERSION, "capabilities": {}, "clientInfo": CLIENT_INFO}
        result = types.InitializeResult.model_validate(
            await self.request("initialize", params), by_name=False
        )
        self.protocol_version = result.protocol_version
        return result

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """The result of one request; MCPError for the server's JSON-RPC error, Unavailable
        when it did not answer MCP."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": next(self._ids), "method": method}
        if params is not None:
            message["params"] = params
        headers = {"MCP-Protocol-Version": self.protocol_version} if self.protocol_version else {}
        try:
            response = await self._http.post(self.url, json=message, headers=headers)
        except httpx2.TimeoutException:
            raise Unavailable(f"{self.url} did not answer in time; is the server up?", url=self.url) from None
        except httpx2.HTTPError as exc:
            # httpx's messages name the address, never a header.
            why = str(exc)[:MAX_DETAIL_CHARS] or type(exc).__name__
            raise Unavailable(
                f"cannot reach {self.url} ({why}); is the server running and the URL right?", url=self.url
            ) from None
        if response.status_code != 200:
            raise self._refused(response)
        try:
            answer = response.json()
        except ValueError:
            answer = None
        if not isinstance(answer, dict) or not ("result" in answer or "error" in answer):
            raise Unavailable(
                f"{self.url} did not answer JSON-RPC: is it MemoryHub's MCP endpoint?",
                url=self.url,
                status=response.status_code,
            )
        error = answer.get("error")
        if isinstance(error, dict):
            raise MCPError(
                int(error.get("code", INTERNAL_ERROR)), str(error.get("message", "")), error.get("data")
            )
        result: dict[str, Any] = answer["result"]
        return result

    def _refused(self, response: httpx2.Response) -> Unavailable:
        status = response.status_code
        try:
            body = response.json()
        except ValueError:
            body = None
        body = body if isinstance(body, dict) else {}
        error = body.get("error") if isinstance(body.get("error"), str) else None
        detail = str(body["detail"])[:MAX_DETAIL_CHARS] if "detail" in body else None
        if status == 401:
            reason = f"the server refused the token in {self._token_env} (401: {detail or 'unauthenticated'})"
        elif status == 404:
            reason = (
                f"no MCP endpoint at {self.url} (404); give the server's URL (https://host/) "
                "or its MCP endpoint (https://host/mcp/)"
            )
        elif 300 <= status < 400 and response.headers.get("Location"):
            reason = f"{self.url} redirects ({status}) to {response.headers['Location'][:200]}: use that URL"
        else:
            said = ": ".join(part for part in (error, detail) if part)
            reason = f"the server answered {status}" + (f" ({said})" if said else "")
        return Unavailable(reason, url=self.url, status=status, error=error, detail=detail)


def http_client(token: str) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"},
        timeout=httpx2.Timeout(REQUEST_TIMEOUT_SECONDS, connect=CONNECT_TIMEOUT_SECONDS),
        follow_redirects=False,  # a redirect is reported: the token goes only where it was told to
    )


async def serve(url: str, token: str, token_env: str) -> int:
    """Initialize with the server first; then serve stdio until the client closes it (0).
    When the server does not answer MCP, say why and refuse every request (1)."""
    async with http_client(token) as http:
        remote = Remote(url, http, token_env=token_env)
        try:
            initialized = await remote.initialize()
        except (Unavailable, MCPError) as exc:
            problem = (
                exc
                if isinstance(exc, Unavailable)
                else Unavailable(f"the server refused to start: {exc}", url=url)
            )
            say(problem)
            refuse_every_request(problem, sys.stdin.buffer, sys.stdout.buffer)
            return 1
        server = _bridge(remote, initialized.instructions)
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
    return 0


def _bridge(remote: Remote, instructions: str | None) -> Server[Any]:
    async def forward(method: str, params: dict[str, Any] | None, result_type: type[ResultT]) -> ResultT:
        try:
            result = await remote.request(method, params)
        except Unavailable as problem:
            say(problem)
            raise problem.as_error() from None
        return result_type.model_validate(result, by_name=False)

    def page(params: types.PaginatedRequestParams | None) -> dict[str, Any]:
        return {"cursor": params.cursor} if params is not None and params.cursor else {}

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return await forward("tools/list", page(params), types.ListToolsResult)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        arguments = {"name": params.name, "arguments": params.arguments or {}}
        return await forward("tools/call", arguments, types.CallToolResult)

    async def list_resources(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return await forward("resources/list", page(params), types.ListResourcesResult)

    async def list_resource_templates(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return await forward("resources/templates/list", page(params), types.ListResourceTemplatesResult)

    async def read_resource(
        ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        return await forward("resources/read", {"uri": str(params.uri)}, types.ReadResourceResult)

    async def list_prompts(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        return await forward("prompts/list", page(params), types.ListPromptsResult)

    async def get_prompt(
        ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        arguments = {"name": params.name, "arguments": params.arguments or {}}
        return await forward("prompts/get", arguments, types.GetPromptResult)

    # Errors of the server (MCPError, with REST's error body as data) pass through as they are.
    return Server(
        "memoryhub",
        version="1",
        title="MemoryHub",
        instructions=instructions,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_resource_templates,
        on_read_resource=read_resource,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )


def refuse_every_request(problem: Unavailable, stdin: IO[bytes], stdout: IO[bytes]) -> None:
    """Until the client closes stdin, answer each JSON-RPC request (a line of stdio
    transport) with the problem as an error; notifications need no answer."""
    error = {"code": CONNECTION_CLOSED, "message": f"MemoryHub: {problem}", "data": problem.data}
    while True:
        line = stdin.readline(MAX_LINE_BYTES)
        if not line:
            return
        if not line.endswith(b"\n"):
            _skip_rest_of_line(stdin)
        try:
            received = json.loads(line)
        except ValueError:
            continue
        for message in received if isinstance(received, list) else [received]:
            if isinstance(message, dict) and "method" in message and message.get("id") is not None:
                answer = {"jsonrpc": "2.0", "id": message["id"], "error": error}
                stdout.write(json.dumps(answer).encode() + b"\n")
                stdout.flush()


def _skip_rest_of_line(stdin: IO[bytes]) -> None:
    while True:
        chunk = stdin.readline(MAX_LINE_BYTES)
        if not chunk or chunk.endswith(b"\n"):
            return
