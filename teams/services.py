"""Writes to teams, tokens and the vault, and the audit trail they leave (memberships
are in teams.memberships).

Each runs in one transaction. Sensitive changes (vault, tokens, members, re-index,
revealing a secret) are recorded by `record_event`, whichever surface made them (API,
dashboard, management commands); the caller passes who acted as `actor`."""

from __future__ import annotations

import logging
import re
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from core.errors import Conflict, DomainError, InvalidInput, NotFound
from core.locks import advisory_xact_lock
from teams import hooks, vault_crypto
from teams.models import AgentToken, AuditEvent, Membership, Team, VaultEntry
from teams.scope import team_scope
from teams.secret_strength import check_secret_strength
from teams.selectors import get_vault_entry, reveal_vault_value
from teams.validators import check_key, is_team_slug

logger = logging.getLogger(__name__)
audit_logger = logging.getLogger("memoryhub.audit")

Role = Membership.Role

TOKEN_PREFIX = "mh_"  # noqa: S105 (a public prefix, not a secret)


class NotAllowed(DomainError):
    """The actor's role or scope does not allow this change."""

    code = "forbidden"
    status = 403


class QuotaExceeded(DomainError):
    """The team holds as many rows of a kind as its quota allows."""

    code = "quota_exceeded"
    status = 409


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


AUDIT_TARGET_CHARS = 1000  # AuditEvent.target's max_length


def record_event(*, team: Team, actor: str, action: str, target: str = "") -> AuditEvent:
    """One line of the team's audit trail (also sent to the `memoryhub.audit` logger).
    The caller is inside the team's scope."""
    event = AuditEvent.objects.create(
        team=team, actor=actor, action=action, target=target[:AUDIT_TARGET_CHARS]
    )
    audit_logger.info("team %s: %s %s %s", team.slug, actor, action, target)
    return event


_DURATION = re.compile(r"^([1-9][0-9]{0,4})([hdw])$")
_DURATION_UNITS = {"h": timedelta(hours=1), "d": timedelta(days=1), "w": timedelta(weeks=1)}


def parse_expiry(text: str) -> timedelta:
    """`90d`, `12h` or `4w`: how long a new token lives."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise InvalidInput(
            "an expiry is a whole number of hours, days or weeks, e.g. 12h, 90d or 4w", field="expires_in"
        )
    return int(match.group(1)) * _DURATION_UNITS[match.group(2)]


# What a person's own token may do, by their role: never more than they may.
PERSONAL_TOKEN_SCOPES: dict[str, set[str]] = {
    Membership.Role.VIEWER: {AgentToken.Scope.READ},
    Membership.Role.MEMBER: {AgentToken.Scope.READ, AgentToken.Scope.WRITE},
    Membership.Role.ADMIN: set(AgentToken.Scope.values),
    Membership.Role.OWNER: set(AgentToken.Scope.values),
}


def create_token(
    *,
    team: Team,
    name: str,
    scopes: list[str],
    actor: str,
    expires_in: timedelta | None = None,
    user_id: int | None = None,
) -> IssuedToken:
    """A new token, shown once. With `expires_in`, it answers 401 after that long. With
    `user_id`, it is that member's own token: it also sees their personal entries, and
    its scopes may not exceed their role (docs/tenancy.md, "Personal entries")."""
    name = name.strip()
    if not name or len(name) > 100 or "\x00" in name:
        raise InvalidInput("a token name is 1-100 characters", field="name")
    if expires_in is not None and expires_in <= timedelta(0):
        raise InvalidInput("an expiry is in the future", field="expires_in")
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    taken = Conflict(f"team '{team.slug}' already has a live token named '{name}'", field="name")
    with team_scope(team.id):
        owner = _personal_token_owner(team, user_id, scopes)
        if AgentToken.objects.filter(team=team, name=name, revoked_at__isnull=True).exists():
            raise taken
        try:
            # The partial unique constraint decides between concurrent creates of one name.
            with transaction.atomic():
                token = AgentToken.objects.create(
                    team=team,
                    name=name,
                    token_hash=AgentToken.hash_token(raw),
                    prefix=raw[: len(TOKEN_PREFIX) + 6],
                    scopes=scopes,
                    expires_at=timezone.now() + expires_in if expires_in is not None else None,
                    user_id=user_id,
                )
        except IntegrityError:
            raise taken from None
        expiry = f", expires {token.expires_at:%Y-%m-%d %H:%M} UTC" if token.expires_at else ""
        personal = f", personal to {owner}" if owner else ""
        record_event(
            team=team,
            actor=actor,
            action=AuditEvent.Action.TOKEN_CREATE,
            target=f"{name} ({','.join(scopes)}){expiry}{personal}",
        )
    logger.info("token %s (%s) created for team %s", token.name, token.prefix, team.slug)
    return IssuedToken(token=token, raw=raw)


def _personal_token_owner(team: Team, user_id: int | None, scopes: list[str]) -> str:
    """The username a personal token is issued to ("" for a team's token), checked."""
    if user_id is None:
        return ""
    membership = Membership.objects.filter(team=team, user_id=user_id).select_related("user").first()
    if membership is None:
        raise NotFound("no such member")
    beyond = set(scopes) - PERSONAL_TOKEN_SCOPES[membership.role]
    if beyond:
        raise InvalidInput(
            f"a {membership.role}'s own token cannot have {', '.join(sorted(beyond))}", field="scopes"
        )
    return membership.user.get_username()


def revoke_personal_tokens(*, team: Team, user_id: int, actor: str, beyond_role: str | None = None) -> int:
    """Revoke a person's own tokens for the team: all of them (they left it), or with
    `beyond_role` those whose scopes that role no longer allows; returns how many."""
    with team_scope(team.id):
        live = AgentToken.objects.filter(team=team, user_id=user_id, revoked_at__isnull=True)
        allowed = PERSONAL_TOKEN_SCOPES[beyond_role] if beyond_role is not None else set()
        names = [token.name for token in live.only("name", "scopes") if not set(token.scopes) <= allowed]
        for name in names:
            revoke_token(team=team, name=name, actor=actor)
    return len(names)


def revoke_token(*, team: Team, name: str, actor: str) -> AgentToken:
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
        record_event(team=team, actor=actor, action=AuditEvent.Action.TOKEN_REVOKE, target=token.name)
    logger.info("token %s (%s) revoked for team %s", token.name, token.prefix, team.slug)
    return token


def revoke_token_by_id(*, team: Team, token_id: int, actor: str) -> AgentToken:
    """The dashboard's revoke button names the token by id; 409 if already revoked."""
    with team_scope(team.id):
        token = AgentToken.objects.filter(team=team, pk=token_id).first()
        if token is None:
            raise NotFound("no such token")
        if token.revoked_at is not None:
            raise Conflict(f"token '{token.name}' is already revoked")
        return revoke_token(team=team, name=token.name, actor=actor)


def shutdown_team(*, team: Team, actor: str) -> dict[str, int]:
    """Delete every row of one team: every app's rows through `hooks.team_shutdown`
    (higher apps first), then the team's tokens, vault and memberships; returns what was
    deleted. Runs inside that team's scope, so row-level security guarantees no other
    team's row can be touched even by a bug here. The audit trail is kept (no login of the
    service may delete it, docs/tenancy.md, "The audit trail"), the shutdown its last event."""
    audit_logger.info("team %s: %s shuts the team down", team.slug, actor)
    counts: dict[str, int] = {}
    with team_scope(team.id):
        for app_counts in hooks.team_shutdown.call(reverse=True, team=team):
            counts.update(app_counts)
        counts.update(
            {
                "vault_entries": VaultEntry.objects.filter(team=team).delete()[0],
                "tokens": AgentToken.objects.filter(team=team).delete()[0],
                "memberships": team.memberships.all().delete()[0],
            }
        )
        summary = ", ".join(f"{count} {what}" for what, count in counts.items())
        record_event(
            team=team, actor=actor, action=AuditEvent.Action.TEAM_SHUTDOWN, target=f"{team.slug}: {summary}"
        )
        Team.objects.filter(pk=team.pk).delete()
    audit_logger.info("team %s shut down by %s: %s", team.slug, actor, counts)
    return counts


def set_vault_entry(
    *,
    team: Team,
    key: str,
    value: str,
    is_secret: bool,
    actor: str,
    only_new: bool = False,
    may_change_secrets: bool = False,
) -> tuple[VaultEntry, bool]:
    """Create or replace a vault entry; returns (entry, created). With `only_new`, an
    existing key is a Conflict (the dashboard's "add" form; rotating is its own page).

    Anyone who may write may add a new key, but replacing a secret or turning it into a
    plain value needs `may_change_secrets` (an admin token, a team admin): a secret
    becomes a redaction pattern for the whole team, so changing one is a sensitive act."""
    check_key(key)
    if is_secret:
        check_secret_strength(value)
    with transaction.atomic():
        entry = _lock_vault_entry(team, key)
        created = False
        if entry is None:
            _check_vault_quota(team)
            entry = _insert_vault_entry(team, key)
            created = entry is not None
        if entry is None:  # a concurrent request created the key first: now it is a replace
            entry = _lock_vault_entry(team, key)
        if entry is None:
            raise Conflict("this key was deleted while it was being set; try again", field="key")
        if not created and only_new:
            raise Conflict("This key is already set; use Rotate on its row to change it.", field="key")
        if not created and entry.is_secret and not may_change_secrets:
            raise NotAllowed("changing a secret needs a token with the 'admin' scope or a team admin")
        entry.is_secret = is_secret
        entry.value = "" if is_secret else value
        entry.ciphertext = vault_crypto.encrypt(value) if is_secret else ""
        entry.updated_by = actor
        entry.save()
        record_event(team=team, actor=actor, action=AuditEvent.Action.VAULT_SET, target=key)
    # The value is never logged, secret or not: non-secret values may still be private.
    logger.info("vault entry %s set for team %s by %s", key, team.slug, actor)
    return entry, created


def check_quota(*, team: Team, quota: str, used: int, limit: int, what: str) -> None:
    """Refuse one more row of a kind when the team already holds `limit` of them
    (settings MEMORYHUB_QUOTA_*): 409 quota_exceeded, naming the quota."""
    if used >= limit:
        raise QuotaExceeded(
            f"team '{team.slug}' already holds {limit} {what}, its quota; delete some first "
            "or ask the operator to raise it",
            quota=quota,
            limit=limit,
        )


def _check_vault_quota(team: Team) -> None:
    """Refuse a new key past the team's quota. The advisory lock serialises the team's
    new keys, so two concurrent first writes cannot both take the last place."""
    advisory_xact_lock(f"vault-quota:{team.id}")
    check_quota(
        team=team,
        quota="vault_entries",
        used=VaultEntry.objects.filter(team=team).count(),
        limit=settings.MEMORYHUB_QUOTA_VAULT_ENTRIES,
        what="vault entries",
    )


def _lock_vault_entry(team: Team, key: str) -> VaultEntry | None:
    return VaultEntry.objects.select_for_update(no_key=True).filter(team=team, key=key).first()


def _insert_vault_entry(team: Team, key: str) -> VaultEntry | None:
    """A new, empty row for the key, or None when another transaction holds the key:
    the unique constraint decides between concurrent first writes, not a check before
    the insert (PostgreSQL makes the second insert wait for the first to commit)."""
    try:
        with transaction.atomic():  # a savepoint, so the conflict leaves the outer one usable
            return VaultEntry.objects.create(team=team, key=key)
    except IntegrityError:
        return None


def delete_vault_entry(*, team: Team, key: str, actor: str, may_change_secrets: bool = False) -> None:
    """Deleting a secret needs `may_change_secrets` (an admin token, a team admin)."""
    check_key(key)
    with transaction.atomic():
        entry = VaultEntry.objects.select_for_update().filter(team=team, key=key).first()
        if entry is None:
            raise NotFound("no vault entry under this key")
        if entry.is_secret and not may_change_secrets:
            raise NotAllowed("deleting a secret needs a token with the 'admin' scope or a team admin")
        entry.delete()
        record_event(team=team, actor=actor, action=AuditEvent.Action.VAULT_DELETE, target=key)
    logger.info("vault entry %s deleted for team %s by %s", key, team.slug, actor)


def reveal_vault_entry(
    *, team: Team, key: str, actor: str, may_reveal_secrets: bool
) -> tuple[VaultEntry, str]:
    """The plain value of one vault entry. A secret needs `may_reveal_secrets` (an admin
    token, a team admin) and its reveal is recorded in the audit trail before the value
    is returned; a plain value is returned as it is."""
    check_key(key)
    with transaction.atomic():
        entry = get_vault_entry(team=team, key=key)
        if entry.is_secret:
            if not may_reveal_secrets:
                raise NotAllowed("revealing a secret needs a token with the 'admin' scope or a team admin")
            record_event(team=team, actor=actor, action=AuditEvent.Action.VAULT_REVEAL, target=key)
        return entry, reveal_vault_value(entry)
