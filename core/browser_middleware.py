"""The middleware that only people's pages use (the dashboard's and the admin's session,
sign-in, flash messages and htmx), as subclasses that an API request goes straight
past: the API authenticates its token on every request and never reads a session, a
signed-in user or a message, and setting them up cost about 0.2 ms of a token's read
(docs/operations.md, "The read path's round trips"). They stay in MIDDLEWARE
under their own class's name, so Django's checks for the admin still find them.

Only their `__call__` is skipped: none of them has a view, exception or template hook
that Django would still call for an API request."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import middleware as auth_middleware
from django.contrib.messages import middleware as messages_middleware
from django.contrib.sessions import middleware as sessions_middleware
from django.http import HttpRequest
from django_htmx import middleware as htmx_middleware

from core.api_errors import is_api_path


class PeoplesPagesOnly:
    """Mixed in before a middleware class: an API request goes on without it. Sync only,
    as MemoryHub is served (WSGI); Django adapts it should it ever run under ASGI."""

    sync_capable = True
    async_capable = False

    def __call__(self, request: HttpRequest) -> Any:
        if is_api_path(request.path):
            return self.get_response(request)  # type: ignore[attr-defined]
        return super().__call__(request)  # type: ignore[misc]


class SessionMiddleware(PeoplesPagesOnly, sessions_middleware.SessionMiddleware):
    pass


class AuthenticationMiddleware(PeoplesPagesOnly, auth_middleware.AuthenticationMiddleware):
    pass


class MessageMiddleware(PeoplesPagesOnly, messages_middleware.MessageMiddleware):
    pass


class HtmxMiddleware(PeoplesPagesOnly, htmx_middleware.HtmxMiddleware):
    pass
