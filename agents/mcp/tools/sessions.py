"""The tools of the session registry: boot, heartbeat, end, and the live list."""

from __future__ import annotations

from typing import Any

from agents import sessions
from agents.api_sessions import (
    AgentSessionBootInputSerializer,
    AgentSessionListQuerySerializer,
    AgentSessionOutputSerializer,
    AgentSessionPagination,
    AgentSessionUpdateInputSerializer,
    boot_payload,
    session_payload,
)
from agents.mcp.tools.base import PageArguments, Tool, ToolCall, page_of
from memories.inputs import StrictUUIDField
from teams.serializers import StrictCharField, StrictInputSerializer


def session_boot(call: ToolCall, payload: AgentSessionBootInputSerializer) -> dict[str, Any]:
    return boot_payload(team=call.team, token=call.token, arguments=payload.validated_data)


BOOT = Tool(
    name="session_boot",
    title="Start a session",
    description=(
        "Register this agent session at the start of work, so other agents see who is working on "
        "what. Returns the session (keep `session.id` for session_heartbeat and session_end), the "
        "other live sessions of the same project and the memory block for the project in "
        "`injection`. Errors: invalid, quota_exceeded, forbidden."
    ),
    arguments=AgentSessionBootInputSerializer,
    scope="write",
    read_only=False,
    destructive=False,
    idempotent=False,
    handler=session_boot,
)


class SessionArgument(StrictInputSerializer):
    """The session REST names in the URL's path."""

    session_id = StrictUUIDField(help_text="The id session_boot returned.")


class HeartbeatArguments(SessionArgument, AgentSessionUpdateInputSerializer):
    pass


def session_heartbeat(call: ToolCall, payload: HeartbeatArguments) -> dict[str, Any]:
    data = dict(payload.validated_data)
    session_id = data.pop("session_id")
    session = sessions.update_session(team=call.team, session_id=session_id, **data)
    return session_payload(session)


HEARTBEAT = Tool(
    name="session_heartbeat",
    title="Keep a session live",
    description=(
        "Say this session is still working, now and then during long work (sessions without a "
        "heartbeat within the TTL stop being listed as live); optionally change its current task "
        "or project. Errors: not_found, session_ended (boot a new one), invalid, forbidden."
    ),
    arguments=HeartbeatArguments,
    scope="write",
    read_only=False,
    destructive=False,
    idempotent=True,
    handler=session_heartbeat,
)


def session_end(call: ToolCall, payload: SessionArgument) -> dict[str, Any]:
    session = sessions.end_session(team=call.team, session_id=payload.validated_data["session_id"])
    return session_payload(session)


END = Tool(
    name="session_end",
    title="End a session",
    description=(
        "End this agent session when the work is done. Ending one that already ended changes "
        "nothing. Errors: not_found, invalid, forbidden."
    ),
    arguments=SessionArgument,
    scope="write",
    read_only=False,
    destructive=False,
    idempotent=True,
    handler=session_end,
)


class ListArguments(StrictInputSerializer, AgentSessionListQuerySerializer, PageArguments):
    # JSON, not a query string: a number is a wrong type, not a project named "5".
    project = StrictCharField(
        required=False, allow_blank=True, max_length=200, help_text="Only sessions of this project."
    )


def session_list(call: ToolCall, payload: ListArguments) -> dict[str, Any]:
    rows = sessions.list_live_sessions(team=call.team, project=payload.validated_data.get("project"))
    page, next_cursor = page_of(AgentSessionPagination, rows, payload)
    return {"results": AgentSessionOutputSerializer(page, many=True).data, "next_cursor": next_cursor}


LIST = Tool(
    name="session_list",
    title="Who else is working",
    description=(
        "List the team's live agent sessions (who, which project, what task, since when), newest "
        "first, before starting work another agent may be doing. The session block of memory_context "
        "shows the first few. Errors: invalid, forbidden."
    ),
    arguments=ListArguments,
    scope="read",
    read_only=True,
    destructive=False,
    idempotent=True,
    handler=session_list,
    replica_reads=True,
)

TOOLS = (BOOT, HEARTBEAT, END, LIST)
