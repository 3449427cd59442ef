"""Anchors: what a memory can be checked against (issue 12, "anchored verification").

An anchor is `{type, value, expect?}`:

- `url`: an http(s) URL whose page should still answer (GET);
- `api`: an http(s) URL of an API endpoint that should still answer;
- `file`: a path in the team's worktree (only a client can check it);

`expect`, optional, is what a good answer looks like: an HTTP status (100-599) or a
substring the body must contain. Checking anchors is freshness's job; this module only
says what a well-formed anchor is, for every path that saves one (REST, MCP, import).
No regular expression runs on the value: it is parsed by urllib and length-bounded.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from core.errors import InvalidInput

ANCHOR_TYPES = ("url", "file", "api")
ANCHOR_FIELDS = ("type", "value", "expect")
MAX_ANCHOR_VALUE_CHARS = 2000
MAX_EXPECT_CHARS = 200
HTTP_SCHEMES = ("http", "https")


def normalise_anchor(value: Any) -> dict[str, Any] | None:
    """The stored form of an anchor (None stays None: no anchor). Raises InvalidInput
    (field "anchor") for anything else than a well-formed anchor."""
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
        _check_http_url(target)
    anchor: dict[str, Any] = {"type": anchor_type, "value": target}
    if value.get("expect") is not None:
        anchor["expect"] = _clean_expect(value["expect"])
    return anchor


def _check_http_url(target: str) -> None:
    if any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in target):
        raise _invalid("a URL has no whitespace or control characters")
    try:
        parts = urlsplit(target)
        port = parts.port  # raises ValueError for a malformed port
    except ValueError:
        raise _invalid("value is not a valid URL") from None
    if parts.scheme.lower() not in HTTP_SCHEMES or not parts.hostname:
        raise _invalid("a url or api anchor is an http:// or https:// URL with a host")
    if parts.username is not None or parts.password is not None:
        raise _invalid("an anchor URL carries no credentials")
    del port


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


def _invalid(detail: str) -> InvalidInput:
    return InvalidInput(f"anchor: {detail}", field="anchor")
