"""Conversations in a team's export and import (docs/conversations.md, "Export and import").

Export: every conversation, oldest first, as one `conversation` record each (its lines
inside, `[{"role", "text"}, ...]`), after the facts.

Import, per conversation of the file: one the team already has (its own id, or one an
earlier import stored from that id) → "unchanged"; otherwise it is stored as a POST
stores one (the same checks, bounds, scrubbing and quota) with the file's times
(`created_at`, from which its retention counts) → "created". What the file said of it
(its team, id and author) is kept in `imported_from`. A conversation past the team's
retention is stored and goes with the next retention run. Each is applied in a
savepoint of its own; a bad record is reported by its line number."""

from __future__ import annotations

import datetime as dt
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from django.db import DataError, IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from core.errors import DomainError
from memories.conversations.inputs import ConversationCreateInputSerializer
from memories.conversations.models import Conversation, ConversationLine
from memories.conversations.services import store_conversation
from teams.models import Team

CONVERSATION_OUTCOMES = ("created", "unchanged")
ROWS_PER_FETCH = 100


def _time(value: dt.datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def conversation_records(*, team: Team) -> Iterator[dict[str, Any]]:
    """Every conversation of the team as export records (inside the team's scope)."""
    rows = Conversation.objects.filter(team=team).order_by("created_at", "id")
    for conversation in rows.iterator(chunk_size=ROWS_PER_FETCH):
        lines = ConversationLine.objects.filter(team=team, conversation=conversation).order_by("number")
        yield {
            "record": "conversation",
            "id": str(conversation.id),
            "session": conversation.session,
            "source": conversation.source,
            "title": conversation.title,
            "started_at": _time(conversation.started_at),
            "ended_at": _time(conversation.ended_at),
            "created_by": conversation.created_by,
            "created_at": _time(conversation.created_at),
            "imported_from": conversation.imported_from,
            "lines": [{"role": role, "text": text} for role, text in lines.values_list("role", "text")],
        }


@dataclass
class ConversationImport:
    outcomes: Counter[str] = field(default_factory=Counter)
    # (line, error code, detail), for the import's report
    errors: list[tuple[int, str, str]] = field(default_factory=list)

    def as_dict(self) -> dict[str, int]:
        return {name: self.outcomes[name] for name in CONVERSATION_OUTCOMES}


class BadConversationLine(Exception):
    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def _created_at(record: dict[str, Any], now: dt.datetime) -> dt.datetime | None:
    text = record.get("created_at")
    if text is None:
        return None
    parsed = parse_datetime(text) if isinstance(text, str) and len(text) <= 64 else None
    if parsed is None or parsed.tzinfo is None:
        raise BadConversationLine("'created_at' must be an ISO 8601 time with a time zone")
    return min(parsed, now)


def _record_id(record: dict[str, Any]) -> uuid.UUID:
    try:
        return uuid.UUID(str(record.get("id"))[:64])
    except ValueError:
        raise BadConversationLine("'id' must be a conversation's id") from None


def _optional_uuid(text: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(text[:64]) if text else None
    except ValueError:
        return None


def import_conversations(
    *, team: Team, records: list[tuple[int, dict[str, Any]]], source_team: str, actor: str
) -> ConversationImport:
    """Apply the file's conversation records (the module docstring). Inside the import's
    transaction, in the team's scope."""
    report = ConversationImport()
    now = timezone.now()
    for number, record in records:
        try:
            record_id = _record_id(record)
            origin = record.get("imported_from")
            said_id = origin.get("id") if isinstance(origin, dict) else None
            origin_id = said_id if isinstance(said_id, str) else ""
            # Its own id, one stored from it before, or (a copy coming back) the one it was
            # stored from, or another copy of that.
            same = Q(id=record_id) | Q(imported_from__id=str(record_id))
            origin_uuid = _optional_uuid(origin_id)
            if origin_uuid is not None:
                same |= Q(id=origin_uuid) | Q(imported_from__id=str(origin_uuid))
            known = Conversation.objects.filter(team=team).filter(same)
            if known.exists():
                report.outcomes["unchanged"] += 1
                continue
            fields = {name: record[name] for name in ("lines", "session", "title", "source", "started_at",
                      "ended_at") if record.get(name) not in (None, "")}  # fmt: skip
            parsed = ConversationCreateInputSerializer(data=fields)
            if not parsed.is_valid():
                name, messages = next(iter(parsed.errors.items()))
                detail = messages[0] if isinstance(messages, list) else messages
                raise BadConversationLine(f"'{name}': {str(detail)[:200]}")
            said = {"team": source_team, "id": origin_id or str(record_id)}
            author = record.get("created_by")
            if isinstance(author, str) and author:
                said["created_by"] = author[:200]
            with transaction.atomic():
                store_conversation(
                    team=team,
                    actor=actor,
                    created_at=_created_at(record, now),
                    imported_from=said,
                    **parsed.to_arguments(),
                )
            report.outcomes["created"] += 1
        except BadConversationLine as bad:
            report.errors.append((number, "invalid", bad.detail))
        except DomainError as error:
            report.errors.append((number, error.code, error.detail))
        except (DataError, IntegrityError) as error:
            report.errors.append((number, "invalid", type(error).__name__))
    return report
