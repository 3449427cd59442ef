"""Reads of teams, tokens and the vault. Every team-scoped read takes the team."""

from __future__ import annotations

from django.db.models import QuerySet

from core.errors import NotFound
from teams import vault_crypto
from teams.models import AgentToken, AuditEvent, Membership, Team, VaultEntry


def get_team_by_slug(*, slug: str) -> Team:
    try:
        return Team.objects.get(slug=slug)
    except Team.DoesNotExist:
        raise NotFound(f"no team '{slug}'") from None


def list_tokens(*, team: Team, user_id: int | None = None) -> QuerySet[AgentToken]:
    """The team's tokens, or with `user_id` only that person's own."""
    tokens = AgentToken.objects.filter(team=team).select_related("user").order_by("-created_at")
    return tokens if user_id is None else tokens.filter(user_id=user_id)


def get_token(*, team: Team, token_id: int) -> AgentToken:
    token = AgentToken.objects.filter(team=team, pk=token_id).first()
    if token is None:
        raise NotFound("no such token")
    return token


def list_memberships(*, team: Team) -> QuerySet[Membership]:
    return Membership.objects.filter(team=team).select_related("user").order_by("user__username")


def get_membership(*, team: Team, membership_id: int) -> Membership:
    membership = Membership.objects.filter(team=team, pk=membership_id).select_related("user").first()
    if membership is None:
        raise NotFound("no such member")
    return membership


def find_membership(*, team: Team, user_id: int) -> Membership | None:
    """A person's membership of the team, or None (not a member)."""
    return Membership.objects.select_related("user").filter(team=team, user_id=user_id).first()


def member_usernames(*, team_id: int, usernames: set[str]) -> set[str]:
    """Which of `usernames` are members of the team (exact usernames, as the database's
    personal-owner trigger compares them): one query."""
    return set(
        Membership.objects.filter(team_id=team_id, user__username__in=usernames).values_list(
            "user__username", flat=True
        )
    )


def find_team(*, slug: str) -> Team | None:
    return Team.objects.filter(slug=slug).first()


def list_vault_entries(*, team: Team) -> QuerySet[VaultEntry]:
    return VaultEntry.objects.filter(team=team).order_by("key")


def get_vault_entry(*, team: Team, key: str) -> VaultEntry:
    try:
        return VaultEntry.objects.get(team=team, key=key)
    except VaultEntry.DoesNotExist:
        raise NotFound("no vault entry under this key") from None


def reveal_vault_value(entry: VaultEntry) -> str:
    """The plain value of an entry; decrypts secrets. Only the explicit GET of one key
    and the scrubber (which needs the values to redact them) call this."""
    return vault_crypto.decrypt(entry.ciphertext) if entry.is_secret else entry.value


def team_secret_values(*, team_id: int) -> list[str]:
    """Every secret value of the team, decrypted, for the credential scrubber."""
    ciphertexts = VaultEntry.objects.filter(team_id=team_id, is_secret=True).values_list(
        "ciphertext", flat=True
    )
    return [vault_crypto.decrypt(c) for c in ciphertexts]


def list_audit_events(*, team: Team) -> QuerySet[AuditEvent]:
    """The team's audit trail, newest first."""
    return AuditEvent.objects.filter(team=team).order_by("-created_at", "-id")
