"""What a call to a MemoryHub server raises: one exception class per kind of answer, all
`MemoryHubError`, each carrying the server's error body (`{"error": code, "detail": ...}`,
the one error shape of every 4xx and 503) and, where the server said when to try again,
`retry_after` in seconds.

`str(error)` is one line for a person or an agent to read: what the status means, the
server's code and detail, the fields that did not validate and when to retry. The token
is sent in a header and never appears in an error."""

from __future__ import annotations

import email.utils
import json
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

MAX_DETAIL_CHARS = 300

# What the status means for a reader, before the server's own detail.
STATUS_MEANINGS = {
    400: "invalid request",
    401: "the server refused the token (check MEMORYHUB_TOKEN)",
    403: "forbidden: the token lacks the scope for this",
    404: "not found",
    409: "conflict",
    413: "request too large",
    429: "too many requests",
    503: "server unavailable",
}


class MemoryHubError(Exception):
    """A call failed. `status` is the HTTP status (None when no answer came), `code` the
    server's error code (`not_found`, `invalid`, `conflict`, `rate_limited`, ...), `detail`
    its message, `fields` the messages per input field of a 400, `retry_after` the seconds
    the server asked to wait (429 and 503), and `body` the whole error body."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        body: Mapping[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.body: dict[str, Any] = dict(body or {})
        self.retry_after = retry_after

    @property
    def code(self) -> str | None:
        """The server's error code, e.g. `not_found`; None when it sent none."""
        code = self.body.get("error")
        return code if isinstance(code, str) else None

    @property
    def detail(self) -> str:
        """The server's message, or this error's line when it sent none."""
        detail = self.body.get("detail")
        return detail if isinstance(detail, str) else str(self)

    @property
    def fields(self) -> dict[str, Any]:
        """Validation messages per input field (a 400 `invalid`); empty otherwise."""
        fields = self.body.get("fields")
        return fields if isinstance(fields, dict) else {}


class ServerUnreachable(MemoryHubError):
    """No answer: the server could not be reached, or did not answer in time."""


class UnexpectedAnswer(MemoryHubError):
    """The server answered something that is not MemoryHub's JSON (a proxy's page?)."""


class InvalidRequest(MemoryHubError):
    """400, 413 or 415: the request does not validate (see `fields`), is too large, or is
    not JSON. Sending it again changes nothing."""


class Unauthenticated(MemoryHubError):
    """401: no token, or an unknown, expired or revoked one."""


class Forbidden(MemoryHubError):
    """403: the token lacks the scope (read, write, admin) this call needs."""


class NotFound(MemoryHubError):
    """404: no such key, version, draft or session in the team (another team's ids answer
    the same)."""


class Conflict(MemoryHubError):
    """409: the call conflicts with the current state: `conflict` (the key has an active
    entry and no supersede reason was given), `stale_version`, `quota_exceeded`, ...
    `current` is the entry in the way, when the server names one."""

    @property
    def current(self) -> dict[str, Any] | None:
        """The entry the server named (the key's active entry), or None."""
        current = self.body.get("current")
        return current if isinstance(current, dict) else None


class RateLimited(MemoryHubError):
    """429: the token has used its budget for now; `retry_after` says when to try again."""


class ServerUnavailable(MemoryHubError):
    """503: the server (or its database, or an extractor it calls) cannot answer now;
    `retry_after` says when to try again, when the server said."""


class ServerError(MemoryHubError):
    """Another 5xx: a fault on the server's side."""


ERRORS_BY_STATUS: dict[int, type[MemoryHubError]] = {
    400: InvalidRequest,
    401: Unauthenticated,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: InvalidRequest,
    415: InvalidRequest,
    429: RateLimited,
    503: ServerUnavailable,
}


def error_from_answer(
    status: int, body: Mapping[str, Any] | None, headers: Mapping[str, str]
) -> MemoryHubError:
    """The exception for an answer that is not a success."""
    retry_after = retry_after_seconds(body, headers)
    default = ServerError if status >= 500 else MemoryHubError
    cls = ERRORS_BY_STATUS.get(status, default)
    return cls(error_line(status, body, headers), status=status, body=body, retry_after=retry_after)


def retry_after_seconds(body: Mapping[str, Any] | None, headers: Mapping[str, str]) -> float | None:
    """The wait the server asked for: the body's `retry_after`, else the `Retry-After`
    header (seconds, or an HTTP date). None when it named none."""
    value = (body or {}).get("retry_after")
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return max(0.0, float(value))
    header = headers.get("Retry-After") or headers.get("retry-after")
    if not header:
        return None
    header = header.strip()
    if header.isdigit():
        return float(header)
    try:
        when = email.utils.parsedate_to_datetime(header)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def error_line(status: int, body: Mapping[str, Any] | None, headers: Mapping[str, str]) -> str:
    """One line saying what went wrong: the status's meaning with the server's code, its
    detail, the fields that did not validate, and when to retry."""
    meaning = STATUS_MEANINGS.get(status, "error")
    parts = [f"{meaning} ({status}"]
    if body and isinstance(body.get("error"), str):
        parts[0] += f" {body['error']}"
    parts[0] += ")"
    detail = body.get("detail") if body else None
    if isinstance(detail, str) and detail:
        parts.append(_one_line(detail))
    fields = body.get("fields") if body else None
    if isinstance(fields, dict) and fields:
        parts.append("; ".join(f"{name}: {_one_line(_messages(errors))}" for name, errors in fields.items()))
    retry = (body or {}).get("retry_after") or headers.get("Retry-After")
    if status in (429, 503) and retry and "retry" not in " ".join(parts):  # unless the detail says it
        parts.append(f"retry in {retry} s")
    return ": ".join(parts)


def json_object(raw: bytes) -> dict[str, Any] | None:
    """The body as a JSON object, or None when it is not one."""
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return body if isinstance(body, dict) else None


def _messages(errors: Any) -> str:
    if isinstance(errors, list):
        return ", ".join(_messages(error) for error in errors)
    if isinstance(errors, dict):
        return ", ".join(f"{name}: {_messages(value)}" for name, value in errors.items())
    return str(errors)


def _one_line(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= MAX_DETAIL_CHARS else flat[: MAX_DETAIL_CHARS - 1] + "…"
