"""Where the client finds its server, team and token: flags first, then the environment
(MEMORYHUB_URL, MEMORYHUB_TEAM, MEMORYHUB_TOKEN, MEMORYHUB_PROJECT), then
`$XDG_CONFIG_HOME/memoryhub/config.toml` (default `~/.config/memoryhub/config.toml`):

    url = "http://127.0.0.1:8000"
    team = "my-team"
    project = "web"        # optional
    token = "mh_..."       # optional; better in MEMORYHUB_TOKEN

The token is a secret: it is never printed, logged or part of an error message, and
ClientConfig's repr masks it.
"""

from __future__ import annotations

import argparse
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_URL = "http://127.0.0.1:8000"
TOKEN_ENV = "MEMORYHUB_TOKEN"  # noqa: S105 (a variable name)
URL_ENV = "MEMORYHUB_URL"
TEAM_ENV = "MEMORYHUB_TEAM"
PROJECT_ENV = "MEMORYHUB_PROJECT"


class ConfigError(Exception):
    """Something the user must set or fix; the message is one line, without the token."""


def config_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME", "").strip()
    return (Path(base) if base else Path.home() / ".config") / "memoryhub"


def config_file() -> Path:
    return config_dir() / "config.toml"


@dataclass(frozen=True)
class ClientConfig:
    url: str
    team: str | None
    project: str | None
    token: str | None = field(repr=False)

    def __repr__(self) -> str:  # the token never shows, even in a traceback's locals
        return f"ClientConfig(url={self.url!r}, team={self.team!r}, project={self.project!r}, token=***)"

    def require_team(self) -> str:
        if not self.team:
            raise ConfigError(f"no team: pass --team, set {TEAM_ENV} or `team` in {config_file()}")
        return self.team

    def require_token(self) -> str:
        if not self.token:
            raise ConfigError(f"no token: set {TOKEN_ENV} (or `token` in {config_file()})")
        return self.token


def add_connection_flags(parser: argparse.ArgumentParser) -> None:
    """The flags every command that talks to a server accepts."""
    group = parser.add_argument_group("server")
    group.add_argument("--url", help=f"the server, e.g. {DEFAULT_URL} (or {URL_ENV})")
    group.add_argument("--team", help=f"the team's slug (or {TEAM_ENV})")
    group.add_argument(
        "--token-env",
        default=TOKEN_ENV,
        help=f"the environment variable holding the agent token (default {TOKEN_ENV})",
    )
    group.add_argument(
        "--token",
        help="the agent token itself (prefer the environment: a flag shows in the process list)",
    )


def load_config(arguments: argparse.Namespace | None = None) -> ClientConfig:
    flags = vars(arguments) if arguments is not None else {}
    stored = read_config_file()
    token_env = flags.get("token_env") or TOKEN_ENV

    def pick(flag: str, env: str, key: str) -> str | None:
        for value in (flags.get(flag), os.environ.get(env), stored.get(key)):
            if isinstance(value, str) and value.strip():
                return value.strip()
        return None

    url = pick("url", URL_ENV, "url") or DEFAULT_URL
    return ClientConfig(
        url=server_base(url),
        team=pick("team", TEAM_ENV, "team"),
        project=pick("project", PROJECT_ENV, "project"),
        token=pick("token", token_env, "token"),
    )


def read_config_file() -> dict[str, Any]:
    path = config_file()
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as exc:
        # The parser's message quotes no value, only a position.
        raise ConfigError(f"cannot read {path}: {exc}") from None


# The server's MCP endpoints (agents.mcp.http): the core tools and every tool.
CORE_ENDPOINT = "/mcp/"
FULL_ENDPOINT = "/mcp/full/"
TOOL_LISTS = {"core": CORE_ENDPOINT, "full": FULL_ENDPOINT}


def server_base(url: str) -> str:
    """The server's root URL, whether given as the root or as one of its MCP endpoints."""
    base = url.strip().rstrip("/")
    for endpoint in (FULL_ENDPOINT, CORE_ENDPOINT):
        if base.endswith(endpoint.rstrip("/")):
            base = base[: -len(endpoint.rstrip("/"))]
            break
    if not base.startswith(("http://", "https://")):
        raise ConfigError(f"the server URL must start with http:// or https://, not {base[:60]!r}")
    return base


def tool_list_of(url: str) -> str | None:
    """ "full" or "core" when the URL names one of the MCP endpoints, else None."""
    path = url.strip().rstrip("/") + "/"
    for name, endpoint in sorted(TOOL_LISTS.items(), key=lambda item: -len(item[1])):
        if path.endswith(endpoint):
            return name
    return None


def mcp_endpoint(url: str, tools: str | None = None) -> str:
    """The MCP endpoint of a server given by its root URL or by an endpoint: an endpoint
    stays as given unless `tools` names the other list; a root gets `tools`' endpoint
    (the core list by default)."""
    base = server_base(url)
    return base + TOOL_LISTS[tools or tool_list_of(url) or "core"]
