"""The SDK's operations on facts: `(entity, key) -> value`, versioned, with scope,
domains, sensitivity and confidence (the server's docs/facts.md). `MemoryHub` and
`AsyncMemoryHub` (hub.py) turn each into a method, as they do operations.py's."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Literal

from memoryhub_client.operations import Page, _body, _json, _key, _page, _params
from memoryhub_client.transport import Call, no_answer
from memoryhub_client.types import FactHistoryOutput, FactOutput, FactSetOutput


def _fact_path(entity: str, key: str) -> str:
    return f"facts/{_key(entity)}/{_key(key)}/"


def fact_set(
    entity: str,
    key: str,
    value: str,
    *,
    reason: str | None = None,
    scope: str | None = None,
    domains: Sequence[str] | None = None,
    sensitivity: Literal["normal", "high"] | None = None,
    confidence: float | None = None,
) -> Call[FactSetOutput]:
    """Set the fact `(entity, key)` to `value`, e.g. `fact_set("payments", "provider",
    "Paddle")`. Answers the version with `outcome`: `created`, `unchanged` (the active
    version holds exactly this; nothing written) or `superseded`. A different active value
    is replaced only with a `reason` (else `Conflict`, code `conflict`, the active version
    as `current`). `scope` is `team`, `project:<name>` or `user:<username>`; `domains` the
    words it is filed under; `sensitivity="high"` keeps it from injection and read-only
    tokens; `confidence` from 0 to 1. One left out keeps the active version's. The value
    is scrubbed of credentials (`redactions` says what was)."""
    body = _body(
        value=value,
        reason=reason,
        scope=scope,
        domains=list(domains) if domains is not None else None,
        sensitivity=sensitivity,
        confidence=confidence,
    )
    return Call("PUT", _fact_path(entity, key), _json, json=body)


def fact_get(entity: str, key: str, *, as_of: str | datetime | None = None) -> Call[FactOutput]:
    """The active version of the fact `(entity, key)` (`NotFound` when there is none, or
    it is `high` and the token is read-only); `as_of`: the version active then."""
    return Call("GET", _fact_path(entity, key), _json, params=_params(as_of=as_of))


def facts(
    *,
    entity: str | None = None,
    domain: str | None = None,
    scope: str | None = None,
    as_of: str | datetime | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> Call[Page[FactOutput]]:
    """A page of the team's active facts, newest first, of one `entity`, filed under one
    `domain`, of one `scope` (each when given); `as_of`: those active then. A read-only
    token gets no `high` fact."""
    params = _params(entity=entity, domain=domain, scope=scope, as_of=as_of, limit=limit, cursor=cursor)
    return Call("GET", "facts/", _page, params=params)


def fact_history(
    entity: str, key: str, *, limit: int | None = None, cursor: str | None = None
) -> Call[FactHistoryOutput]:
    """Every version of the fact `(entity, key)`, newest first (`state`: active, superseded
    or deleted; a superseded one names its successor in `superseded_by`), `limit` a page;
    `next` is the link of the older page (its cursor: `cursor_of(answer["next"])`)."""
    return Call(
        "GET", _fact_path(entity, key) + "history/", _json, params=_params(limit=limit, cursor=cursor)
    )


def fact_delete(entity: str, key: str) -> Call[None]:
    """Delete the active version of the fact `(entity, key)` (`NotFound` when there is
    none); it stays in the fact's history, marked deleted."""
    return Call("DELETE", _fact_path(entity, key), no_answer)
