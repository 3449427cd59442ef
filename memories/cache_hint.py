"""A hint, never a refusal: text that looks like an agent's operational cache (a JSON
counter, a timestamp, a progress value) belongs in the vault, where a value is
overwritten in place, not in memory, where every change is a new version that search
and injection read.

The rules look at the whole text, so a sentence that mentions a number is not a cache:
- a JSON value (object, array or scalar) whose every leaf is a number, a boolean, null
  or a timestamp, and that holds at least one number or timestamp;
- a bare number, date or timestamp;
- one to five `name: value` or `name=value` lines whose every value is a number, a
  percentage, a count like `3/10`, a date or a timestamp.
Texts over MAX_CHARS are never caches. Each pattern is anchored and linear-time (RE2)."""

from __future__ import annotations

import json
from typing import Any

import re2

MAX_CHARS = 600
MAX_LINES = 5
VAULT_HINT = (
    "this looks like an operational value (a counter, a timestamp, a progress figure): keep it in the "
    "vault (PUT vault/{key}/, MCP vault_set), which overwrites in place, rather than as a memory version"
)

_NUMBER = r"[-+]?\d+(?:[.,]\d+)?"
_TIMESTAMP = r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
_EPOCH = r"\d{10}(?:\d{3})?"
_VALUE = rf"(?:{_TIMESTAMP}|{_EPOCH}|{_NUMBER}\s*%?|\d+\s*/\s*\d+)"
# The Unicode classes make a large program: RE2's default 8 MiB leaves its lazy DFA out of
# memory ("DFA out of memory" on stderr, and the slower engine) on every save's check.
_OPTIONS = re2.Options()
_OPTIONS.max_mem = 32 << 20
_TIMESTAMP_ONLY = re2.compile(rf"^(?:{_TIMESTAMP}|{_EPOCH})$", _OPTIONS)
_BARE_VALUE = re2.compile(rf"^{_VALUE}$", _OPTIONS)
_NAMED_VALUE = re2.compile(rf"^[\pL_][\pL\pN_ .-]{{0,40}}\s*[:=]\s*{_VALUE}$", _OPTIONS)


def vault_hint(content: str) -> str | None:
    """VAULT_HINT when the text looks like an operational value, else None."""
    text = content.strip()
    if not text or len(text) > MAX_CHARS:
        return None
    if _is_json_state(text):
        return VAULT_HINT
    if _BARE_VALUE.match(text):
        return VAULT_HINT
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if 0 < len(lines) <= MAX_LINES and all(_NAMED_VALUE.match(line) for line in lines):
        return VAULT_HINT
    return None


def _is_json_state(text: str) -> bool:
    if text[0] not in "{[":
        return False
    try:
        value = json.loads(text)
    except ValueError:
        return False
    leaves = list(_leaves(value))
    return bool(leaves) and all(kind != "text" for kind in leaves) and any(kind == "value" for kind in leaves)


def _leaves(value: Any) -> Any:
    """Each leaf's kind: "value" (a number or a timestamp), "flag" (bool or null), "text"."""
    if isinstance(value, dict):
        for item in value.values():
            yield from _leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from _leaves(item)
    elif isinstance(value, bool) or value is None:
        yield "flag"
    elif isinstance(value, int | float) or (isinstance(value, str) and _TIMESTAMP_ONLY.match(value.strip())):
        yield "value"
    else:
        yield "text"
