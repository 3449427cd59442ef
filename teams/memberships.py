"""Writes to a team's memberships: who may use the dashboard, with which role. Only
owners grant or take away the owner role, and a team always keeps one owner. Each
change is recorded in the team's audit trail. `by=None` is the operator at the
server (management commands), who may do what an owner may."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction

from core.errors import Conflict, InvalidInput, NotFound
from teams.models import AuditEvent, Membership, Team
from teams.services import NotAllowed, record_event, revoke_personal_tokens

Role = Membership.Role


class NoSuchUser(InvalidInput):
    """No account has this username. A surface shown to team admins must not tell this
    apart from a successful add (it would reveal who has an account)."""


def add_member(*, team: Team, username: str, role: str, by: Membership | None) -> Membership:
    """Give an existing user a role in the team. Only owners grant the owner role."""
    _check_grant(role, by)
    user = get_user_model().objects.filter(username=username.strip()).first()
    if user is None:
        raise NoSuchUser(f"no user named '{username.strip()}'", field="username")
    return _add_user(team=team, user=user, role=role, by=by)


def add_new_member(*, team: Team, username: str, email: str, role: str, by: Membership | None) -> Membership:
    """Create an account without a usable password (it gets one through a one-time
    link, teams.accounts.password_set_link) and make it a member, in one transaction:
    a refused add leaves no account behind. The username's unique constraint decides
    between two creates of one name."""
    _check_grant(role, by)
    username = username.strip()
    if not username or len(username) > 150:
        raise InvalidInput("a username is 1-150 characters", field="username")
    User = get_user_model()
    taken = Conflict(f"an account named '{username}' already exists", field="username")
    with transaction.atomic():
        try:
            with transaction.atomic():
                user = User.objects.create_user(username=username, email=email.strip(), password=None)
        except IntegrityError:
            raise taken from None
        return _add_user(team=team, user=user, role=role, by=by)


def _add_user(*, team: Team, user: User, role: str, by: Membership | None) -> Membership:
    already = Conflict(f"{user.get_username()} is already a member of this team", field="username")
    with transaction.atomic():
        if Membership.objects.filter(team=team, user=user).exists():
            raise already
        try:
            # The unique constraint decides between concurrent adds of one user.
            with transaction.atomic():
                membership = Membership.objects.create(team=team, user=user, role=role)
        except IntegrityError:
            raise already from None
        record_event(
            team=team,
            actor=_membership_actor(by),
            action=AuditEvent.Action.MEMBER_ADD,
            target=f"{user.get_username()} as {role}",
        )
    return membership


def change_member_role(*, team: Team, membership_id: int, role: str, by: Membership | None) -> Membership:
    """Only owners promote to owner or change an owner; the last owner stays one."""
    _check_role(role)
    with transaction.atomic():
        membership = _lock_membership(team, membership_id)
        touches_owner = Role.OWNER in (role, membership.role)
        if touches_owner and not _is_owner(by):
            raise NotAllowed("only an owner can change who is an owner", field="role")
        if membership.role == Role.OWNER and role != Role.OWNER:
            _keep_an_owner(team, leaving=membership)
        membership.role = role
        membership.save(update_fields=["role"])
        record_event(
            team=team,
            actor=_membership_actor(by),
            action=AuditEvent.Action.MEMBER_ROLE,
            target=f"{membership.user.get_username()} -> {role}",
        )
        # A token of theirs that could do more than the new role allows goes.
        revoke_personal_tokens(
            team=team, user_id=membership.user_id, actor=_membership_actor(by), beyond_role=role
        )
    return membership


def remove_member(*, team: Team, membership_id: int, by: Membership | None) -> Membership:
    with transaction.atomic():
        membership = _lock_membership(team, membership_id)
        if membership.role == Role.OWNER:
            if not _is_owner(by):
                raise NotAllowed("only an owner can remove an owner")
            _keep_an_owner(team, leaving=membership)
        membership.delete()
        record_event(
            team=team,
            actor=_membership_actor(by),
            action=AuditEvent.Action.MEMBER_REMOVE,
            target=membership.user.get_username(),
        )
        # Their own tokens would still read their personal entries: they go with them.
        revoke_personal_tokens(team=team, user_id=membership.user_id, actor=_membership_actor(by))
    return membership


def membership_id_of(*, team: Team, username: str) -> int:
    """The id of a person's membership of the team, by username (management commands)."""
    membership_id = (
        Membership.objects.filter(team=team, user__username=username.strip())
        .values_list("pk", flat=True)
        .first()
    )
    if membership_id is None:
        raise NotFound(f"'{username.strip()}' is not a member of team '{team.slug}'")
    return membership_id


def _lock_membership(team: Team, membership_id: int) -> Membership:
    membership = (
        Membership.objects.select_for_update(no_key=True, of=("self",))
        .select_related("user")
        .filter(team=team, pk=membership_id)
        .first()
    )
    if membership is None:
        raise NotFound("no such member")
    return membership


def _keep_an_owner(team: Team, *, leaving: Membership) -> None:
    # Lock every owner row so two owners demoting each other at once cannot both win.
    owners = list(
        Membership.objects.select_for_update(no_key=True)
        .filter(team=team, role=Role.OWNER)
        .values_list("pk", flat=True)
    )
    if owners == [leaving.pk]:
        raise Conflict("a team keeps at least one owner; make someone else an owner first")


def _check_role(role: str) -> None:
    if role not in Role.values:
        raise InvalidInput(f"role is one of {', '.join(Role.values)}", field="role")


def _check_grant(role: str, by: Membership | None) -> None:
    """A role that exists, and the owner role granted only by an owner."""
    _check_role(role)
    if role == Role.OWNER and not _is_owner(by):
        raise NotAllowed("only an owner can make someone an owner", field="role")


def _is_owner(by: Membership | None) -> bool:
    return by is None or by.role == Role.OWNER


def _membership_actor(membership: Membership | None) -> str:
    return "manage.py" if membership is None else f"user:{membership.user.get_username()}"
