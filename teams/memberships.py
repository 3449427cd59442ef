"""Writes to a team's memberships: who may use the dashboard, with which role. Only
owners grant or take away the owner role, and a team always keeps one owner. Each
change is recorded in the team's audit trail."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction

from core.errors import Conflict, InvalidInput, NotFound
from teams.models import AuditEvent, Membership, Team
from teams.services import NotAllowed, record_event

Role = Membership.Role


class NoSuchUser(InvalidInput):
    """No account has this username. A surface shown to team admins must not tell this
    apart from a successful add (it would reveal who has an account)."""


def add_member(*, team: Team, username: str, role: str, by: Membership) -> Membership:
    """Give an existing user a role in the team. Only owners grant the owner role."""
    _check_role(role)
    if role == Role.OWNER and by.role != Role.OWNER:
        raise NotAllowed("only an owner can make someone an owner", field="role")
    user = get_user_model().objects.filter(username=username.strip()).first()
    if user is None:
        raise NoSuchUser(f"no user named '{username.strip()}'", field="username")
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


def change_member_role(*, team: Team, membership_id: int, role: str, by: Membership) -> Membership:
    """Only owners promote to owner or change an owner; the last owner stays one."""
    _check_role(role)
    with transaction.atomic():
        membership = _lock_membership(team, membership_id)
        touches_owner = Role.OWNER in (role, membership.role)
        if touches_owner and by.role != Role.OWNER:
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
    return membership


def remove_member(*, team: Team, membership_id: int, by: Membership) -> Membership:
    with transaction.atomic():
        membership = _lock_membership(team, membership_id)
        if membership.role == Role.OWNER:
            if by.role != Role.OWNER:
                raise NotAllowed("only an owner can remove an owner")
            _keep_an_owner(team, leaving=membership)
        membership.delete()
        record_event(
            team=team,
            actor=_membership_actor(by),
            action=AuditEvent.Action.MEMBER_REMOVE,
            target=membership.user.get_username(),
        )
    return membership


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


def _membership_actor(membership: Membership) -> str:
    return f"user:{membership.user.get_username()}"
