"""The `memoryhub` console script (pyproject's [project.scripts])."""

from __future__ import annotations

import argparse
import os
import sys

import anyio

from memoryhub_client import commands as client_commands
from memoryhub_client import transfer
from memoryhub_client.config import TOOL_LISTS, ConfigError, mcp_endpoint

DEFAULT_TOKEN_ENV = "MEMORYHUB_TOKEN"  # noqa: S105 (a variable name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="memoryhub", description="A client of a MemoryHub server.")
    commands = parser.add_subparsers(dest="command", required=True)
    proxy = commands.add_parser(
        "mcp",
        help="serve MemoryHub's MCP tools on stdio, for clients that launch a command",
        description="Serve MCP on stdin/stdout, passing every call to the server's /mcp/ endpoint.",
    )
    proxy.add_argument(
        "--url",
        required=True,
        help="the server (https://memory.example/) or one of its MCP endpoints (https://memory.example/mcp/)",
    )
    proxy.add_argument(
        "--tools",
        choices=sorted(TOOL_LISTS),
        default=None,
        help="the core tools (/mcp/, the default for a server's URL) or every tool (/mcp/full/)",
    )
    proxy.add_argument(
        "--token-env",
        default=DEFAULT_TOKEN_ENV,
        help=f"the environment variable holding the agent token (default {DEFAULT_TOKEN_ENV})",
    )
    client_commands.register_all(commands)  # search, save, get, inject, hook, connect
    transfer.register(commands)  # export, import, import-markdown, export-markdown
    arguments = parser.parse_args(argv)
    if getattr(arguments, "handler", None) is not None:
        return client_commands.run(arguments)
    return _mcp(arguments.url, arguments.tools, arguments.token_env)


def _mcp(url: str, tools: str | None, token_env: str) -> int:
    token = os.environ.get(token_env, "").strip()
    if not token:
        print(f"memoryhub mcp: set {token_env} to the agent token", file=sys.stderr)
        return 2
    try:
        endpoint = mcp_endpoint(url, tools)
    except ConfigError as exc:
        print(f"memoryhub mcp: {exc}", file=sys.stderr)
        return 2
    from memoryhub_client.mcp_proxy import serve

    try:
        return anyio.run(serve, endpoint, token, token_env)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # one line for the person reading the client's log, no trace
        print(f"memoryhub mcp: cannot serve {endpoint}: {_reason(exc)}", file=sys.stderr)
        return 1


def _reason(exc: BaseException) -> str:
    """The innermost error of the SDK's task groups; the token is never part of it."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"


if __name__ == "__main__":
    sys.exit(main())
