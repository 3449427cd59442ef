"""Who may see which team page, and the scope every team page runs in.

Every view under /teams/<slug>/ is wrapped by `team_page(min_role)`, which, in order:

1. sends anonymous visitors to the sign-in page;
2. answers 404 for a malformed slug, a team that does not exist, and a team the person
   is not a member of, with the same body, so a page never reveals that a team exists;
3. runs the view inside `team_scope(team.id)` (one transaction bound to the team by
   row-level security), so a forgotten filter returns nothing of another team;
4. answers 403 when the person's role is below `min_role`: members of the team know it
   exists, and a clear "your role cannot do this" helps them;
5. redacts the team's vault secrets from the rendered page's text and user-content
   attribute values, never its markup (dashboard.page_redaction), except on the one
   page that exists to reveal a secret.

Roles are ordered viewer < member < admin < owner: viewers read; members also write
memories; admins also manage tokens, the vault, members and re-indexing; owners also
shut the team down.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from typing import Any, Concatenate, ParamSpec

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from core.errors import NotFound
from dashboard.page_redaction import redact_page
from teams.models import Membership, Team
from teams.scope import team_scope, viewer_of
from teams.selectors import find_membership, find_team
from teams.validators import is_key, is_team_slug
from teams.vault_matcher import team_secret_matcher

Role = Membership.Role
ROLE_RANK: dict[str, int] = {Role.VIEWER: 0, Role.MEMBER: 1, Role.ADMIN: 2, Role.OWNER: 3}

P = ParamSpec("P")


@dataclass(frozen=True)
class TeamAccess:
    """The team of the page and the signed-in person's membership in it."""

    team: Team
    membership: Membership

    @property
    def role(self) -> str:
        return self.membership.role

    def can(self, role: str) -> bool:
        return ROLE_RANK[self.role] >= ROLE_RANK[role]

    @property
    def can_write(self) -> bool:
        return self.can(Role.MEMBER)

    @property
    def can_admin(self) -> bool:
        return self.can(Role.ADMIN)

    @property
    def is_owner(self) -> bool:
        return self.can(Role.OWNER)


TeamView = Callable[Concatenate[HttpRequest, TeamAccess, P], HttpResponse]


def team_page(
    min_role: str = Role.VIEWER, *, reveals_secret: bool = False
) -> Callable[[TeamView[P]], Callable[..., HttpResponse]]:
    """Wrap a view `view(request, access, **kwargs)` served under /teams/<slug>/."""
    if min_role not in ROLE_RANK:
        raise ValueError(f"unknown role {min_role!r}")

    def decorator(view: TeamView[P]) -> Callable[..., HttpResponse]:
        @wraps(view)
        @login_required
        def wrapper(request: HttpRequest, slug: str, *args: P.args, **kwargs: P.kwargs) -> HttpResponse:
            if not is_team_slug(slug):
                return not_found(request)
            team = find_team(slug=slug)
            if team is None:
                return not_found(request)
            with team_scope(team.id, viewer=viewer_of(signed_in_user_id(request))):
                membership = find_membership(team=team, user_id=signed_in_user_id(request))
                if membership is None:
                    return not_found(request)
                access = TeamAccess(team=team, membership=membership)
                if not access.can(min_role):
                    return forbidden(request, access, min_role)
                try:
                    response = view(request, access, *args, **kwargs)
                except NotFound:
                    # A key, version, token or member of this team that does not exist.
                    return not_found(request)
                if not reveals_secret:
                    _scrub_secrets(response, team_id=team.id)
            return response

        return wrapper

    return decorator


def signed_in_user_id(request: HttpRequest) -> int:
    """The signed-in person's id. Only for views behind login_required."""
    user = request.user
    if not user.is_authenticated:
        raise RuntimeError("login_required lets only signed-in people through")
    return user.pk


def not_found(request: HttpRequest) -> HttpResponse:
    """The one 404 body of the dashboard: nothing in it depends on the URL."""
    return render(request, "dashboard/error.html", {"status": 404, "title": "Not found"}, status=404)


def forbidden(request: HttpRequest, access: TeamAccess, min_role: str) -> HttpResponse:
    context = page_context(access, status=403, title="Not allowed", needed_role=min_role)
    return render(request, "dashboard/error.html", context, status=403)


def _scrub_secrets(response: HttpResponse, *, team_id: int) -> None:
    """A secret that reached text before it entered the vault (an old memory, a note)
    never leaves in a page. Vault values only; the credential shapes were scrubbed from
    content when it was written."""
    if not response.get("Content-Type", "").startswith("text/html") or response.streaming:
        return
    matcher = team_secret_matcher(team_id=team_id)
    if matcher.is_empty:
        return
    body, redacted = redact_page(response.content.decode(response.charset or "utf-8"), matcher)
    if redacted:
        response.content = body.encode(response.charset or "utf-8")


def path_key(key: str) -> str:
    """A memory or vault key taken from a page's URL: a malformed one is simply a page
    that does not exist (404), never a form error."""
    if not is_key(key):
        raise NotFound("malformed key")
    return key


def person_actor(request: HttpRequest) -> str:
    """Who a change made in the dashboard is attributed to (`updated_by` and the like):
    `user:<username>`, told apart from agent token names."""
    return f"user:{request.user.get_username()}"


def page_context(access: TeamAccess, **extra: Any) -> dict[str, Any]:
    return {"access": access, "team": access.team, **extra}
