"""Every MCP tool's input schema, on both tool lists, is generated from the serializer
that parses its arguments, and says of each argument it shares with its REST endpoint
exactly what the API's OpenAPI schema says (read from the generated schema, not copied
here). What only MCP has is named below, with why."""

from __future__ import annotations

from typing import Any

import pytest
from drf_spectacular.generators import SchemaGenerator

from agents.mcp.tools import CORE_TOOLS, SURFACES, TOOLS
from core.json_schema import input_schema, to_json_schema

TEAM = "/api/v1/teams/{team}/"
# Each tool's REST counterparts: (method, path below the team).
REST: dict[str, list[tuple[str, str]]] = {
    "memory_save": [("post", "memories/")],
    "memory_save_batch": [("post", "memories/batch/")],
    "memory_search": [("post", "search/")],
    "memory_get": [("get", "memories/{key}/")],
    "memory_list": [("get", "memories/")],
    "memory_history": [("get", "memories/{key}/history/")],
    "memory_delete": [("delete", "memories/{key}/")],
    "memory_context": [("get", "injection/")],
    "session_boot": [("post", "sessions/")],
    "session_heartbeat": [("patch", "sessions/{id}/")],
    "session_end": [("delete", "sessions/{id}/")],
    "session_list": [("get", "sessions/")],
    "memory_unsupersede": [("post", "memories/{key}/unsupersede/")],
    "memory_rate": [("post", "memories/{key}/rate/")],
    "memory_annotate": [("post", "memories/{key}/annotations/")],
    "learning_record": [("post", "learnings/")],
    "skill_get": [("get", "skills/{name}/")],
    "vault_set": [("put", "vault/{key}/")],
    "memory_confirm": [("post", "memories/{key}/confirm/")],
    "memory_nudges": [("get", "nudges/")],
    "nudge_resolve": [("post", "nudges/{id}/resolve/")],
    "drafts_extract": [("post", "drafts/extract/")],
    "drafts_list": [("get", "drafts/")],
    "draft_review": [("post", "drafts/{id}/accept/"), ("post", "drafts/{id}/merge/")],
    "fact_set": [("put", "facts/{entity}/{key}/")],
    "fact_get": [("get", "facts/{entity}/{key}/"), ("get", "facts/{entity}/")],
}
# What REST has in the URL's path, MCP has in the arguments.
IN_PATH = {"key", "name", "session_id", "nudge_id", "draft_id", "entity"}
# A page by cursor (REST pages by links, 50 a page; a tool's answer goes into a model's context).
PAGE = {"limit", "cursor"}
MCP_ONLY: dict[str, set[str]] = {
    "memory_get": {"version_id"},  # one tool for REST's get, as_of and versions
    "draft_review": {"action"},  # one tool for REST's accept, reject and merge
    "memory_save_batch": {"entries"},  # entries whose key may be left out: compared apart, below
    "memory_save": {"return_entry"},  # the whole entry in the answer (REST's 201 always has it)
}


@pytest.fixture(scope="module")
def openapi() -> dict[str, Any]:
    schema: dict[str, Any] = SchemaGenerator().get_schema(request=None, public=True)
    return schema


def rest_arguments(openapi: dict[str, Any], method: str, path: str) -> dict[str, Any]:
    """The arguments of one operation as JSON Schema properties: its body's, and its
    query parameters' (schema and description)."""
    operation = openapi["paths"][TEAM + path][method]
    components = openapi["components"]["schemas"]
    properties: dict[str, Any] = {}
    body = operation.get("requestBody", {}).get("content", {}).get("application/json")
    if body is not None:
        properties.update(to_json_schema(body["schema"], components)["properties"])
    for parameter in operation.get("parameters", []):
        if parameter["in"] == "query":
            described = {"description": parameter["description"]} if "description" in parameter else {}
            schema = to_json_schema({**parameter["schema"], **described}, components)
            if "enum" in schema:
                # drf-spectacular's mark of a query parameter that may not be blank, which
                # says nothing more of an enum.
                schema.pop("minLength", None)
            properties[parameter["name"]] = schema
    return properties


def test_every_tool_has_a_rest_counterpart_named_here() -> None:
    assert set(REST) == set(TOOLS)
    assert set(CORE_TOOLS) < set(TOOLS)


@pytest.mark.parametrize(
    ("surface", "name"), [(surface, name) for surface, tools in SURFACES.items() for name in sorted(tools)]
)
def test_a_tools_schema_is_its_serializers_and_says_what_rest_says(
    surface: str, name: str, openapi: dict[str, Any]
) -> None:
    tool = SURFACES[surface][name]
    assert tool.arguments is not None
    schema = tool.input_schema
    assert schema == input_schema(tool.arguments)
    assert schema["type"] == "object" and schema["additionalProperties"] is False

    own = IN_PATH | PAGE | MCP_ONLY.get(name, set())
    shared: set[str] = set()
    for method, path in REST[name]:
        rest = rest_arguments(openapi, method, path)
        for field in set(rest) & set(schema["properties"]) - own:
            assert schema["properties"][field] == rest[field], (name, path, field)
            shared.add(field)
    # Nothing of MCP's goes by a name of its own unless it is named above.
    assert set(schema["properties"]) - own == shared, name


def test_a_core_tool_keeps_a_subset_of_the_full_tools_arguments() -> None:
    for name, tool in CORE_TOOLS.items():
        full = TOOLS[name].input_schema
        core = tool.input_schema
        assert set(core["properties"]) <= set(full["properties"]), name
        assert all(core["properties"][field] == full["properties"][field] for field in core["properties"])
        assert core.get("required", []) == full.get("required", []), name


def test_a_batch_entry_says_what_a_single_save_says(openapi: dict[str, Any]) -> None:
    entry = TOOLS["memory_save_batch"].input_schema["properties"]["entries"]["items"]
    rest_entry = rest_arguments(openapi, "post", "memories/batch/")["entries"]["items"]
    single = TOOLS["memory_save"].input_schema
    assert entry == {
        **single,
        "properties": {f: s for f, s in single["properties"].items() if f != "return_entry"},
    }
    assert {f: s for f, s in entry["properties"].items() if f != "key"} == {
        f: s for f, s in rest_entry["properties"].items() if f != "key"
    }
