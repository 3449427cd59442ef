"""Celery tasks of agents (scheduled by beat: docs/indexing-and-workers.md, "Beat: the
schedule and job runs")."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="agents.expire_sessions", ignore_result=True)
def expire_sessions() -> dict[str, int]:
    """End every team's sessions whose heartbeat is older than the TTL, each team in its
    own scope (a session boot also sweeps its own team; this catches quiet teams)."""
    from agents import sessions
    from teams.jobs import recorded_run

    with recorded_run("agents.expire_sessions") as outcome:
        run = sessions.expire_stale_sessions_everywhere()
        outcome.update(run)
    return run
