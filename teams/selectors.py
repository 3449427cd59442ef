"""Reads of teams, tokens and the vault. Every team-scoped read takes the team."""

from __future__ import annotations

from django.db.models import QuerySet

from core.errors import NotFound
from teams import vault_crypto
from teams.models import AgentToken, Team, VaultEntry


def get_team_by_slug(*, slug: str) -> Team:
    try:
        return Team.objects.get(slug=slug)
    except Team.DoesNotExist:
        raise NotFound(f"no team '{slug}'") from None


def list_tokens(*, team: Team) -> QuerySet[AgentToken]:
    return AgentToken.objects.filter(team=team).order_by("-created_at")


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
