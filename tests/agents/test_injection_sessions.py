"""The injected block's "Other sessions now": the team's other live sessions (who,
which project, what task, since when), never the reader's own, never an ended or
expired one, the reader's project first; and the MCP tool that lists them on demand."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from agents.injection import build_injection
from agents.injection.sessions import OTHERS_MAX, SESSIONS_HEADING
from agents.models import AgentSession
from memories import writes
from teams.scope import team_scope
from tests.conftest import Agent, make_agent, operator_view
from tests.mcp.conftest import call_in_process

HEADER = "HTTP_X_MEMORYHUB_SESSION"


def boot(agent: Agent, **body: Any) -> dict[str, Any]:
    response = agent.client.post(agent.url("sessions/"), body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def sessions_section(text: str) -> str:
    """The block's session section, "" when it has none."""
    return text.split(SESSIONS_HEADING, 1)[1] if SESSIONS_HEADING in text else ""


def injection(agent: Agent, **headers: str) -> dict[str, Any]:
    response = agent.client.get(agent.url("injection/"), {"project": "api"}, **headers)
    assert response.status_code == 200, response.content
    return response.json()


def test_a_boot_shows_the_other_live_sessions_but_not_its_own(member: Agent) -> None:
    first = boot(member, project="api", current_task="fix the flaky login test")["session"]
    second = boot(member, project="web", current_task="move the CDN")

    section = sessions_section(second["injection"])

    assert "- writer-bot on api: fix the flaky login test (since " in section
    assert "move the CDN" not in section  # its own
    mine = injection(member, **{HEADER: second["session"]["id"]})
    assert [s["id"] for s in mine["sessions"]] == [first["id"]]


def test_ended_and_expired_sessions_are_not_shown(member: Agent) -> None:
    ended = boot(member, project="api", current_task="an ended task")["session"]
    assert member.client.delete(member.url(f"sessions/{ended['id']}/")).status_code == 204
    expired = boot(member, project="api", current_task="a silent task")["session"]
    with operator_view():
        AgentSession.objects.filter(pk=expired["id"]).update(
            last_heartbeat_at=timezone.now() - timedelta(days=1)
        )

    body = injection(member)

    assert body["sessions"] == [] and SESSIONS_HEADING not in body["text"]


def test_the_readers_project_comes_first_and_the_rest_are_counted(member: Agent) -> None:
    for n in range(OTHERS_MAX + 2):
        boot(member, project="web", current_task=f"web task {n}")
    api_session = boot(member, project="api", current_task="the api task")["session"]
    with operator_view():  # the api one is the oldest heartbeat: only its project lifts it
        AgentSession.objects.filter(pk=api_session["id"]).update(
            last_heartbeat_at=timezone.now() - timedelta(minutes=3)
        )

    body = injection(member)

    assert body["sessions"][0]["task"] == "the api task"
    assert len(body["sessions"]) == OTHERS_MAX
    assert "- and 3 more (session_list, or GET sessions/)" in sessions_section(body["text"])


def test_the_section_only_spends_what_is_left_of_the_budget(member: Agent) -> None:
    boot(member, project="api", current_task="x" * 150)
    with team_scope(member.team.id):
        text = "Run the linter before every commit, and the type checker after it. " * 4
        writes.save_memory(team=member.team, key="habits", content=text, type_name="lesson", updated_by="t")
        roomy = build_injection(team=member.team, project="api", live=True)
        tight = build_injection(team=member.team, project="api", live=True, max_tokens=roomy.tokens_used - 1)

    assert roomy.sessions and SESSIONS_HEADING in roomy.text
    assert tight.sessions == [] and SESSIONS_HEADING not in tight.text
    assert tight.tokens_used <= tight.token_budget


def test_a_block_not_read_live_has_no_sessions(member: Agent) -> None:
    boot(member, project="api", current_task="working")
    with team_scope(member.team.id):
        block = build_injection(team=member.team, project="api")

    assert block.sessions == [] and SESSIONS_HEADING not in block.text


def test_a_vault_secret_in_a_task_is_redacted(member: Agent, admin_member: Agent) -> None:
    put = admin_member.client.put(
        admin_member.url("vault/db/"), {"value": "s3cr3t-Passw0rd-9", "is_secret": True}, format="json"
    )
    assert put.status_code in (200, 201), put.content
    boot(member, project="api", current_task="rotate s3cr3t-Passw0rd-9 on staging")

    body = injection(member)

    assert "s3cr3t-Passw0rd-9" not in body["text"] and "s3cr3t-Passw0rd-9" not in str(body["sessions"])
    assert "rotate" in body["sessions"][0]["task"]


def test_another_teams_sessions_never_show(member: Agent, outsider: Agent) -> None:
    boot(outsider, project="api", current_task="bravo's secret plan")

    body = injection(member)

    assert body["sessions"] == [] and "bravo" not in body["text"]


@pytest.mark.django_db(transaction=True)
def test_memory_context_on_mcp_shows_the_others_and_not_the_caller(member: Agent) -> None:
    other = boot(member, project="api", current_task="the other window")["session"]
    mine = boot(member, project="api", current_task="this window")["session"]

    status, body = call_in_process(
        member.token, "memory_context", {"project": "api"}, path="/mcp/", **{HEADER: mine["id"]}
    )

    assert status == 200, body
    assert [s["id"] for s in body["sessions"]] == [other["id"]]
    assert "the other window" in body["text"] and "this window" not in body["text"]


@pytest.mark.django_db(transaction=True)
def test_session_list_on_mcp_lists_live_sessions_of_the_callers_team_only(
    member: Agent, outsider: Agent
) -> None:
    live = boot(member, project="api", current_task="listed")["session"]
    boot(outsider, project="api", current_task="bravo's")
    reader = make_agent(member.team, "reader", ["read"])

    status, body = call_in_process(reader.token, "session_list", {"project": "api"})

    assert status == 200, body
    assert [s["id"] for s in body["results"]] == [live["id"]] and body["next_cursor"] is None
    assert "bravo" not in str(body)
    status, refused = call_in_process(reader.token, "session_list", {"project": 5})
    assert status == 200 and refused["error"] == "invalid" and "project" in refused["fields"]
