"""Small builders for the tools' JSON input schemas (draft 2020-12, as MCP uses)."""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]


def string(description: str, *, max_length: int, min_length: int = 0, **more: Any) -> Schema:
    schema: Schema = {"type": "string", "maxLength": max_length, "description": description, **more}
    if min_length:
        schema["minLength"] = min_length
    return schema


def integer(description: str, *, minimum: int, maximum: int, **more: Any) -> Schema:
    return {"type": "integer", "minimum": minimum, "maximum": maximum, "description": description, **more}


def boolean(description: str, **more: Any) -> Schema:
    return {"type": "boolean", "description": description, **more}


def string_list(description: str, *, max_items: int, max_length: int, **more: Any) -> Schema:
    return {
        "type": "array",
        "items": {"type": "string", "maxLength": max_length},
        "maxItems": max_items,
        "description": description,
        **more,
    }


def nullable(schema: Schema) -> Schema:
    """The same value, or null."""
    kind = schema["type"]
    return {**schema, "type": [kind, "null"]}


def obj(properties: dict[str, Schema], *, required: tuple[str, ...] = ()) -> Schema:
    """An object with exactly these members: unknown ones are refused, as on REST."""
    schema: Schema = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    return schema
