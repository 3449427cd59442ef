"""The guard in front of the whole WSGI application (REST, MCP, dashboard): no client
holds more than a few of a process's threads, and no request holds one while its body
trickles in (docs/security.md, "Web server").

- **In flight per client.** A request with an agent token counts against that token (a
  hash of it); a request without one counts against the client's address
  (core.client_address) when it has a body. Over `MEMORYHUB_IN_FLIGHT_PER_CLIENT` in
  this process (half its threads by default), it answers 429 at once, unread. A request
  counts from its headers until its answer is written, so a slow reader counts too.
  Bodiless requests without a token (pages, static files, probes) are not counted: a
  browser fetches several at once, and they hold a thread only while the app works.
- **The body is read here**, before the application runs, within
  `MEMORYHUB_BODY_TIMEOUT_SECONDS` plus its size at `MEMORYHUB_BODY_MIN_BYTES_PER_SECOND`;
  a body that has not arrived by then answers 408. The application then reads it from
  memory. Before reading, a body's token must be a live one (one indexed lookup): made-up
  tokens would otherwise each get slots of their own; they count as the address.
- **Answers given without reading the body** (413, 429, 408) close the connection and say
  so (`Connection: close`): the unread bytes would otherwise be taken for the next request.
- **Answers are written within `MEMORYHUB_SEND_TIMEOUT_SECONDS`** per write: a client
  that stops reading its answer loses the connection instead of holding the thread."""

from __future__ import annotations

import hashlib
import io
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from http import HTTPStatus
from typing import Any

from django.conf import settings
from django.db import close_old_connections

from core.api_errors import error_body
from core.client_address import client_address
from memoryhub.read_deadline import deadlines
from teams.authentication import is_live_token

logger = logging.getLogger(__name__)

StartResponse = Callable[..., Any]
WSGIApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]
READ_STEP = 64 * 1024
RETRY_AFTER_SECONDS = 1


class RequestGuard:
    def __init__(self, application: WSGIApp) -> None:
        self.application = application
        self._lock = threading.Lock()
        self._in_flight: dict[str, int] = {}

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        has_body = _has_body(environ)
        client = _client_key(environ, has_body)
        if client is not None and not self._enter(client):
            body = error_body(
                "rate_limited",
                f"too many requests of this client at once; retry in {RETRY_AFTER_SECONDS} seconds",
                retry_after=RETRY_AFTER_SECONDS,
            )
            return _closing_answer(start_response, 429, body, [("Retry-After", str(RETRY_AFTER_SECONDS))])
        handed_over = False
        try:
            if has_body:
                refusal = _read_body(environ)
                if refusal is not None:
                    status, refusal_body = refusal
                    return _closing_answer(start_response, status, refusal_body)
                if environ.get("memoryhub.read_side_shut"):
                    _close_after_answer(start_response)
            _bound_writes(environ)
            answer = self.application(environ, start_response)
            handed_over = True
            return _Leaving(answer, lambda: self._leave(client))
        finally:
            if not handed_over:
                self._leave(client)

    def _enter(self, client: str) -> bool:
        cap: int = settings.MEMORYHUB_IN_FLIGHT_PER_CLIENT
        with self._lock:
            count = self._in_flight.get(client, 0)
            if count >= cap:
                return False
            self._in_flight[client] = count + 1
            return True

    def _leave(self, client: str | None) -> None:
        if client is None:
            return
        with self._lock:
            count = self._in_flight.get(client, 0) - 1
            if count > 0:
                self._in_flight[client] = count
            else:
                self._in_flight.pop(client, None)


class _Leaving:
    """The application's answer; leaving the count once the server has written it all
    (WSGI servers call close() then, even when writing failed)."""

    def __init__(self, answer: Iterable[bytes], leave: Callable[[], None]) -> None:
        self._answer = answer
        self._leave = leave
        self._left = False

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._answer)

    def close(self) -> None:
        try:
            close = getattr(self._answer, "close", None)
            if close is not None:
                close()
        finally:
            if not self._left:
                self._left = True
                self._leave()


def _has_body(environ: dict[str, Any]) -> bool:
    length = environ.get("CONTENT_LENGTH") or ""
    return (length not in ("", "0")) or "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()


def _bearer(environ: dict[str, Any]) -> str | None:
    parts = environ.get("HTTP_AUTHORIZATION", "").split()
    if len(parts) == 2 and parts[0].lower() == "bearer":
        return parts[1]
    return None


def _client_key(environ: dict[str, Any], has_body: bool) -> str | None:
    """Whom the request counts against; None: not counted."""
    bearer = _bearer(environ)
    if bearer is not None and (not has_body or _live(bearer)):
        return "token:" + hashlib.sha256(bearer.encode("utf-8", "surrogateescape")).hexdigest()
    if bearer is None and not has_body:
        return None
    return "address:" + client_address(_Meta(environ))


def _live(bearer: str) -> bool:
    close_old_connections()
    try:
        return is_live_token(bearer)
    except Exception:
        # The database is down: the application answers 503 soon enough; count the
        # request against its token meanwhile.
        logger.warning("could not look up a token before reading a body", exc_info=True)
        return True
    finally:
        close_old_connections()


class _Meta:
    """What core.client_address reads of a request: its META, here the WSGI environ."""

    def __init__(self, environ: dict[str, Any]) -> None:
        self.META = environ


def _read_body(environ: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
    """Reads the whole body into memory within its deadline and hands it to the
    application; or the refusal (status, body)."""
    limit: int = settings.MAX_REQUEST_BODY_BYTES
    declared = environ.get("CONTENT_LENGTH") or ""
    chunked = "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
    expected: int | None = None
    if declared and not chunked:
        if not declared.isdigit():
            return 400, error_body("bad_request", "Content-Length is not a number")
        expected = int(declared)
    if expected is not None and expected > limit:
        return 413, error_body("body_too_large", f"request body is larger than {limit} bytes")
    min_rate: int = settings.MEMORYHUB_BODY_MIN_BYTES_PER_SECOND
    seconds = (
        settings.MEMORYHUB_BODY_TIMEOUT_SECONDS + (expected if expected is not None else limit) / min_rate
    )
    stream = environ["wsgi.input"]
    pieces: list[bytes] = []
    received = 0
    wanted = expected if expected is not None else limit + 1
    with deadlines.watch(environ.get("gunicorn.socket"), time.monotonic() + seconds) as watch:
        try:
            while received < wanted:
                piece = stream.read(min(READ_STEP, wanted - received))
                if not piece:
                    break
                pieces.append(piece)
                received += len(piece)
        except Exception:
            if not watch.fired:
                raise  # a malformed chunked body: gunicorn answers it (400)
    if watch.fired:
        environ["memoryhub.read_side_shut"] = True
    if received > limit:
        return 413, error_body("body_too_large", f"request body is larger than {limit} bytes")
    if watch.fired and (expected is None or received < expected):
        return 408, error_body(
            "request_timeout", f"the request body did not arrive within {seconds:.0f} seconds"
        )
    if expected is not None and received < expected:
        return 400, error_body("bad_request", "the request body ended before its Content-Length")
    body = b"".join(pieces)
    environ["wsgi.input"] = io.BytesIO(body)
    environ["CONTENT_LENGTH"] = str(len(body))
    environ.pop("HTTP_TRANSFER_ENCODING", None)
    return None


def _bound_writes(environ: dict[str, Any]) -> None:
    sock = environ.get("gunicorn.socket")
    if sock is not None:
        # Each sendall() of the answer must finish within this (Python measures the whole
        # call, not each send); gunicorn resets the socket for the next request.
        sock.settimeout(settings.MEMORYHUB_SEND_TIMEOUT_SECONDS)


def _close_after_answer(start_response: StartResponse) -> None:
    """Make gunicorn close the connection after this answer and say `Connection: close`.
    gunicorn drops a Connection header set by the application (a hop-by-hop header,
    which PEP 3333 does not let an application send); its response object, whose
    start_response this is, has force_close() for it."""
    force_close = getattr(getattr(start_response, "__self__", None), "force_close", None)
    if callable(force_close):
        force_close()


def _closing_answer(
    start_response: StartResponse,
    status: int,
    body: dict[str, Any],
    headers: list[tuple[str, str]] | None = None,
) -> list[bytes]:
    _close_after_answer(start_response)
    payload = json.dumps(body).encode()
    start_response(
        f"{status} {HTTPStatus(status).phrase}",
        [("Content-Type", "application/json"), ("Content-Length", str(len(payload))), *(headers or [])],
    )
    return [payload]
