"""Writes to teams, tokens and the vault. Each runs in one transaction."""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from memoryhub.lib.errors import Conflict, InvalidInput, NotFound
from teams import vault_crypto
from teams.models import AgentSession, AgentToken, Team, VaultEntry
from teams.scope import team_scope
from teams.validators import is_key, is_team_slug

logger = logging.getLogger(__name__)

TOKEN_PREFIX = "mh_"  # noqa: S105 (a public prefix, not a secret)


@dataclass(frozen=True)
class IssuedToken:
    token: AgentToken
    raw: str  # shown once, never stored


def create_team(*, slug: str, name: str = "") -> Team:
    if not is_team_slug(slug):
        raise InvalidInput(f"'{slug}' is not a valid team slug", field="slug")
    with transaction.atomic():
        if Team.objects.filter(slug=slug).exists():
            raise Conflict(f"team '{slug}' already exists")
        return Team.objects.create(slug=slug, name=name or slug)


def parse_scopes(text: str) -> list[str]:
    scopes = sorted({s.strip() for s in text.split(",") if s.strip()})
    unknown = [s for s in scopes if s not in AgentToken.Scope.values]
    if not scopes or unknown:
        raise InvalidInput(
            f"scopes must be a comma-separated subset of {', '.join(AgentToken.Scope.values)}",
            field="scopes",
        )
    return scopes


def create_token(*, team: Team, name: str, scopes: list[str]) -> IssuedToken:
    name = name.strip()
    if not name or len(name) > 100 or "\x00" in name:
        raise InvalidInput("a token name is 1-100 characters", field="name")
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with team_scope(team.id):
        if AgentToken.objects.filter(team=team, name=name, revoked_at__isnull=True).exists():
            raise Conflict(f"team '{team.slug}' already has a live token named '{name}'")
        token = AgentToken.objects.create(
            team=team,
            name=name,
            token_hash=AgentToken.hash_token(raw),
            prefix=raw[: len(TOKEN_PREFIX) + 6],
            scopes=scopes,
        )
    logger.info("token %s (%s) created for team %s", token.name, token.prefix, team.slug)
    return IssuedToken(token=token, raw=raw)


def revoke_token(*, team: Team, name: str) -> AgentToken:
    with team_scope(team.id):
        token = (
            AgentToken.objects.select_for_update(no_key=True)
            .filter(team=team, name=name, revoked_at__isnull=True)
            .first()
        )
        if token is None:
            raise NotFound(f"team '{team.slug}' has no live token named '{name}'")
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
    logger.info("token %s (%s) revoked for team %s", token.name, token.prefix, team.slug)
    return token


def shutdown_team(*, team: Team) -> dict[str, int]:
    """Delete every row of one team. Runs inside that team's scope, so row-level
    security guarantees no other team's row can be touched even by a bug here."""
    from memories.models import Annotation, Memory
    from search.models import Chunk, ChunkEmbedding

    with team_scope(team.id):
        counts = {
            "chunk_embeddings": ChunkEmbedding.objects.filter(team=team).delete()[0],
            "chunks": Chunk.objects.filter(team=team).delete()[0],
            "annotations": Annotation.objects.filter(team=team).delete()[0],
            "memories": _delete_memories(Memory, team),
            "vault_entries": VaultEntry.objects.filter(team=team).delete()[0],
            "sessions": AgentSession.objects.filter(team=team).delete()[0],
            "tokens": AgentToken.objects.filter(team=team).delete()[0],
            "memberships": team.memberships.all().delete()[0],
        }
        Team.objects.filter(pk=team.pk).delete()
    logger.info("team %s shut down: %s", team.slug, counts)
    return counts


def _delete_memories(memory_model: type, team: Team) -> int:
    # supersedes is PROTECT (history must not silently lose links), so unlink the
    # chain first, then delete in one statement.
    rows = memory_model.objects.filter(team=team)
    rows.update(supersedes=None)
    return rows.delete()[0]


def set_vault_entry(
    *, team: Team, key: str, value: str, is_secret: bool, updated_by: str
) -> tuple[VaultEntry, bool]:
    """Create or replace a vault entry; returns (entry, created)."""
    if not is_key(key):
        raise InvalidInput(f"'{key}' is not a valid key", field="key")
    with transaction.atomic():
        entry = VaultEntry.objects.select_for_update(no_key=True).filter(team=team, key=key).first()
        created = entry is None
        if entry is None:
            entry = VaultEntry(team=team, key=key)
        entry.is_secret = is_secret
        entry.value = "" if is_secret else value
        entry.ciphertext = vault_crypto.encrypt(value) if is_secret else ""
        entry.updated_by = updated_by
        entry.save()
    # The value is never logged, secret or not: non-secret values may still be private.
    logger.info("vault entry %s set for team %s by %s", key, team.slug, updated_by)
    return entry, created


def delete_vault_entry(*, team: Team, key: str, deleted_by: str) -> None:
    with transaction.atomic():
        deleted, _ = VaultEntry.objects.filter(team=team, key=key).delete()
    if not deleted:
        raise NotFound("no vault entry under this key")
    logger.info("vault entry %s deleted for team %s by %s", key, team.slug, deleted_by)
