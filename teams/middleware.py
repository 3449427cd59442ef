from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from teams.scope import dangerously_bypass_team_scope

ADMIN_PREFIX = "/admin/"


class OperatorScopeMiddleware:
    """Staff requests to the Django admin see every team: they run inside the audited
    bypass scope (one transaction per request). Nothing else ever enters it here."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        # The path first: reading the user loads the session, which no other path needs.
        if not request.path.startswith(ADMIN_PREFIX):
            return self.get_response(request)
        user = getattr(request, "user", None)
        if user is None or not (user.is_authenticated and user.is_staff):
            return self.get_response(request)
        reason = f"admin {request.method} {request.path}"
        with dangerously_bypass_team_scope(reason=reason, actor=user.get_username()):
            response = self.get_response(request)
            # Admin pages are TemplateResponses whose querysets run while rendering.
            if hasattr(response, "render") and not getattr(response, "is_rendered", True):
                response.render()
        return response
