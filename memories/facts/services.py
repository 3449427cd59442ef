"""Every write of a fact. Keyword-only arguments, one transaction, the fact's lock
first (docs/facts.md, "Writes")."""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from typing import Literal

from django.db import transaction
from django.utils import timezone

from core.errors import InvalidInput
from core.locks import advisory_xact_lock
from memories.facts.exceptions import FactConflict, FactNotFound
from memories.facts.models import MAX_FACT_VALUE_CHARS, Fact, Sensitivity
from memories.personal import PersonalNames, personal_owner_name
from teams.models import AuditEvent, Team
from teams.scrubber import scrub
from teams.services import record_event
from teams.validators import is_key
from teams.vault_matcher import team_secret_matcher

logger = logging.getLogger("memories.facts")

MAX_FACT_REASON_CHARS = 2000
Outcome = Literal["created", "superseded", "unchanged"]
# The attributes a version carries beside its value, in the order a reason names them.
ATTRIBUTES = ("scope", "domains", "sensitivity", "confidence")


@dataclass
class FactSetResult:
    fact: Fact
    outcome: Outcome
    superseded: Fact | None = None
    redactions: dict[str, int] = field(default_factory=dict)


def lock_fact(team_id: int, entity: str, key: str) -> None:
    """Serialises the writers of one (team, entity, key): the partial unique index would
    otherwise turn a race into an IntegrityError."""
    advisory_xact_lock(f"fact:{team_id}:{entity}:{key}")


def _active(team: Team, entity: str, key: str) -> Fact | None:
    return (
        Fact.objects.for_team(team.id)
        .active()
        .filter(entity=entity, key=key)
        .select_for_update(no_key=True)
        .first()
    )


def check_lookup(entity: str, key: str) -> None:
    """Both are keys (letters, digits and . _ : @ -): what a read names, as the MCP
    tools' arguments are checked. A name that looks like a credential is refused where a
    fact is named to be written (check_entity_and_key); a read of one finds nothing."""
    for name, text in (("entity", entity), ("key", key)):
        if not is_key(text):
            raise InvalidInput(
                f"the {name} is 1-200 characters: letters, digits and . _ : @ -, starting with a "
                "letter, a digit or @",
                field=name,
            )


def check_entity_and_key(entity: str, key: str) -> None:
    """Both are keys, and neither may look like a credential: they are stored and shown
    as given, never scrubbed."""
    check_lookup(entity, key)
    for name, text in (("entity", entity), ("key", key)):
        if scrub(text).redactions:
            raise InvalidInput(f"the {name} looks like a credential; name what the fact is about", field=name)


def _personal_scope(entity: str, scope: str | None) -> str | None:
    """A personal entity's fact is scoped to its owner; `user:` scope is only theirs."""
    owner = personal_owner_name(entity)
    if owner is None:
        if scope is not None and scope.startswith("user:"):
            raise InvalidInput(
                f"a personal fact's entity starts with @{scope[5:]} (e.g. @{scope[5:]}:editor)", field="scope"
            )
        return scope
    if scope is not None and scope != f"user:{owner}":
        raise InvalidInput(f"a fact of @{owner} is personal: its scope is user:{owner}", field="scope")
    return f"user:{owner}"


def set_fact(
    *,
    team: Team,
    entity: str,
    key: str,
    value: str,
    actor: str,
    session: str = "",
    scope: str | None = None,
    domains: list[str] | None = None,
    sensitivity: str | None = None,
    confidence: float | None = None,
    reason: str | None = None,
    source_draft: uuid.UUID | None = None,
    imported_from: dict[str, str] | None = None,
    personal: PersonalNames | None = None,
) -> FactSetResult:
    """Set `(entity, key)` to `value`. A new fact is created; the active one is left as
    it is when it already holds exactly this (`unchanged`); a different value
    supersedes it only with a reason (FactConflict, 409, carrying the current version,
    otherwise). The same value with other attributes is a new version without a reason
    (the recorded reason names what changed). An attribute left out (None) carries
    over from the active version. The value is scrubbed of credentials and of the
    team's vault secrets before anything is compared or stored. `personal`: the check of
    personal names a caller writing many facts shares (an import); one of its own otherwise."""
    check_entity_and_key(entity, key)
    (personal or PersonalNames(team.id)).check([entity], field="entity")
    scope = _personal_scope(entity, scope)
    reason = (reason or "").strip()
    if len(reason) > MAX_FACT_REASON_CHARS:
        raise InvalidInput(f"reason is limited to {MAX_FACT_REASON_CHARS} characters", field="reason")
    if not value.strip():
        raise InvalidInput("value must not be empty", field="value")
    if len(value) > MAX_FACT_VALUE_CHARS:
        raise InvalidInput(f"value is limited to {MAX_FACT_VALUE_CHARS} characters", field="value")
    scrubbed = scrub(value, team_secret_matcher(team_id=team.id))
    with transaction.atomic():
        lock_fact(team.id, entity, key)
        current = _active(team, entity, key)
        row = Fact(
            team=team,
            entity=entity,
            key=key,
            value=scrubbed.text,
            scope=scope if scope is not None else current.scope if current else "team",
            domains=domains if domains is not None else list(current.domains) if current else [],
            sensitivity=(
                sensitivity
                if sensitivity is not None
                else current.sensitivity
                if current
                else Sensitivity.NORMAL
            ),
            confidence=confidence if confidence is not None else current.confidence if current else 1.0,
            updated_by=actor,
            session=session,
            source_draft=source_draft,
            imported_from=imported_from,
        )
        outcome: Outcome = "created"
        if current is not None:
            changed = [name for name in ATTRIBUTES if getattr(row, name) != getattr(current, name)]
            if row.value == current.value and not changed:
                return FactSetResult(fact=current, outcome="unchanged", redactions=dict(scrubbed.redactions))
            if row.value != current.value and not reason:
                raise FactConflict(
                    f"'{entity}/{key}' is already '{current.value}'; send a reason to replace it",
                    current=current,
                )
            row.supersedes = current
            row.supersede_reason = reason or f"changed: {', '.join(changed)}"
            current.is_active = False
            current.save(update_fields=["is_active"])
            outcome = "superseded"
        row.save(force_insert=True)
    if scrubbed.redactions:
        logger.warning(
            "redacted %s from fact %s/%s of team %s", dict(scrubbed.redactions), entity, key, team.slug
        )
    return FactSetResult(fact=row, outcome=outcome, superseded=current, redactions=dict(scrubbed.redactions))


def delete_fact(*, team: Team, entity: str, key: str, actor: str) -> Fact:
    """The active version is marked deleted (it stays in history); 404 if there is none."""
    check_entity_and_key(entity, key)
    with transaction.atomic():
        lock_fact(team.id, entity, key)
        current = _active(team, entity, key)
        if current is None:
            raise FactNotFound("no active fact under this entity and key")
        current.is_active = False
        current.deleted_at = timezone.now()
        current.deleted_by = actor
        current.save(update_fields=["is_active", "deleted_at", "deleted_by"])
    return current


def reveal_fact(*, team: Team, entity: str, key: str, actor: str) -> Fact:
    """The active version of a fact, for a person to read its value on the dashboard
    (the caller checked they may). A `high` fact's reveal is recorded in the team's
    audit trail before its value is returned, as a vault secret's is."""
    check_entity_and_key(entity, key)
    with transaction.atomic():
        fact = Fact.objects.for_team(team.id).active().filter(entity=entity, key=key).first()
        if fact is None:
            raise FactNotFound("no active fact under this entity and key")
        if fact.sensitivity == Sensitivity.HIGH:
            record_event(
                team=team, actor=actor, action=AuditEvent.Action.FACT_REVEAL, target=f"{entity}/{key}"
            )
        return fact


def delete_team_facts(*, team: Team) -> dict[str, int]:
    """Every fact version of a team (a receiver of teams.hooks.team_shutdown; the caller
    is inside the team's scope). supersedes is PROTECT: unlinked first."""
    rows = Fact.objects.filter(team=team)
    rows.update(supersedes=None)
    return {"facts": rows.delete()[0]}
