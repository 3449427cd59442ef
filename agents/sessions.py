"""The agent session registry: boot, heartbeat, update, end (writes) and the live
list (reads). Every function takes the team explicitly and runs inside its scope.

A session is live while `ended_at` is null and its last heartbeat is younger than
the TTL. Nothing runs on a timer: a boot first ends the team's sessions that missed
the TTL (end_reason "expired"), and reads filter on the TTL, so a list is right even
when no boot has swept for a while.

Locking rule: a heartbeat never waits. It updates the session row only if no other
in-flight request of the same session holds it (SKIP LOCKED): that request is
refreshing the same heartbeat, so skipping loses nothing and an agent's parallel
requests do not queue behind each other's transactions.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from agents.models import AgentSession
from core.errors import Conflict, InvalidInput, NotFound
from teams.models import AgentToken, Team
from teams.scope import dangerously_bypass_team_scope, team_scope
from teams.services import check_quota

logger = logging.getLogger(__name__)

SESSION_HEADER = "X-MemoryHub-Session"
# Heartbeats closer together than this are not written: liveness is measured in
# minutes, and an agent firing many requests should not rewrite its row each time.
HEARTBEAT_RESOLUTION = timedelta(seconds=5)
# "Who else is here" at boot: the most recently active sessions of the project.
MAX_OTHER_SESSIONS = 50


class SessionNotFound(NotFound):
    pass


class SessionEnded(Conflict):
    code = "session_ended"


@dataclass(frozen=True)
class BootedSession:
    session: AgentSession
    others: list[AgentSession]
    expired: int


def session_ttl() -> timedelta:
    return timedelta(seconds=settings.MEMORYHUB_SESSION_TTL_SECONDS)


def parse_session_id(value: str) -> uuid.UUID:
    """A session id from a URL: malformed → 400, like a malformed key."""
    try:
        return uuid.UUID(value)
    except (ValueError, AttributeError, TypeError):
        raise InvalidInput("malformed session id", field="id") from None


# --- writes ---------------------------------------------------------------


def expire_stale_sessions(*, team: Team, now: datetime | None = None) -> int:
    """End every session of the team whose last heartbeat is older than the TTL.
    Rows locked by a request in flight are skipped: that request is their heartbeat."""
    now = now or timezone.now()
    stale = (
        AgentSession.objects.filter(
            team=team, ended_at__isnull=True, last_heartbeat_at__lt=now - session_ttl()
        )
        .select_for_update(no_key=True, skip_locked=True)
        .values("pk")
    )
    return AgentSession.objects.filter(team=team, pk__in=stale).update(
        ended_at=now, end_reason=AgentSession.EndReason.EXPIRED
    )


def expire_stale_sessions_everywhere(*, now: datetime | None = None) -> dict[str, int]:
    """expire_stale_sessions for every team with a session still open, each in its own
    scope and transaction: a team that fails is counted and the others go on. The teams
    come from one query over open sessions' team ids (the operator view: the job spans
    teams and reads ids only)."""
    now = now or timezone.now()
    with dangerously_bypass_team_scope(reason="which teams have open sessions", actor="celery-beat"):
        team_ids = list(
            AgentSession.objects.filter(ended_at__isnull=True)
            .order_by("team_id")
            .values_list("team_id", flat=True)
            .distinct()
        )
    run = {"teams": 0, "expired": 0, "errors": 0}
    for team in Team.objects.filter(id__in=team_ids).order_by("id"):
        run["teams"] += 1
        try:
            with team_scope(team.id):
                run["expired"] += expire_stale_sessions(team=team, now=now)
        except Exception:
            logger.exception("session sweep: team %s failed", team.id)
            run["errors"] += 1
    return run


def boot_session(
    *,
    team: Team,
    token: AgentToken | None,
    agent: str,
    source: str = "",
    project: str = "",
    cwd: str = "",
    pid: int | None = None,
    host: str = "",
    current_task: str = "",
) -> BootedSession:
    """Sweep the team's stale sessions, register a new one and return it with the
    other live sessions of the same project (most recently active first)."""
    with transaction.atomic():
        now = timezone.now()
        expired = expire_stale_sessions(team=team, now=now)
        check_quota(
            team=team,
            quota="sessions",
            used=list_live_sessions(team=team, now=now).count(),
            limit=settings.MEMORYHUB_QUOTA_SESSIONS,
            what="live agent sessions",
        )
        session = AgentSession.objects.create(
            team=team,
            token=token,
            agent=agent,
            source=source,
            project=project,
            cwd=cwd,
            pid=pid,
            host=host,
            current_task=current_task,
            started_at=now,
            last_heartbeat_at=now,
        )
        others = list(
            list_live_sessions(team=team, project=project, now=now)
            .exclude(pk=session.pk)
            .order_by("-last_heartbeat_at", "-id")[:MAX_OTHER_SESSIONS]
        )
    if expired:
        logger.info("team %s: %d stale session(s) expired at boot", team.slug, expired)
    return BootedSession(session=session, others=others, expired=expired)


def update_session(
    *,
    team: Team,
    session_id: uuid.UUID,
    current_task: str | None = None,
    project: str | None = None,
) -> AgentSession:
    """Change what a live session works on; also a heartbeat. An ended session
    cannot be revived (409): the client boots a new one."""
    with transaction.atomic():
        session = _lock_session(team=team, session_id=session_id)
        if session.ended_at is not None:
            raise SessionEnded("this session has ended; boot a new one")
        fields = ["last_heartbeat_at"]
        if current_task is not None:
            session.current_task = current_task
            fields.append("current_task")
        if project is not None:
            session.project = project
            fields.append("project")
        session.last_heartbeat_at = timezone.now()
        session.save(update_fields=fields)
    return session


def end_session(*, team: Team, session_id: uuid.UUID) -> AgentSession:
    """End a session. Ending one that already ended (or expired) changes nothing."""
    with transaction.atomic():
        session = _lock_session(team=team, session_id=session_id)
        if session.ended_at is None:
            session.ended_at = timezone.now()
            session.end_reason = AgentSession.EndReason.ENDED
            session.save(update_fields=["ended_at", "end_reason"])
    return session


def session_in_header(header_value: str) -> uuid.UUID | None:
    """The session an `X-MemoryHub-Session` value names, if it is a session id (the
    header may also be a free label for `updated_by`)."""
    try:
        return uuid.UUID(header_value.strip())
    except ValueError:
        return None


def touch_session(*, team: Team, header_value: str) -> bool:
    """The heartbeat of `X-MemoryHub-Session`: one UPDATE of that session, if it is a
    session of this team that has not ended. Anything else (no UUID, an unknown id,
    another team's id, an ended session) is ignored: the header also names sessions
    for `updated_by`, and a heartbeat must never fail a request. Returns whether a
    row was refreshed. The caller's transaction is bound to the team."""
    session_id = session_in_header(header_value)
    if session_id is None:
        return False
    now = timezone.now()
    row = (
        AgentSession.objects.filter(
            team=team,
            pk=session_id,
            ended_at__isnull=True,
            last_heartbeat_at__lt=now - HEARTBEAT_RESOLUTION,
        )
        .select_for_update(no_key=True, skip_locked=True)
        .values("pk")
    )
    return bool(AgentSession.objects.filter(team=team, pk__in=row).update(last_heartbeat_at=now))


def _lock_session(*, team: Team, session_id: uuid.UUID) -> AgentSession:
    session = AgentSession.objects.select_for_update(no_key=True).filter(team=team, pk=session_id).first()
    if session is None:
        raise SessionNotFound("no such session")
    return session


# --- reads ----------------------------------------------------------------


def list_live_sessions(
    *, team: Team, project: str | None = None, now: datetime | None = None
) -> QuerySet[AgentSession]:
    """Live sessions (not ended, heartbeat within the TTL), newest first."""
    now = now or timezone.now()
    rows = AgentSession.objects.filter(
        team=team, ended_at__isnull=True, last_heartbeat_at__gte=now - session_ttl()
    )
    if project is not None:
        rows = rows.filter(project=project)
    return rows.order_by("-started_at", "-id")


def get_session(*, team: Team, session_id: uuid.UUID) -> AgentSession:
    """One session of the team, live or not."""
    session = AgentSession.objects.filter(team=team, pk=session_id).first()
    if session is None:
        raise SessionNotFound("no such session")
    return session


def session_status(session: AgentSession, now: datetime | None = None) -> str:
    """live, stale (no heartbeat within the TTL, not swept yet) or ended."""
    if session.ended_at is not None:
        return "ended"
    now = now or timezone.now()
    return "live" if session.last_heartbeat_at >= now - session_ttl() else "stale"


def delete_team_sessions(*, team: Team) -> dict[str, int]:
    """Every session of a team (the receiver of teams.hooks.team_shutdown)."""
    return {"sessions": AgentSession.objects.filter(team=team).delete()[0]}


def heartbeat_from_request(*, team: Team, request: Any) -> None:
    """The receiver of teams.hooks.agent_request: any request of a live session that
    names itself in X-MemoryHub-Session is that session's heartbeat. The team scope is
    bound by then, so the UPDATE can only ever reach a session of the token's team."""
    header_value = request.headers.get(SESSION_HEADER, "")
    if header_value:
        touch_session(team=team, header_value=header_value)
