"""Writes the dashboard needs that no app service covers yet: the audit log, revealing
a vault secret, re-index requests and team membership. Token, vault and memory writes
themselves go through teams.services and memories.services; the functions here add
the audit record around them.

Every function takes the team explicitly; the caller is inside the team's scope (the
dashboard's `team_page`), and each runs in one transaction.
"""

from __future__ import annotations

import logging
from typing import Literal

from django.contrib.auth import get_user_model
from django.db import transaction

from memories.models import IndexState, Memory
from memoryhub.dashboard.models import AuditEvent
from memoryhub.lib.errors import Conflict, DomainError, InvalidInput, NotFound
from search import tasks as search_tasks
from teams import services as team_services
from teams.models import AgentToken, Membership, Team, VaultEntry
from teams.selectors import get_vault_entry, reveal_vault_value

audit_logger = logging.getLogger("memoryhub.audit")

Role = Membership.Role
# Re-trying entries stuck in pending/failed: at most this many per click; the periodic
# reconcile job goes on with the rest.
MAX_RETRY_BATCH = 500


class NotAllowed(DomainError):
    """The person's role does not allow this change (e.g. an admin touching an owner)."""

    code = "forbidden"
    status = 403


def record_event(*, team: Team, actor: str, action: str, target: str = "") -> AuditEvent:
    event = AuditEvent.objects.create(team=team, actor=actor, action=action, target=target[:300])
    audit_logger.info("team %s: %s %s %s", team.slug, actor, action, target)
    return event


# --- vault -----------------------------------------------------------------


def reveal_vault_secret(*, team: Team, key: str, actor: str) -> tuple[VaultEntry, str]:
    """The plain value of one vault entry, recorded in the audit log before it is
    returned. The caller checked that the person is an admin of the team."""
    with transaction.atomic():
        entry = get_vault_entry(team=team, key=key)
        value = reveal_vault_value(entry)
        record_event(team=team, actor=actor, action=AuditEvent.Action.VAULT_REVEAL, target=key)
    return entry, value


def set_vault_value(
    *, team: Team, key: str, value: str, is_secret: bool, actor: str
) -> tuple[VaultEntry, bool]:
    """Create, replace or rotate a vault entry (teams.services.set_vault_entry)."""
    with transaction.atomic():
        entry, created = team_services.set_vault_entry(
            team=team, key=key, value=value, is_secret=is_secret, updated_by=actor
        )
        record_event(team=team, actor=actor, action=AuditEvent.Action.VAULT_SET, target=key)
    return entry, created


def delete_vault_value(*, team: Team, key: str, actor: str) -> None:
    with transaction.atomic():
        team_services.delete_vault_entry(team=team, key=key, deleted_by=actor)
        record_event(team=team, actor=actor, action=AuditEvent.Action.VAULT_DELETE, target=key)


# --- tokens ----------------------------------------------------------------


def issue_token(*, team: Team, name: str, scopes: list[str], actor: str) -> team_services.IssuedToken:
    with transaction.atomic():
        issued = team_services.create_token(team=team, name=name, scopes=scopes)
        record_event(
            team=team,
            actor=actor,
            action=AuditEvent.Action.TOKEN_CREATE,
            target=f"{issued.token.name} ({','.join(scopes)})",
        )
    return issued


def revoke_token_by_id(*, team: Team, token_id: int, actor: str) -> AgentToken:
    with transaction.atomic():
        token = AgentToken.objects.filter(team=team, pk=token_id).first()
        if token is None:
            raise NotFound("no such token")
        if token.revoked_at is not None:
            raise Conflict(f"token '{token.name}' is already revoked")
        token = team_services.revoke_token(team=team, name=token.name)
        record_event(team=team, actor=actor, action=AuditEvent.Action.TOKEN_REVOKE, target=token.name)
    return token


# --- search index ------------------------------------------------------------


def request_reindex(*, team: Team, actor: str, scope: Literal["stuck", "all"]) -> int:
    """Enqueue indexing after commit; returns how many memories it concerns.

    "stuck": the entries left pending or failed (one index task each, at most
    MAX_RETRY_BATCH); "all": search.tasks.reindex_team, which re-chunks and re-embeds
    every entry of the team with its embedding profile."""
    with transaction.atomic():
        live = Memory.objects.for_team(team.id).filter(deleted_at__isnull=True)
        if scope == "all":
            count = live.count()
            team_id = team.id
            transaction.on_commit(
                lambda: search_tasks.reindex_team.apply_async((team_id,), retry=False), robust=True
            )
        elif scope == "stuck":
            ids = list(
                live.filter(index_state__in=[IndexState.PENDING, IndexState.FAILED])
                .order_by("updated_at")
                .values_list("id", flat=True)[:MAX_RETRY_BATCH]
            )
            for memory_id in ids:
                search_tasks.index_after_commit(team.id, memory_id)
            count = len(ids)
        else:
            raise InvalidInput("scope is 'stuck' or 'all'", field="scope")
        record_event(
            team=team, actor=actor, action=AuditEvent.Action.TEAM_REINDEX, target=f"{scope}: {count}"
        )
    return count


def shut_down_team(*, team: Team, actor: str) -> dict[str, int]:
    """teams.services.shutdown_team, with the owner's name in the audit log (the audit
    table goes with the team, so the log line is the lasting record)."""
    audit_logger.info("team %s: %s shuts the team down", team.slug, actor)
    counts = team_services.shutdown_team(team=team)
    audit_logger.info("team %s shut down by %s: %s", team.slug, actor, counts)
    return counts


# --- members -----------------------------------------------------------------


def add_member(*, team: Team, username: str, role: str, by: Membership) -> Membership:
    """Give an existing user a role in the team. Only owners grant the owner role."""
    _check_role(role)
    if role == Role.OWNER and by.role != Role.OWNER:
        raise NotAllowed("only an owner can make someone an owner", field="role")
    user = get_user_model().objects.filter(username=username.strip()).first()
    if user is None:
        raise InvalidInput(f"no user named '{username.strip()}'", field="username")
    with transaction.atomic():
        if Membership.objects.filter(team=team, user=user).exists():
            raise Conflict(f"{user.get_username()} is already a member of this team", field="username")
        membership = Membership.objects.create(team=team, user=user, role=role)
        record_event(
            team=team,
            actor=_actor(by),
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
            actor=_actor(by),
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
            actor=_actor(by),
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


def _actor(membership: Membership) -> str:
    return f"user:{membership.user.get_username()}"
