"""The fact tools (full list only): set one fact, read one or an entity's facts. Their
arguments are the REST endpoints' serializers with what REST has in the path."""

from __future__ import annotations

from typing import Any

from agents.mcp.tools.base import PageArguments, Tool, ToolCall, page_of
from memories.facts import selectors, services
from memories.facts.api import EntityFactPagination
from memories.facts.inputs import (
    FactReadQuerySerializer,
    FactSetInputSerializer,
    entity_field,
    fact_key_field,
)
from memories.facts.serializers import fact_payload, set_payload
from teams.serializers import StrictInputSerializer


class FactSetArguments(FactSetInputSerializer):
    entity = entity_field()
    key = fact_key_field()


def fact_set(call: ToolCall, payload: FactSetArguments) -> dict[str, Any]:
    data = payload.validated_data
    result = services.set_fact(
        team=call.team,
        entity=data["entity"],
        key=data["key"],
        actor=call.actor,
        # agent_actor has checked the header.
        session=call.session_header.strip(),
        **payload.to_arguments(),
    )
    return set_payload(result)


SET = Tool(
    name="fact_set",
    title="Set a fact",
    description=(
        "Record an exact answer: `entity` / `key` = `value` (e.g. project-alpha / payments.provider = "
        "Paddle). Setting the same value again changes nothing; a different value needs a `reason`, "
        "or it is refused with the current value (conflict). `sensitivity: high` keeps it out of "
        "injection and away from read-only tokens. Errors: invalid, conflict, forbidden."
    ),
    arguments=FactSetArguments,
    scope="write",
    read_only=False,
    destructive=False,
    idempotent=True,
    handler=fact_set,
)


class FactGetArguments(StrictInputSerializer, FactReadQuerySerializer, PageArguments):
    """One fact with a key; without one, a page of the entity's facts."""

    entity = entity_field()
    key = fact_key_field(required=False)


def fact_get(call: ToolCall, payload: FactGetArguments) -> dict[str, Any]:
    data = payload.validated_data
    may_see_high = call.token.grants("write")
    if "key" in data:
        fact = selectors.get_fact(
            team_id=call.team.id,
            entity=data["entity"],
            key=data["key"],
            may_see_high=may_see_high,
            as_of=data.get("as_of"),
        )
        return fact_payload(fact)
    rows = selectors.entity_facts(
        team_id=call.team.id, may_see_high=may_see_high, entity=data["entity"], as_of=data.get("as_of")
    )
    page, next_cursor = page_of(EntityFactPagination, rows, payload)
    return {
        "entity": data["entity"],
        "facts": [fact_payload(fact) for fact in page],
        "next_cursor": next_cursor,
    }


GET = Tool(
    name="fact_get",
    title="Look up a fact",
    description=(
        "The exact answer to `entity` / `key` (its value, scope, domains, confidence and who set it), "
        "or without a key a page of the entity's facts (`next_cursor`). `as_of` reads what was true "
        "at a time. Errors: not_found, invalid."
    ),
    arguments=FactGetArguments,
    scope="read",
    read_only=True,
    destructive=False,
    idempotent=True,
    handler=fact_get,
    replica_reads=True,
)

TOOLS = (SET, GET)
