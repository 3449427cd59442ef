"""The JSON Schema (draft 2020-12, what MCP tools declare) of a DRF input serializer, as
drf-spectacular maps it for the API's OpenAPI schema: one mapping from fields to
schemas, so a tool and the REST endpoint it mirrors cannot describe an argument two
ways, and no schema is written by hand.

drf-spectacular writes OpenAPI 3.0: `nullable`, nested serializers and enums as `$ref`s
to components, an enum id. `to_json_schema` turns that into plain JSON Schema: the
references inlined, `nullable` as a `null` type, spectacular's own keys dropped.
"""

from __future__ import annotations

from functools import cache
from types import SimpleNamespace
from typing import Any

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import ComponentRegistry
from rest_framework import serializers

Schema = dict[str, Any]

REF_PREFIX = "#/components/schemas/"
# OpenAPI's number formats: no meaning in JSON Schema, only bytes in a tool list.
_NUMBER_FORMATS = {"double", "float", "int32", "int64"}
_DROPPED = {"x-spec-enum-id", "readOnly", "writeOnly"}


@cache
def input_schema(serializer_class: type[serializers.Serializer[Any]]) -> Schema:
    """The request schema of `serializer_class`, as an object schema of its own (its
    docstring, the API's documentation, left out)."""
    auto = AutoSchema()
    auto.registry = ComponentRegistry()
    auto.method = "POST"
    auto.path = ""
    # What spectacular reads of a view while mapping a serializer: none of ours uses it.
    auto.view = SimpleNamespace(request=None)  # type: ignore[assignment]
    component = auto.resolve_serializer(serializer_class(), "request")
    components = auto.registry.build({}).get("schemas", {})
    schema: Schema = to_json_schema(component.schema, components)
    schema.pop("description", None)
    return schema


def to_json_schema(node: Any, components: dict[str, Schema]) -> Any:
    """An OpenAPI 3.0 schema (or part of one) as JSON Schema, its `$ref`s resolved
    against `components` (by name, as in `components/schemas`)."""
    if isinstance(node, list):
        return [to_json_schema(item, components) for item in node]
    if not isinstance(node, dict):
        return node
    node = dict(node)
    ref = node.pop("$ref", None)
    if ref is not None:
        # A component's own description is the serializer's docstring, for developers;
        # the field that refers to it describes it for the caller.
        target = {k: v for k, v in components[ref.removeprefix(REF_PREFIX)].items() if k != "description"}
        node = {**target, **node}
    all_of = node.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1:
        # spectacular's way of giving a referenced schema a description or a default.
        del node["allOf"]
        inner = to_json_schema(all_of[0], components)
        node = {**inner, **node}
    nullable = node.pop("nullable", False)
    for key in _DROPPED:
        node.pop(key, None)
    if node.get("format") in _NUMBER_FORMATS:
        del node["format"]
    for key, value in list(node.items()):
        if key in ("properties", "patternProperties"):
            node[key] = {name: to_json_schema(sub, components) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "oneOf", "anyOf", "allOf", "not"):
            node[key] = to_json_schema(value, components)
    return _with_null(node) if nullable else node


def _with_null(node: Schema) -> Schema:
    """The same value, or null."""
    if "enum" in node:
        node["enum"] = [*node["enum"], None]
    if "type" in node:
        kinds = node["type"] if isinstance(node["type"], list) else [node["type"]]
        node["type"] = [*kinds, "null"]
    elif "oneOf" in node:
        node["oneOf"] = [*node["oneOf"], {"type": "null"}]
    return node
