from __future__ import annotations

from typing import Any

from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

from teams.models import AgentToken


class HasTokenScope(BasePermission):
    """read for safe methods, write for changes; a view may ask for more per action
    through `required_scopes = {"action": "admin"}`."""

    def has_permission(self, request: Request, view: Any) -> bool:
        needed = needed_scope(request, view)
        self.message = f"this token lacks the '{needed}' scope"
        token = request.auth
        return isinstance(token, AgentToken) and token.grants(needed)


def needed_scope(request: Request, view: Any) -> str:
    """The scope this request needs (the API throttles count reads and writes by it)."""
    needed: str | None = getattr(view, "required_scopes", {}).get(getattr(view, "action", None))
    if needed is None:
        needed = "read" if request.method in SAFE_METHODS else "write"
    return needed
