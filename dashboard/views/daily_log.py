"""The daily log page: one day of the team's memory (agents.daily_log), with the
previous and next day a click away."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from agents.daily_log import LOG_KINDS, daily_log, parse_day
from core.errors import DomainError
from dashboard.access import TeamAccess, page_context, team_page


@team_page()
def daily_log_page(request: HttpRequest, access: TeamAccess) -> HttpResponse:
    today = datetime.now(UTC).date()
    try:
        day = parse_day(request.GET["date"]) if request.GET.get("date") else today
        log = daily_log(team=access.team, day=day)
    except DomainError as error:
        context = page_context(access, error=str(error), today=today, log=None)
        return render(request, "dashboard/daily_log.html", context, status=400)
    rows = [{"session": session, "events": log.session_events.get(session.id, 0)} for session in log.sessions]
    context = page_context(
        access,
        log=log,
        kinds=[(kind, log.counts[kind]) for kind in LOG_KINDS],
        session_rows=rows,
        previous_day=day - timedelta(days=1),
        next_day=day + timedelta(days=1) if day < today else None,
        today=today,
    )
    return render(request, "dashboard/daily_log.html", context)
