"""Facts in a team's export and import (docs/facts.md, "Export and import").

Export: every version of every fact, by entity and key, oldest first, as `fact` records
after the memories' notes and confirmations.

Import, per `(entity, key)` of the file, the memories' rules (docs/write-path.md,
"Export and import"):
- the team has never had it: its whole history is written, with the file's times,
  states, reasons and links between its versions → "created";
- the team's active version already holds what the file's last version says (or
  neither has an active one) → "unchanged";
- otherwise, with `skip_existing`, or when the file ends without an active version →
  "skipped"; without, the file's last version is set with the reason "imported" →
  "superseded".

Every version an import writes is the importer's (`updated_by`, `deleted_by`); what the
file said (its team, the author, the time) is kept in `imported_from`, unless the
version carries one already (imported before: it names the first origin). Each
`(entity, key)` is applied in a savepoint of its own; its bad lines are reported by
number and leave it as it was. The values are checked by the PUT's own serializer and
scrubbed as a PUT scrubs them."""

from __future__ import annotations

import datetime as dt
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from django.db import DataError, IntegrityError, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from core.errors import DomainError
from memories.facts.inputs import FactSetInputSerializer
from memories.facts.models import Fact
from memories.facts.services import check_entity_and_key, lock_fact, set_fact
from memories.personal import PersonalNames
from teams.models import Team
from teams.scrubber import scrub
from teams.vault_matcher import team_secret_matcher

FACT_OUTCOMES = ("created", "superseded", "unchanged", "skipped")
FACT_STATES = ("active", "superseded", "deleted")
IMPORTED_REASON = "imported"
ROWS_PER_FETCH = 1000
MAX_NAME_CHARS = 200


def fact_state(fact: Fact) -> str:
    return "active" if fact.is_active else "deleted" if fact.deleted_at is not None else "superseded"


def _time(value: dt.datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def fact_records(*, team: Team) -> Iterator[dict[str, Any]]:
    """Every version of the team's facts as export records (inside the team's scope)."""
    rows = Fact.objects.for_team(team.id).order_by("entity", "key", "created_at", "id")
    for fact in rows.iterator(chunk_size=ROWS_PER_FETCH):
        yield {
            "record": "fact",
            "id": str(fact.id),
            "entity": fact.entity,
            "key": fact.key,
            "value": fact.value,
            "scope": fact.scope,
            "domains": list(fact.domains),
            "sensitivity": fact.sensitivity,
            "confidence": fact.confidence,
            "state": fact_state(fact),
            "supersedes": None if fact.supersedes_id is None else str(fact.supersedes_id),
            "supersede_reason": fact.supersede_reason,
            "updated_by": fact.updated_by,
            "session": fact.session,
            "source_draft": None if fact.source_draft is None else str(fact.source_draft),
            "imported_from": fact.imported_from,
            "created_at": _time(fact.created_at),
            "deleted_at": _time(fact.deleted_at),
            "deleted_by": fact.deleted_by,
        }


class BadFactLine(Exception):
    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


@dataclass
class FactLine:
    line: int
    id: str
    entity: str
    key: str
    attributes: dict[str, Any]  # value, scope, domains, sensitivity, confidence, as the PUT takes them
    state: str
    supersedes: str | None
    supersede_reason: str
    session: str
    source_draft: uuid.UUID | None
    created: dt.datetime | None
    deleted_at: dt.datetime | None
    deleted_by: str
    provenance: dict[str, str]


@dataclass
class FactImport:
    outcomes: Counter[str] = field(default_factory=Counter)
    versions_written: int = 0
    # (line, error code, detail), for the import's report
    errors: list[tuple[int, str, str]] = field(default_factory=list)

    def as_dict(self) -> dict[str, int]:
        return {
            **{name: self.outcomes[name] for name in FACT_OUTCOMES},
            "versions_written": self.versions_written,
        }


def _text(record: dict[str, Any], name: str, *, limit: int | None = None) -> str:
    value = record.get(name) or ""
    if not isinstance(value, str):
        raise BadFactLine(f"'{name}' must be a string")
    if limit is not None and len(value) > limit:
        raise BadFactLine(f"'{name}' is limited to {limit} characters")
    return value


def _when(record: dict[str, Any], name: str, now: dt.datetime) -> dt.datetime | None:
    text = _text(record, name, limit=64)
    if not text:
        return None
    try:
        parsed = parse_datetime(text)
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise BadFactLine(f"'{name}' must be an ISO 8601 time with a time zone")
    return min(parsed, now)


def _uuid(record: dict[str, Any], name: str) -> uuid.UUID | None:
    value = record.get(name)
    if value is None:
        return None
    try:
        if not isinstance(value, str):
            raise ValueError(value)
        return uuid.UUID(value)
    except ValueError:
        raise BadFactLine(f"'{name}' must be an id") from None


def parse_fact_line(number: int, record: dict[str, Any], *, source_team: str, now: dt.datetime) -> FactLine:
    entity, key = _text(record, "entity"), _text(record, "key")
    try:
        check_entity_and_key(entity, key)
    except DomainError as error:
        raise BadFactLine(error.detail) from None
    attributes = {name: record[name] for name in ("value", "scope", "domains", "sensitivity", "confidence")
                  if record.get(name) is not None}  # fmt: skip
    parsed = FactSetInputSerializer(data=attributes)
    if not parsed.is_valid():
        name, messages = next(iter(parsed.errors.items()))
        raise BadFactLine(f"'{name}': {messages[0]}")
    state = _text(record, "state") or "active"
    if state not in FACT_STATES:
        raise BadFactLine(f"'state' is one of {', '.join(FACT_STATES)}")
    supersedes = record.get("supersedes")
    if supersedes is not None and not isinstance(supersedes, str):
        raise BadFactLine("'supersedes' names a version by id, a string")
    imported_from = record.get("imported_from")
    if imported_from is not None and not (
        isinstance(imported_from, dict) and all(isinstance(v, str) for v in imported_from.values())
    ):
        raise BadFactLine("'imported_from' is an object of strings")
    said = {
        "team": source_team,
        "updated_by": _text(record, "updated_by", limit=MAX_NAME_CHARS),
        "created_at": _text(record, "created_at", limit=64),
        "deleted_by": _text(record, "deleted_by", limit=MAX_NAME_CHARS),
    }
    deleted_at = _when(record, "deleted_at", now)
    return FactLine(
        line=number,
        id=_text(record, "id", limit=64),
        entity=entity,
        key=key,
        attributes={**parsed.to_arguments(), "domains": parsed.validated_data.get("domains", [])},
        state=state,
        supersedes=supersedes,
        supersede_reason=_text(record, "supersede_reason", limit=2000),
        session=_text(record, "session", limit=64),
        source_draft=_uuid(record, "source_draft"),
        created=_when(record, "created_at", now),
        deleted_at=deleted_at if state == "deleted" else None,
        deleted_by=said["deleted_by"],
        provenance=imported_from or {name: value for name, value in said.items() if value},
    )


def import_facts(
    *,
    team: Team,
    records: list[tuple[int, dict[str, Any]]],
    source_team: str,
    actor: str,
    skip_existing: bool,
    personal: PersonalNames | None = None,
) -> FactImport:
    """Apply the file's fact records (see the module docstring), in the caller's
    transaction. `personal`: the import's check of personal names, shared with its memories."""
    report = FactImport()
    personal = personal or PersonalNames(team.id)
    now = timezone.now()
    groups: dict[tuple[str, str], list[FactLine]] = {}
    broken: set[tuple[str, str]] = set()
    for number, record in records:
        try:
            line = parse_fact_line(number, record, source_team=source_team, now=now)
        except BadFactLine as bad:
            report.errors.append((number, "invalid", bad.detail))
            pair = (record.get("entity"), record.get("key"))
            if all(isinstance(part, str) for part in pair):
                broken.add(pair)  # type: ignore[arg-type]
            continue
        groups.setdefault((line.entity, line.key), []).append(line)
    for pair, lines in groups.items():
        if pair in broken:
            continue  # a version of it is bad: the pair is left as it was
        try:
            with transaction.atomic():
                _apply(
                    team, lines, actor=actor, skip_existing=skip_existing, report=report, personal=personal
                )
        except (DomainError, IntegrityError, DataError) as error:
            detail = error.detail if isinstance(error, DomainError) else "the versions do not fit together"
            report.errors.append((lines[0].line, getattr(error, "code", "invalid"), detail))
    return report


def _apply(
    team: Team,
    lines: list[FactLine],
    *,
    actor: str,
    skip_existing: bool,
    report: FactImport,
    personal: PersonalNames,
) -> None:
    entity, key = lines[0].entity, lines[0].key
    personal.check([entity], field="entity")
    lock_fact(team.id, entity, key)
    versions = Fact.objects.for_team(team.id).filter(entity=entity, key=key)
    if not versions.exists():
        _write_history(team, lines, actor=actor)
        report.versions_written += len(lines)
        report.outcomes["created"] += 1
        return
    last = lines[-1]
    active = versions.filter(is_active=True).first()
    if last.state != "active":
        report.outcomes["unchanged" if active is None else "skipped"] += 1
        return
    if active is not None and _holds(team, active, last):
        report.outcomes["unchanged"] += 1
        return
    if skip_existing:
        report.outcomes["skipped"] += 1
        return
    set_fact(
        team=team,
        entity=entity,
        key=key,
        actor=actor,
        session=last.session,
        source_draft=last.source_draft,
        imported_from=last.provenance,
        personal=personal,
        **{**last.attributes, "reason": IMPORTED_REASON},
    )
    report.versions_written += 1
    report.outcomes["superseded"] += 1


def _holds(team: Team, active: Fact, line: FactLine) -> bool:
    wanted = _attributes(line)
    wanted["value"] = scrub(wanted["value"], team_secret_matcher(team_id=team.id)).text
    return all(getattr(active, name) == value for name, value in wanted.items())


def _attributes(line: FactLine) -> dict[str, Any]:
    """The version's value and attributes, each left out taking a new fact's default."""
    given = line.attributes
    return {
        "value": given["value"],
        "scope": given.get("scope") or "team",
        "domains": sorted(given["domains"]),
        "sensitivity": given.get("sensitivity") or "normal",
        "confidence": given["confidence"] if given.get("confidence") is not None else 1.0,
    }


def _write_history(team: Team, lines: list[FactLine], *, actor: str) -> None:
    """The pair's versions as the file gives them, new ids, links between them kept."""
    secrets = team_secret_matcher(team_id=team.id)
    new_ids = {line.id: uuid.uuid4() for line in lines if line.id}
    rows = []
    for line in lines:
        wanted = _attributes(line)
        row = Fact(
            id=new_ids.get(line.id) or uuid.uuid4(),
            team=team,
            entity=line.entity,
            key=line.key,
            value=scrub(wanted["value"], secrets).text,
            scope=wanted["scope"],
            domains=wanted["domains"],
            sensitivity=wanted["sensitivity"],
            confidence=wanted["confidence"],
            is_active=line.state == "active",
            deleted_at=line.deleted_at,
            deleted_by=actor if line.deleted_at is not None else "",
            supersedes_id=new_ids.get(line.supersedes) if line.supersedes else None,
            supersede_reason=line.supersede_reason,
            updated_by=actor,
            session=line.session,
            source_draft=line.source_draft,
            imported_from=line.provenance or None,
        )
        # None: now (CreatedAtField), for a line that gives no time.
        row.created_at = line.created  # type: ignore[assignment]
        rows.append(row)
    Fact.objects.bulk_create(rows)
