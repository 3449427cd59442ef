"""The daily log: what a team's memory went through on one day (UTC), and which
sessions did it. A read over the rows that already record it, nothing is written:

- saved: a version whose key had none before (Memory.supersedes is null);
- superseded: a version that replaced the active one (a correction, a restore);
- confirmed: someone said a version is still true (memories.Confirmation);
- captured: a draft proposed from a session for a person to review (freshness.Draft).

Each event names who did it as the row stores it (`updated_by`, `confirmed_by`,
`created_by`: the token's name, `user:<name>` from the dashboard, and the client's
`X-MemoryHub-Session` after a slash). Where that session is an agent session of the team,
the event links to it and the log lists the session. The counts are exact; the events
are the day's first MAX_EVENTS (oldest first, `truncated` says so), one kind at a time
when asked. The caller is inside the team's scope."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from heapq import merge
from typing import Any, Literal

from django.db.models import QuerySet

from agents.models import AgentSession
from core.errors import InvalidInput
from freshness.models import Draft
from memories.models import Confirmation, Memory
from teams.models import Team

LogKind = Literal["saved", "superseded", "confirmed", "captured"]
LOG_KINDS: tuple[LogKind, ...] = ("saved", "superseded", "confirmed", "captured")
MAX_EVENTS = 500
MAX_SESSIONS = 100
# How far back a day may be asked for: past it the rows may be gone, and a log of
# nothing would look like a quiet day.
MAX_DAYS_BACK = 366


@dataclass(frozen=True)
class LogEvent:
    at: datetime
    kind: LogKind
    key: str
    type: str
    by: str
    session: uuid.UUID | None
    detail: str = ""


@dataclass
class DailyLog:
    day: date
    counts: dict[LogKind, int]
    events: list[LogEvent]
    sessions: list[AgentSession]
    session_events: dict[uuid.UUID, int] = field(default_factory=dict)
    truncated: bool = False


def daily_log(*, team: Team, day: date | None = None, kind: LogKind | None = None) -> DailyLog:
    """The team's log of `day` (UTC midnight to midnight; default today), of one kind
    or all four."""
    today = datetime.now(UTC).date()
    day = day or today
    if day > today or day < today - timedelta(days=MAX_DAYS_BACK):
        raise InvalidInput(f"date must be from {MAX_DAYS_BACK} days ago to today (UTC)", field="date")
    start = datetime.combine(day, time.min, tzinfo=UTC)
    window = (start, start + timedelta(days=1))
    queries = {name: _rows(name, team, window) for name in LOG_KINDS}
    counts = {name: queries[name].count() for name in LOG_KINDS}
    kinds = [kind] if kind else LOG_KINDS
    streams = [_events(name, queries[name][: MAX_EVENTS + 1]) for name in kinds]
    events = list(merge(*streams, key=lambda event: event.at))
    truncated = len(events) > MAX_EVENTS
    events = events[:MAX_EVENTS]
    session_events: dict[uuid.UUID, int] = {}
    for event in events:
        if event.session is not None:
            session_events[event.session] = session_events.get(event.session, 0) + 1
    sessions = list(
        AgentSession.objects.filter(team=team, pk__in=list(session_events)[:MAX_SESSIONS]).order_by(
            "started_at", "id"
        )
    )
    known = {session.id for session in sessions}
    events = [
        event if event.session in known or event.session is None else _unlinked(event) for event in events
    ]
    return DailyLog(
        day=day,
        counts=counts,
        events=events,
        sessions=sessions,
        session_events={pk: n for pk, n in session_events.items() if pk in known},
        truncated=truncated,
    )


def parse_day(value: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise InvalidInput("date is a day as YYYY-MM-DD (UTC)", field="date") from None


def _rows(kind: LogKind, team: Team, window: tuple[datetime, datetime]) -> QuerySet[Any]:
    if kind in ("saved", "superseded"):
        return (
            Memory.objects.filter(team=team, created_at__gte=window[0], created_at__lt=window[1])
            .filter(supersedes__isnull=(kind == "saved"))
            .only("id", "key", "type", "updated_by", "created_at", "supersede_reason")
            .order_by("created_at", "id")
        )
    if kind == "confirmed":
        return (
            Confirmation.objects.filter(team=team, confirmed_at__gte=window[0], confirmed_at__lt=window[1])
            .select_related("memory")
            .only("id", "confirmed_by", "confirmed_at", "note", "memory__key", "memory__type")
            .order_by("confirmed_at", "id")
        )
    return (
        Draft.objects.filter(team=team, created_at__gte=window[0], created_at__lt=window[1])
        .only("id", "key", "type", "created_by", "created_at", "state", "why")
        .order_by("created_at", "id")
    )


def _events(kind: LogKind, rows: Iterable[Any]) -> list[LogEvent]:
    return [_event(kind, row) for row in rows]


def _event(kind: LogKind, row: Any) -> LogEvent:
    if isinstance(row, Memory):
        by, at, key, memory_type, detail = (
            row.updated_by,
            row.created_at,
            row.key,
            row.type,
            row.supersede_reason,
        )
    elif isinstance(row, Confirmation):
        by, at, key, memory_type, detail = (
            row.confirmed_by,
            row.confirmed_at,
            row.memory.key,
            row.memory.type,
            row.note,
        )
    else:
        by, at, key, memory_type = row.created_by, row.created_at, row.key, row.type
        detail = f"{row.state}: {row.why}" if row.why else row.state
    return LogEvent(at, kind, key, memory_type, by, _session_of(by), detail)


def _session_of(actor: str) -> uuid.UUID | None:
    """The agent session an actor string names after its last slash, if it is an id."""
    _, slash, tail = actor.rpartition("/")
    if not slash:
        return None
    try:
        return uuid.UUID(tail)
    except ValueError:
        return None


def _unlinked(event: LogEvent) -> LogEvent:
    """An event whose id names no session of this team (another team's id, or a deleted
    session): its `by` still says what the client sent."""
    return LogEvent(event.at, event.kind, event.key, event.type, event.by, None, event.detail)
