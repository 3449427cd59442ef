"""What agents registers into the hooks of lower apps (called from AgentsConfig.ready)."""

from __future__ import annotations


def register() -> None:
    from agents import sessions
    from teams import hooks as team_hooks

    team_hooks.team_shutdown.register(sessions.delete_team_sessions)
    team_hooks.agent_request.register(sessions.heartbeat_from_request)
