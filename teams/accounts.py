"""People's accounts: the first run's team, owner and agent token (`bootstrap`), and
the one-time links that let a person set a password (docs/dashboard.md, "First run and accounts").

A link is Django's password-reset link (`default_token_generator`): it works until the
password changes, so once, and expires after PASSWORD_RESET_TIMEOUT. No password is
ever generated, printed or stored in a terminal's scrollback."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from urllib.parse import urljoin

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.contrib.auth.tokens import default_token_generator
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.core.validators import validate_email
from django.db import transaction
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from core.errors import InvalidInput, NotFound
from core.locks import advisory_xact_lock
from teams import memberships, services
from teams.models import Membership, Team
from teams.scope import dangerously_bypass_team_scope, team_scope

FIRST_TOKEN_NAME = "first-agent"  # noqa: S105 (a name, not a secret)


def password_set_link(*, user: User, base_url: str | None = None) -> str:
    """A one-time link to the dashboard's set-a-new-password page for `user`."""
    path = reverse(
        "dashboard:password_reset_confirm",
        kwargs={
            "uidb64": urlsafe_base64_encode(force_bytes(user.pk)),
            "token": default_token_generator.make_token(user),
        },
    )
    return urljoin(base_url or settings.MEMORYHUB_BASE_URL, path)


def link_lifetime() -> timedelta:
    return timedelta(seconds=settings.PASSWORD_RESET_TIMEOUT)


def password_link_for(*, username: str) -> str:
    """`manage.py password_link`: a link for an existing, active account."""
    user = get_user_model().objects.filter(username=username.strip(), is_active=True).first()
    if user is None:
        raise NotFound(f"no active account named '{username.strip()}'")
    return password_set_link(user=user)


@dataclass(frozen=True)
class Bootstrapped:
    team: Team
    username: str
    link: str
    token: str


@dataclass(frozen=True)
class AlreadySetUp:
    """What a later run finds: every team with its owners' usernames."""

    teams: list[tuple[Team, list[str]]] = field(default_factory=list)
    users: int = 0


def bootstrap(
    *, team_slug: str, team_name: str, username: str, email: str, if_empty: bool = False
) -> Bootstrapped | AlreadySetUp:
    """Create the first team, its owner and an agent token, once.

    An advisory lock serialises concurrent runs inside one transaction, so the second of
    two runs started together sees the first one's team and creates nothing. Any team
    means the server is set up already; with `if_empty` (the first `make run`), so does
    any account, since someone set up people by hand."""
    User = get_user_model()
    username = username.strip()
    if not username:
        raise InvalidInput("a username is needed", field="username")
    with transaction.atomic():
        advisory_xact_lock("memoryhub:bootstrap")
        users = User.objects.count()
        set_up_already = Team.objects.exists() or (if_empty and users)
        if not set_up_already:
            return _set_up(team_slug=team_slug, team_name=team_name, username=username, email=email)
    # Read on the operator's login once the lock's transaction has ended: it reads only
    # what is committed, and the operator scope never starts inside the application's
    # transaction (teams.scope).
    return AlreadySetUp(teams=_teams_with_owners(), users=users)


def _set_up(*, team_slug: str, team_name: str, username: str, email: str) -> Bootstrapped:
    """The first team, its owner and token, in the caller's transaction."""
    User = get_user_model()
    team = services.create_team(slug=team_slug, name=team_name)
    with team_scope(team.id):
        user = User.objects.filter(username=username).first()
        if user is None:
            memberships.add_new_member(
                team=team, username=username, email=email, role=Membership.Role.OWNER, by=None
            )
            user = User.objects.get(username=username)
        else:
            memberships.add_member(team=team, username=username, role=Membership.Role.OWNER, by=None)
        issued = services.create_token(
            team=team, name=FIRST_TOKEN_NAME, scopes=["read", "write"], actor="manage.py bootstrap"
        )
    return Bootstrapped(team=team, username=username, link=password_set_link(user=user), token=issued.raw)


def _teams_with_owners() -> list[tuple[Team, list[str]]]:
    """Every team with its owners' usernames: two queries, not a scope per team (this runs
    on every `make run`), as the operator path it is (manage.py bootstrap)."""
    with dangerously_bypass_team_scope(reason="bootstrap: list the teams and owners", actor="manage.py"):
        teams = list(Team.objects.order_by("slug"))
        owners: dict[int, list[str]] = {team.id: [] for team in teams}
        for team_id, username in (
            Membership.objects.filter(role=Membership.Role.OWNER)
            .order_by("user__username")
            .values_list("team_id", "user__username")
        ):
            owners[team_id].append(username)
    return [(team, owners[team.id]) for team in teams]


@dataclass(frozen=True)
class Invited:
    """`membership` is None when no account matched and none was to be created (the
    caller answers that like a success); `link` is set for a new account only."""

    membership: Membership | None
    link: str = ""
    emailed: bool = False


def invite(
    *, team: Team, who: str, role: str, create_account: bool, by: Membership | None, base_url: str
) -> Invited:
    """The Members page's add: `who` is a username or an e-mail address. With
    `create_account`, a name or address no account has becomes a new account, whose
    one-time password link is returned (and e-mailed when e-mail is configured). An
    existing account never gets a link here: that would hand it to the inviter."""
    who = who.strip()
    is_address = "@" in who
    if is_address:
        try:
            validate_email(who)
        except ValidationError:
            raise InvalidInput("this is not an e-mail address", field="username") from None
    User = get_user_model()
    if is_address:
        existing = list(User.objects.filter(email__iexact=who, is_active=True).order_by("pk")[:2])
        if len(existing) > 1:
            raise InvalidInput("several accounts have this address; add one by username", field="username")
        username = existing[0].get_username() if existing else who
    else:
        existing = list(User.objects.filter(username=who)[:1])
        username = who
    if existing or not create_account:
        try:
            return Invited(membership=memberships.add_member(team=team, username=username, role=role, by=by))
        except memberships.NoSuchUser:
            return Invited(membership=None)
    membership = memberships.add_new_member(
        team=team, username=who, email=who if is_address else "", role=role, by=by
    )
    link = password_set_link(user=membership.user, base_url=base_url)
    emailed = False
    if is_address and settings.MEMORYHUB_EMAIL_ENABLED:
        inviter = "The MemoryHub operator" if by is None else by.user.get_username()
        body = render_to_string(
            "dashboard/invite_email.txt",
            {"inviter": inviter, "team": team, "role": role, "username": who, "link": link},
        )
        # After the commit: a rolled-back invite must not have sent a working link.
        transaction.on_commit(lambda: send_mail(f"You are in {team.name} on MemoryHub", body, None, [who]))
        emailed = True
    return Invited(membership=membership, link=link, emailed=emailed)
