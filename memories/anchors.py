"""Anchors: what a memory can be checked against (docs/freshness.md, "Anchors").

An anchor is `{type, value, expect?}`:

- `url`: an http(s) URL whose page should still answer (GET);
- `api`: an http(s) URL of an API endpoint that should still answer;
- `file`: a path in the team's worktree (only a client can check it);

`expect`, optional, is what a good answer looks like: an HTTP status (100-599) or a
substring the body must contain. Checking anchors is freshness's job; this module says
what a well-formed anchor is, for every path that saves one (REST, batch, MCP) and for
the check, which holds every stored anchor to the same rule before it fetches anything
(a row stored before a rule existed is a failed check, never a crash). The URL rule is
memories.anchor_urls. No regular expression runs on the value.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.errors import InvalidInput
from memories.anchor_urls import MAX_URL_CHARS, AnchorURLRefused, IPNetwork, vetted_anchor_url

ANCHOR_TYPES = ("url", "file", "api")
ANCHOR_FIELDS = ("type", "value", "expect")
MAX_ANCHOR_VALUE_CHARS = MAX_URL_CHARS
MAX_EXPECT_CHARS = 200


class InvalidAnchor(InvalidInput):
    """An anchor that is not well-formed (field "anchor"). `check_detail` is what a check
    of it records: "blocked address" when only the address policy refuses its URL."""

    def __init__(self, detail: str, *, check_detail: str) -> None:
        super().__init__(f"anchor: {detail}", field="anchor")
        self.check_detail = check_detail


def normalise_anchor(
    value: Any, *, allowed_networks: Sequence[IPNetwork] | None = None
) -> dict[str, Any] | None:
    """The stored form of an anchor (None stays None: no anchor). Raises InvalidAnchor
    for anything else than a well-formed anchor; a url or api anchor's URL must be one
    the check can fetch (memories.anchor_urls; `allowed_networks`: the operator's, the
    setting when None)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _invalid("an object {type, value, expect?}")
    unknown = sorted(str(name)[:50] for name in value if name not in ANCHOR_FIELDS)
    if unknown:
        raise _invalid(f"unknown field(s): {', '.join(unknown)}")
    anchor_type = value.get("type")
    if anchor_type not in ANCHOR_TYPES:
        raise _invalid(f"type is one of: {', '.join(ANCHOR_TYPES)}")
    target = _clean_string(value.get("value"), "value", MAX_ANCHOR_VALUE_CHARS).strip()
    if not target:
        raise _invalid("value must not be empty")
    if anchor_type in ("url", "api"):
        try:
            vetted_anchor_url(target, allowed_networks=allowed_networks)
        except AnchorURLRefused as refused:
            raise InvalidAnchor(
                refused.reason,
                check_detail="blocked address" if refused.blocked else f"invalid anchor: {refused.reason}",
            ) from None
    anchor: dict[str, Any] = {"type": anchor_type, "value": target}
    if value.get("expect") is not None:
        anchor["expect"] = _clean_expect(value["expect"])
    return anchor


def _clean_expect(expect: Any) -> int | str:
    # bool is an int in Python: refuse it explicitly.
    if isinstance(expect, bool):
        raise _invalid("expect is an HTTP status (100-599) or a substring")
    if isinstance(expect, int):
        if not 100 <= expect <= 599:
            raise _invalid("an expected status is from 100 to 599")
        return expect
    text = _clean_string(expect, "expect", MAX_EXPECT_CHARS)
    if not text.strip():
        raise _invalid("an expected substring must not be empty")
    return text


def _clean_string(value: Any, name: str, limit: int) -> str:
    if not isinstance(value, str):
        raise _invalid(f"{name} must be a string")
    if len(value) > limit:
        raise _invalid(f"{name} is limited to {limit} characters")
    if "\x00" in value:
        raise _invalid(f"{name} must not contain NUL bytes")
    return value


def _invalid(detail: str) -> InvalidAnchor:
    return InvalidAnchor(detail, check_detail=f"invalid anchor: {detail}")
