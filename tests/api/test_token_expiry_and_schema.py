"""Agent tokens may expire, and the schema endpoint ignores any
Authorization header instead of answering 500."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO
from unittest import mock

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone
from rest_framework.test import APIClient

from teams import services
from teams.models import AgentToken, AuditEvent, Team
from tests.conftest import Agent, make_agent, operator_view


def _expire(agent: Agent) -> None:
    with operator_view():
        AgentToken.objects.filter(team=agent.team).update(expires_at=timezone.now() - timedelta(seconds=1))


def test_an_expired_token_answers_401(member: Agent) -> None:
    assert member.client.get(member.url("memories/")).status_code == 200
    _expire(member)

    response = member.client.get(member.url("memories/"))

    assert response.status_code == 401
    assert "expired" in response.json()["detail"]


def test_a_token_before_its_expiry_works(team: Team) -> None:
    issued = services.create_token(
        team=team, name="short-lived", scopes=["read"], actor="t", expires_in=timedelta(hours=1)
    )
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.raw}")

    assert client.get(f"/api/v1/teams/{team.slug}/memories/").status_code == 200
    assert issued.token.expires_at is not None
    assert timedelta(minutes=59) < issued.token.expires_at - timezone.now() <= timedelta(hours=1)


def test_create_token_command_takes_expires_in(team: Team) -> None:
    out = StringIO()
    call_command("create_token", team.slug, "--name", "ci-bot", "--expires-in", "90d", stdout=out)

    raw = out.getvalue().strip().splitlines()[-1]
    assert "expiring" in out.getvalue()
    with operator_view():
        token = AgentToken.objects.get(team=team, name="ci-bot")
        event = AuditEvent.objects.get(
            team=team, action=AuditEvent.Action.TOKEN_CREATE, target__startswith="ci-bot"
        )
    assert token.token_hash == AgentToken.hash_token(raw)
    assert token.expires_at is not None
    assert timedelta(days=89, hours=23) < token.expires_at - timezone.now() <= timedelta(days=90)
    assert "expires" in event.target


@pytest.mark.parametrize("bad", ["90", "0d", "-1d", "90 days", "1y", "d", "999999d"])
def test_create_token_command_refuses_a_bad_expiry(team: Team, bad: str) -> None:
    with pytest.raises(CommandError, match="hours, days or weeks"):
        call_command("create_token", team.slug, "--name", "bot", f"--expires-in={bad}", stdout=StringIO())
    with operator_view():
        assert not AgentToken.objects.filter(team=team, name="bot").exists()


def test_tokens_without_expiry_never_expire(member: Agent) -> None:
    with operator_view():
        assert AgentToken.objects.get(team=member.team, name="writer-bot").expires_at is None
    assert member.client.get(member.url("memories/")).status_code == 200


@pytest.mark.parametrize(
    "header",
    ["Bearer mh_not-a-real-token", "Bearer", "Basic dXNlcjpwYXNz", "Bearer a b", "garbage"],
)
def test_schema_ignores_any_authorization_header(db: None, header: str) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)

    response = client.get("/api/schema/", HTTP_ACCEPT="application/json")

    assert response.status_code == 200
    assert b"MemoryHub API" in response.content


def test_schema_with_a_valid_token_answers_200(team: Team) -> None:
    agent = make_agent(team, "schema-reader", ["read"])

    response = agent.client.get("/api/schema/", HTTP_ACCEPT="application/json")

    assert response.status_code == 200


def test_last_use_is_recorded_once_a_minute_without_a_statement_in_between(member: Agent) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def token_updates() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert member.client.get(member.url("memories/")).status_code == 200
        return sum(1 for q in ctx.captured_queries if q["sql"].startswith('UPDATE "teams_agenttoken"'))

    assert token_updates() == 1  # first use
    assert token_updates() == 0  # recent: not even an UPDATE that matches nothing
    # Two minutes later (the process's cached copy of the token knows when it last wrote).
    later = timezone.now() + timedelta(minutes=2)
    with mock.patch("django.utils.timezone.now", return_value=later):
        assert token_updates() == 1
        assert token_updates() == 0
    with operator_view():
        used = AgentToken.objects.get(team=member.team).last_used_at
    assert used == later
