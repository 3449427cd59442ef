"""Fuzzing the tools' arguments (hypothesis, over each tool's own input schema, and
arbitrary JSON besides) against the real server: every call answers a tool result, a
success or an error in the one shape with a known code, never an internal error, a
protocol error or a trace. tools/call is posted as JSON-RPC: the server is stateless,
so each call stands alone."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents.mcp.tools import TOOLS
from teams.models import Team
from tests.conftest import make_agent
from tests.mcp.conftest import Server

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]  # fuzzing

KNOWN_ERRORS = {
    "invalid", "invalid_characters", "too_deeply_nested", "not_found", "conflict", "stale_version",
    "no_previous_version", "skill_exists", "unknown_type", "content_too_large", "quota_exceeded",
    "session_ended", "forbidden", "personal_entry",
}  # fmt: skip
HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}

JSON_LEAVES = st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=False,
    allow_infinity=False) | st.text(max_size=40)  # fmt: skip
ANY_JSON = st.recursive(
    JSON_LEAVES, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3),
    max_leaves=8,
)  # fmt: skip


def from_schema(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values of the subset of JSON Schema the tools use (core/json_schema.py generates them)."""
    kinds = schema.get("type")
    if isinstance(kinds, list):
        return st.one_of(*(from_schema({**schema, "type": kind}) for kind in kinds))
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if kinds == "null":
        return st.none()
    if kinds == "boolean":
        return st.booleans()
    if kinds == "integer":
        return st.integers(schema.get("minimum", -(2**31)), schema.get("maximum", 2**31))
    if kinds == "number":
        return st.floats(schema.get("minimum", -1e9), schema.get("maximum", 1e9))
    if kinds == "string":
        if schema.get("format") == "uuid":
            return st.uuids().map(str)
        if "pattern" in schema:
            return st.from_regex(schema["pattern"], fullmatch=True).filter(
                lambda s: len(s) <= schema["maxLength"]
            )
        return st.text(min_size=schema.get("minLength", 0), max_size=min(schema["maxLength"], 300))
    if kinds == "array":
        return st.lists(from_schema(schema["items"]), max_size=min(schema.get("maxItems", 5), 5))
    if kinds == "object" and "properties" in schema:
        required = set(schema.get("required", ()))
        return st.fixed_dictionaries(
            {name: from_schema(sub) for name, sub in schema["properties"].items() if name in required},
            optional={
                name: from_schema(sub) for name, sub in schema["properties"].items() if name not in required
            },
        )
    return st.dictionaries(st.text(max_size=10), JSON_LEAVES, max_size=3)


CALLS = st.sampled_from(sorted(TOOLS)).flatmap(
    lambda name: st.tuples(st.just(name), from_schema(TOOLS[name].input_schema) | ANY_JSON)
)


def post_call(server: Server, token: str, name: str, arguments: Any) -> httpx.Response:
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    return httpx.post(server.full_url, json=message, headers={**HEADERS, "Authorization": f"Bearer {token}"},
                      timeout=60)  # fmt: skip


def test_fuzzed_arguments_never_crash_a_tool(mcp_server: Server, team: Team) -> None:
    token = make_agent(team, "fuzz-bot", ["read", "write", "admin"]).token

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(CALLS)
    def check(call: tuple[str, Any]) -> None:
        name, arguments = call
        response = post_call(mcp_server, token, name, arguments)
        assert response.status_code == 200, response.text
        message = response.json()
        if "error" in message:
            # Arguments that are not an object fail the protocol's own params check.
            assert not isinstance(arguments, dict), message
            assert message["error"]["code"] == -32602, message
            return
        result = message["result"]
        assert "Traceback" not in response.text
        if result.get("isError"):
            assert result["structuredContent"]["error"] in KNOWN_ERRORS, (name, arguments, result)

    check()
