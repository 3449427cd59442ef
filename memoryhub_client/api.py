"""A small HTTP client of the REST API (/api/v1/teams/{team}/...).

Every failure becomes an ApiError with one line for a person (or an agent) to read:
the status, the server's error code and detail ({"error": code, "detail": ...}), and
what to do. The token is sent in a header and never appears in a message."""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import quote

import httpx

from memoryhub_client.config import TOKEN_ENV, ClientConfig

TIMEOUT_SECONDS = 30.0
MAX_DETAIL_CHARS = 300
USER_AGENT = "memoryhub-client/0.1"

# What the status means for the person at the terminal, before the server's own detail.
STATUS_MEANINGS = {
    400: "invalid request",
    401: f"the server refused the token (check {TOKEN_ENV})",
    403: "forbidden: the token lacks the scope for this",
    404: "not found",
    409: "conflict",
    413: "request too large",
    429: "too many requests",
    503: "server unavailable",
}


class ApiError(Exception):
    def __init__(self, message: str, *, status: int | None = None, body: dict[str, Any] | None = None):
        super().__init__(message)
        self.status = status
        self.body = body or {}


def quote_key(key: str) -> str:
    return quote(key, safe="")


class MemoryHubApi:
    """One team's API on one server. With a `deadline` (time.monotonic()), every request
    gets only the time left until it, and none starts after it: a hook's whole run is
    bounded, not each of its requests."""

    def __init__(
        self,
        config: ClientConfig,
        *,
        transport: httpx.BaseTransport | None = None,
        deadline: float | None = None,
    ) -> None:
        self.base = config.url
        self.team = config.require_team()
        self.deadline = deadline
        token = config.require_token()
        self._http = httpx.Client(
            base_url=f"{self.base}/api/v1/teams/{quote(self.team, safe='')}/",
            headers={"Authorization": f"Bearer {token}", "User-Agent": USER_AGENT},
            timeout=TIMEOUT_SECONDS,
            transport=transport,
        )

    def __enter__(self) -> MemoryHubApi:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._http.close()

    def get(self, path: str, **params: Any) -> dict[str, Any]:
        clean = {name: value for name, value in params.items() if value is not None}
        return self._send("GET", path, params=clean)

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._send("POST", path, json=body)

    def patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._send("PATCH", path, json=body)

    def delete(self, path: str) -> dict[str, Any]:
        return self._send("DELETE", path)

    def _send(self, method: str, path: str, **options: Any) -> dict[str, Any]:
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise ApiError(f"no time left to ask {self.base}")
            options["timeout"] = min(TIMEOUT_SECONDS, left)
        try:
            response = self._http.request(method, path, **options)
        except httpx.HTTPError as exc:
            # httpx's messages name the URL and the cause, never the headers.
            raise ApiError(f"cannot reach {self.base}: {type(exc).__name__}: {exc}") from None
        if response.status_code == 204:
            return {}
        body = _json_object(response)
        if response.is_success:
            if body is None:
                raise ApiError(f"unexpected answer from {self.base} ({response.status_code}, not JSON)")
            return body
        line = error_line(response.status_code, body, response.headers)
        raise ApiError(line, status=response.status_code, body=body)


def error_line(status: int, body: dict[str, Any] | None, headers: httpx.Headers) -> str:
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


def _messages(errors: Any) -> str:
    if isinstance(errors, list):
        return ", ".join(_messages(error) for error in errors)
    if isinstance(errors, dict):
        return ", ".join(f"{name}: {_messages(value)}" for name, value in errors.items())
    return str(errors)


def _one_line(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= MAX_DETAIL_CHARS else flat[: MAX_DETAIL_CHARS - 1] + "…"


def _json_object(response: httpx.Response) -> dict[str, Any] | None:
    try:
        body = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return body if isinstance(body, dict) else None
