"""`/mcp/`: the MCP server's Streamable HTTP endpoint inside the WSGI application.

gunicorn's threaded workers stay (docs/security.md, "Web server");
the SDK's ASGI app runs on one event loop per worker process, behind a2wsgi, in the
SDK's stateless mode with JSON answers: every MCP message is one HTTP request, held by
one gunicorn thread, and nothing keeps a stream (or a thread) open between them: GET
(the SDK's event stream) and DELETE answer 405 (docs/agents.md, "The MCP server").

Before a request reaches MCP it is authenticated here, by REST's own token
authentication: no token, an unknown, revoked or expired one answers 401 in the one
error shape, and requests without a valid token share REST's per-address budget.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import threading
from collections.abc import Callable, Iterable
from http import HTTPStatus
from typing import Any

from a2wsgi import ASGIMiddleware
from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.core.handlers.wsgi import WSGIRequest
from django.db import close_old_connections, transaction
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from rest_framework import exceptions as drf
from rest_framework.request import Request

from agents.mcp.server import REQUEST_ENVIRON_KEY, build_server
from core.api_errors import error_body, is_database_unavailable
from teams.authentication import AgentTokenAuthentication
from teams.throttling import AnonymousAddressThrottle

logger = logging.getLogger(__name__)

MCP_PATH = "/mcp"
STARTUP_SECONDS = 30.0

StartResponse = Callable[..., Any]
WSGIApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


def is_mcp_path(path: str) -> bool:
    return path == MCP_PATH or path.startswith(MCP_PATH + "/")


def with_mcp(django_application: WSGIApp) -> WSGIApp:
    """The site's WSGI application with `/mcp` (and everything under it) served by MCP."""
    mcp = MCPApplication()

    def application(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if is_mcp_path(environ.get("PATH_INFO", "")):
            return mcp(environ, start_response)
        return django_application(environ, start_response)

    return application


class MCPApplication:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._asgi: ASGIMiddleware | None = None

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        refusal = admit(environ)
        if refusal is not None:
            status, body, headers = refusal
            return _json(start_response, status, body, headers)
        return self._application()(environ, start_response)  # type: ignore[arg-type]

    def _application(self) -> ASGIMiddleware:
        # Started on first use, in the worker process: an event loop thread must not
        # be created before gunicorn forks.
        with self._lock:
            if self._asgi is None:
                self._asgi = _start_asgi_application()
            return self._asgi


def _start_asgi_application() -> ASGIMiddleware:
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, name="mcp-event-loop", daemon=True).start()
    manager = StreamableHTTPSessionManager(
        app=build_server(),
        json_response=True,
        stateless=True,
        max_request_body_size=settings.MAX_REQUEST_BODY_BYTES,
    )
    started = threading.Event()

    async def run_manager() -> None:
        # What an ASGI server's lifespan would do: the manager's task group lives as
        # long as the process.
        async with manager.run():
            started.set()
            await asyncio.Event().wait()

    asyncio.run_coroutine_threadsafe(run_manager(), loop)
    if not started.wait(STARTUP_SECONDS):
        raise RuntimeError("the MCP session manager did not start")
    return ASGIMiddleware(StreamableHTTPASGIApp(manager), loop=loop)  # type: ignore[arg-type]


Refusal = tuple[int, dict[str, Any], list[tuple[str, str]]]
CHALLENGE = ("WWW-Authenticate", 'Bearer realm="memoryhub"')


def admit(environ: dict[str, Any]) -> Refusal | None:
    """What Django and the REST API check before a request reaches a view, for a request
    to MCP: the host (ALLOWED_HOSTS), HTTPS (SECURE_SSL_REDIRECT), the method (POST), the
    agent token and the body's size. None lets it through, with the authenticated request (the token in
    `auth`) left in the environ for the tools; else the refusal."""
    django_request = WSGIRequest(environ)
    try:
        host = django_request.get_host()
    except DisallowedHost:
        return 400, error_body("bad_request", "bad request"), []
    if settings.SECURE_SSL_REDIRECT and not django_request.is_secure():
        # As SecurityMiddleware redirects every other path; 308 so that a POST stays one
        # (the SDK's client follows it on the same host).
        location = f"https://{host}{django_request.get_full_path()}"
        return 308, error_body("https_required", f"use {location}"), [("Location", location)]
    if environ.get("REQUEST_METHOD") != "POST":
        # Stateless, answering in the POST: the SDK would hold a GET open as an event
        # stream (and a thread with it) for ever, and has no session to DELETE.
        return 405, error_body("method_not_allowed", "MCP takes POST requests only"), [("Allow", "POST")]
    request = Request(django_request)
    refusal = _authenticate(request)
    if refusal is not None:
        return refusal
    limit: int = settings.MAX_REQUEST_BODY_BYTES
    length = environ.get("CONTENT_LENGTH") or "0"
    if not length.isdigit() or int(length) > limit:
        return 413, error_body("body_too_large", f"request body is larger than {limit} bytes"), []
    environ[REQUEST_ENVIRON_KEY] = request
    return None


def _authenticate(request: Request) -> Refusal | None:
    """REST's token authentication (teams.authentication), in its own transaction: the
    token's `last_used_at` is recorded as on REST."""
    close_old_connections()
    try:
        with transaction.atomic():
            found = AgentTokenAuthentication().authenticate(request)
    except drf.AuthenticationFailed as exc:
        return _anonymous(request, str(exc.detail))
    except Exception as exc:
        if not is_database_unavailable(exc):
            raise
        logger.error("database unavailable, MCP request answered 503: %s", exc)
        retry_after: int = settings.DB_UNAVAILABLE_RETRY_AFTER_SECONDS
        body = error_body(
            "database_unavailable",
            "the database is temporarily unavailable; retry later",
            retry_after=retry_after,
        )
        return 503, body, [("Retry-After", str(retry_after))]
    finally:
        close_old_connections()
    if found is None:
        return _anonymous(request, "send 'Authorization: Bearer <token>'")
    principal, token = found
    request.user, request.auth = principal, token  # type: ignore[assignment]  # an agent, not a User
    return None


def _anonymous(request: Request, detail: str) -> Refusal:
    """401, or 429 once the address has used REST's budget for requests without a token."""
    throttle = AnonymousAddressThrottle()
    if not throttle.allow_request(request, None):
        # Whole seconds, rounded up, as REST's Retry-After.
        retry_after = max(1, math.ceil(throttle.wait() or 1.0))
        body = error_body(
            "rate_limited", f"too many requests; retry in {retry_after} seconds", retry_after=retry_after
        )
        return 429, body, [("Retry-After", str(retry_after))]
    return 401, error_body("unauthenticated", detail), [CHALLENGE]


def _json(
    start_response: StartResponse, status: int, body: dict[str, Any], headers: list[tuple[str, str]]
) -> list[bytes]:
    payload = json.dumps(body).encode()
    start_response(
        f"{status} {HTTPStatus(status).phrase}",
        [("Content-Type", "application/json"), ("Content-Length", str(len(payload))), *headers],
    )
    return [payload]
