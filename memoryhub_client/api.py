"""The commands' handle on the SDK: `hub_for(config)` is the `MemoryHub` of the server,
team and token a command was given, and `MemoryHubApi` the same with path-level calls
(`api.get("injection/", project=...)`) for the Claude Code hooks.

Every failure is a `MemoryHubError` (`ApiError`, as the commands call it) whose message
is one line for a person (or an agent) to read: the status, the server's error code and
detail ({"error": code, "detail": ...}), and what to do. The token is sent in a header and
never appears in a message. A command does not retry: its answer comes at once, and the
person or the hook's caller decides whether to run it again."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx

from memoryhub_client.config import ClientConfig
from memoryhub_client.errors import MemoryHubError, error_line
from memoryhub_client.hub import MemoryHub
from memoryhub_client.transport import NO_RETRY, USER_AGENT

ApiError = MemoryHubError
__all__ = ["USER_AGENT", "ApiError", "MemoryHubApi", "error_line", "hub_for", "quote_key"]


def quote_key(key: str) -> str:
    return quote(key, safe="")


def hub_for(
    config: ClientConfig, *, timeout: float | None = None, transport: httpx.BaseTransport | None = None
) -> MemoryHub:
    """The SDK's client for a command's configuration (ConfigError without a team or a
    token), without retries."""
    options: dict[str, Any] = {"timeout": timeout} if timeout is not None else {}
    return MemoryHub(
        config.url,
        config.require_token(),
        team=config.require_team(),
        retry=NO_RETRY,
        transport=transport,
        **options,
    )


class MemoryHubApi:
    """One team's API on one server, by path (relative to /api/v1/teams/{team}/), over
    `hub` (a MemoryHub)."""

    def __init__(self, config: ClientConfig, *, transport: httpx.BaseTransport | None = None) -> None:
        self.hub = hub_for(config, transport=transport)
        self.base = self.hub.url
        self.team = self.hub.team

    def __enter__(self) -> MemoryHubApi:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.hub.close()

    def get(self, path: str, **params: Any) -> dict[str, Any]:
        return self.hub.request("GET", path, params=params)

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self.hub.request("POST", path, json=body)

    def patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self.hub.request("PATCH", path, json=body)

    def delete(self, path: str) -> dict[str, Any]:
        return self.hub.request("DELETE", path)
