"""Hooks teams calls and higher apps fill in (see core.hook and docs/architecture.md)."""

from __future__ import annotations

from core.hook import Hook

team_shutdown: Hook[dict[str, int]] = Hook(
    "teams.team_shutdown",
    """Delete every row an app keeps for one team: `receiver(team=Team) -> {name: count}`.
    Called inside the team's scope, in reverse registration order (higher apps first, so
    rows that point at a lower app's rows go before them), before teams deletes its own.""",
)

agent_request: Hook[None] = Hook(
    "teams.agent_request",
    """Every API request of an agent, once its team is bound and its scope checked:
    `receiver(team=Team, request=rest_framework.request.Request)`. Runs inside the
    request's transaction (agents records session heartbeats here).""",
)
