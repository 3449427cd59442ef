"""The client's one-line errors for a server that says "later": 429 from the real server's
rate limit (a server of this module's own, with a small write budget), and 503's shape."""

from __future__ import annotations

import re

import httpx
import pytest

from memoryhub_client.api import error_line
from teams.models import Team
from tests.client.conftest import Cli, server_env
from tests.conftest import make_agent
from tests.mcp.conftest import Server

pytestmark = pytest.mark.django_db(transaction=True)

SERVER_ENV = {"MEMORYHUB_THROTTLE_WRITE": "1/hour"}


def test_a_throttled_save_says_when_to_retry(mcp_server: Server, team: Team, cli: Cli) -> None:
    token = make_agent(team, "eager-bot", ["read", "write"]).token
    env = server_env(mcp_server, "alpha", token)

    assert cli("save", "first", "One fact.", **env).returncode == 0
    throttled = cli("save", "second", "Another fact.", **env)

    assert throttled.returncode == 1
    assert re.fullmatch(
        r"memoryhub save: too many requests \(429 rate_limited\): too many requests; retry in \d+ seconds\n",
        throttled.stderr,
    )
    assert token not in throttled.stderr


def test_an_unavailable_server_says_when_to_retry() -> None:
    body = {"error": "database_unavailable", "detail": "the database is unavailable", "retry_after": 5}
    assert error_line(503, body, httpx.Headers({"Retry-After": "5"})) == (
        "server unavailable (503 database_unavailable): the database is unavailable: retry in 5 s"
    )
    assert error_line(502, None, httpx.Headers()) == "error (502)"
