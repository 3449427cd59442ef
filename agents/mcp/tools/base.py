"""What every tool is made of: its definition (name, description, annotations, the scope
its REST endpoint needs), the serializer that parses its arguments, whose JSON schema
is the tool's input schema (core.json_schema, never written by hand), and its handler.
Also the arguments only MCP has: a page (`limit`, `cursor`) where REST pages by links,
and a key in the arguments where REST has it in the path; and `with_fields`, the same
arguments with only the fields a lean tool list keeps (docs/agents.md, "Tool surfaces")."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

from django.db.models import QuerySet
from django.http import HttpRequest, QueryDict
from rest_framework import serializers
from rest_framework.request import Request

from core.json_schema import Schema, input_schema
from core.pagination import KeysetPagination
from memories.inputs import key_field
from teams.models import AgentToken, Team
from teams.serializers import StrictCharField, StrictInputSerializer, StrictIntegerField

DEFAULT_LIST_LIMIT = 20
MAX_LIST_LIMIT = KeysetPagination.max_page_size


@dataclass(frozen=True)
class ToolCall:
    """One call of a tool: who calls (the token, its team, the actor a change is
    attributed to) and the arguments as the client sent them."""

    team: Team
    token: AgentToken
    actor: str
    arguments: dict[str, Any]
    session_header: str = ""  # X-MemoryHub-Session as the client sent it


Handler = Callable[[ToolCall, Any], dict[str, Any]]


@dataclass(frozen=True)
class Tool:
    name: str
    title: str
    description: str
    # Parses the arguments (the REST input serializer, or one made of it); its schema is
    # the tool's input schema. None only for the readers behind resources.
    arguments: type[serializers.Serializer[Any]] | None
    scope: str  # the token scope it needs: read, write or admin (as its REST endpoint)
    read_only: bool
    destructive: bool
    idempotent: bool
    # Called with the call and its parsed arguments (the serializer, validated).
    handler: Handler
    # Reads a replica may serve, as its REST endpoint's (TeamScopedViewSet.replica_actions).
    replica_reads: bool = False

    @property
    def input_schema(self) -> Schema:
        return input_schema(self.arguments) if self.arguments is not None else {}

    def run(self, call: ToolCall) -> dict[str, Any]:
        """The handler's answer for the call's arguments, parsed as REST parses a body:
        the same limits, the same `invalid` errors."""
        if self.arguments is None:
            return self.handler(call, None)
        payload = self.arguments(data=call.arguments)
        payload.is_valid(raise_exception=True)
        return self.handler(call, payload)


def with_fields(
    serializer_class: type[serializers.Serializer[Any]], name: str, fields: tuple[str, ...]
) -> type[serializers.Serializer[Any]]:
    """`serializer_class` keeping only `fields` (the others removed, as DRF removes a
    field set to None in a subclass): the same parsing, limits, help texts and mapping
    for what it keeps. Every name must be one of its fields; a field added to it later
    stays out until named here, so a lean list does not grow unseen."""
    declared = serializer_class._declared_fields  # type: ignore[attr-defined]
    unknown = sorted(set(fields) - set(declared))
    if unknown:
        raise ValueError(f"{serializer_class.__name__} has no field {', '.join(unknown)}")
    removed: dict[str, Any] = {field: None for field in declared if field not in fields}
    attributes = {"__module__": serializer_class.__module__, "__doc__": serializer_class.__doc__, **removed}
    return type(name, (serializer_class,), attributes)


class _ToolHttpRequest(HttpRequest):
    """What DRF's cursor pagination reads from a request: query parameters, and a base
    URL to put the cursor in (taken back out: a tool answers the bare cursor)."""

    def build_absolute_uri(self, location: str | None = None) -> str:
        return "mcp:///"


def paginate(
    paginator_class: type[KeysetPagination], rows: QuerySet[Any], *, limit: int, cursor: str | None
) -> tuple[list[Any], str | None]:
    """One page of `rows` by the REST endpoint's own keyset pagination, and the cursor of
    the next (older) page, or None."""
    http = _ToolHttpRequest()
    http.method = "GET"
    params = QueryDict(mutable=True)
    params["limit"] = str(limit)
    if cursor:
        params["cursor"] = cursor
    http.GET = params  # type: ignore[assignment]  # django-stubs: GET is immutable
    paginator = paginator_class()
    page = paginator.paginate_queryset(rows, Request(http)) or []
    link = paginator.get_next_link()
    next_cursor = parse_qs(urlsplit(link).query)["cursor"][0] if link else None
    return list(page), next_cursor


class PageArguments(serializers.Serializer[Any]):
    """A page of a list: REST pages by `next` links, a tool by the bare cursor, and a
    smaller default page (an answer goes into a model's context)."""

    limit = StrictIntegerField(
        min_value=1, max_value=MAX_LIST_LIMIT, default=DEFAULT_LIST_LIMIT, help_text="How many per page."
    )
    cursor = StrictCharField(
        required=False, max_length=1000, help_text="The `next_cursor` of the previous page, as given."
    )


def page_of(
    paginator_class: type[KeysetPagination], rows: QuerySet[Any], payload: serializers.Serializer[Any]
) -> tuple[list[Any], str | None]:
    """The page a tool's PageArguments ask for."""
    data = payload.validated_data
    return paginate(paginator_class, rows, limit=data["limit"], cursor=data.get("cursor"))


class KeyArgument(StrictInputSerializer):
    """The key REST has in the URL's path."""

    key = key_field()
