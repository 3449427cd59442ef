"""The "Other sessions now" section at the end of an injection block: who else of the
team is working at this moment (agent, project, task, since when), so an agent does not
redo or undo a teammate's work.

Only live sessions (agents.sessions.list_live_sessions: not ended, a heartbeat within
the TTL) and never the reader's own. The reader's project first, then the most recently
active. Chosen last, from what is left of the budget, so it never displaces an entry or a
review item; at most OTHERS_MAX lines and one line counting the rest. Built only where
the block is read live (a boot, the injection API, MCP): a block written to a file would
show sessions that ended long ago."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Case, IntegerField, QuerySet, Value, When
from django.utils import timezone

from agents.injection.rendering import tokens_of
from agents.models import AgentSession
from agents.sessions import list_live_sessions
from teams.models import Team
from teams.scrubber import SecretMatcher, scrub

OTHERS_MAX = 5
SESSIONS_HEADING = "### Other sessions now"
MAX_TASK_CHARS = 160


@dataclass(frozen=True)
class OtherSession:
    id: str
    agent: str
    project: str
    task: str
    started_at: datetime

    def line(self, now: datetime) -> str:
        task = " ".join(self.task.split())
        if len(task) > MAX_TASK_CHARS:
            task = task[: MAX_TASK_CHARS - 1] + "…"
        where = f"on {self.project}" if self.project else "team-wide"
        doing = f": {task}" if task else ""
        since = f"since {self.started_at:%H:%M} UTC, {_age(now - self.started_at)}"
        return f"- {self.agent} {where}{doing} ({since})"


def other_sessions(
    *,
    team: Team,
    project: str | None,
    exclude: uuid.UUID | None,
    budget_left: int,
    secrets: SecretMatcher,
    now: datetime | None = None,
) -> tuple[list[OtherSession], int, str]:
    """The live sessions that fit in `budget_left` tokens with the heading, the tokens
    they take, and the rendered section ("" and 0 when none is live or none fits)."""
    now = now or timezone.now()
    rows = list_live_sessions(team=team, now=now)
    if exclude is not None:
        rows = rows.exclude(pk=exclude)
    if project:
        elsewhere = Case(When(project=project, then=Value(0)), default=Value(1), output_field=IntegerField())
        rows = rows.annotate(elsewhere=elsewhere).order_by("elsewhere", "-last_heartbeat_at", "-id")
    else:
        rows = rows.order_by("-last_heartbeat_at", "-id")
    fetched = list(rows.only("id", "agent", "project", "current_task", "started_at")[: OTHERS_MAX + 1])
    more = _more_count(rows, fetched)
    used = tokens_of(SESSIONS_HEADING)
    chosen: list[OtherSession] = []
    lines: list[str] = []
    for row in fetched[:OTHERS_MAX]:
        session = OtherSession(
            id=str(row.id),
            agent=scrub(row.agent, secrets).text,
            project=scrub(row.project, secrets).text,
            task=scrub(row.current_task, secrets).text,
            started_at=row.started_at,
        )
        line = session.line(now)
        cost = tokens_of(line)
        if used + cost > budget_left:
            break
        chosen.append(session)
        lines.append(line)
        used += cost
    if not chosen:
        return [], 0, ""
    unlisted = more + len(fetched[:OTHERS_MAX]) - len(chosen)
    if unlisted:
        tail = f"- and {unlisted} more (session_list, or GET sessions/)"
        if used + tokens_of(tail) <= budget_left:
            lines.append(tail)
            used += tokens_of(tail)
    return chosen, used, "\n\n".join([SESSIONS_HEADING, "\n".join(lines)]) + "\n"


def _more_count(rows: QuerySet[AgentSession], fetched: list[AgentSession]) -> int:
    """Live sessions past the ones listed: counted only when there are more than fit."""
    return rows.count() - OTHERS_MAX if len(fetched) > OTHERS_MAX else 0


def _age(elapsed: timedelta) -> str:
    minutes = max(0, int(elapsed.total_seconds() // 60))
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"
