"""Every database round trip of a read is a point where its thread waits for a core
again, which a busy neighbour's work may hold: an authenticated GET of one entry makes
three (the token's check, the team's scope, the entry), in the request's own
transaction. The token's lookup is cached per process (teams.token_cache), and a
revoked, expired or re-scoped token still stops at once."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from teams import services
from teams.models import AgentToken
from teams.scope import team_scope
from tests.conftest import Agent

# As the service runs it: the request's transaction is the outermost one.
pytestmark = pytest.mark.django_db(transaction=True)


def _save(agent: Agent, key: str, content: str, **extra: str) -> None:
    saved = agent.client.post(
        agent.url("memories/"), {"key": key, "content": content, **extra}, format="json"
    )
    assert saved.status_code == 201, saved.json()


def test_a_get_of_one_entry_makes_three_round_trips(member: Agent) -> None:
    _save(member, "deploy-day", "Deploys happen on Tuesdays.")
    noted = member.client.post(
        member.url("memories/deploy-day/annotations/"), {"note": "Not in August."}, format="json"
    )
    assert noted.status_code == 201, noted.json()
    _save(member, "deploy-day", "Deploys happen on Wednesdays.", supersede_reason="moved")
    before = member.client.get(member.url("memories/deploy-day/")).json()

    with CaptureQueriesContext(connection) as captured:
        response = member.client.get(member.url("memories/deploy-day/"))

    assert response.status_code == 200
    body = response.json()
    statements = [query["sql"].split()[0].upper() for query in captured.captured_queries]
    # The token's check (its team's row, with the version of its tokens and of its vault),
    # the team's binding, and the entry with its access count and notes in one statement;
    # BEGIN and COMMIT around them. Nothing else: no token lookup in its own scope (the
    # cache), no vault query (the version came with the team's row), no unbinding.
    assert statements == ["BEGIN", "SELECT", "SELECT", "WITH", "COMMIT"], [
        query["sql"][:80] for query in captured.captured_queries
    ]
    assert 'FROM "teams_team"' in captured.captured_queries[1]["sql"]
    # The same answer as the read through separate queries gave.
    assert body["content"] == "Deploys happen on Wednesdays."
    assert [note["note"] for note in body["annotations"]] == ["Not in August."]
    assert body["access_count"] == before["access_count"] + 1
    assert response["ETag"] == f'"{body["id"]}"'


def test_the_first_request_of_a_token_looks_it_up_and_the_next_do_not(team: object) -> None:
    from tests.conftest import make_agent

    agent = make_agent(team, "fresh-bot", ["read", "write"])  # type: ignore[arg-type]
    _save(agent, "k1", "Something worth keeping.")
    with CaptureQueriesContext(connection) as first:
        assert agent.client.get(agent.url("memories/k1/")).status_code == 200
    with CaptureQueriesContext(connection) as second:
        assert agent.client.get(agent.url("memories/k1/")).status_code == 200
    # A fresh process (the cache emptied) looks the token up in its own scope again.
    from teams import token_cache

    token_cache.forget_all()
    with CaptureQueriesContext(connection) as after_restart:
        assert agent.client.get(agent.url("memories/k1/")).status_code == 200
    assert len(second.captured_queries) == 5
    assert len(after_restart.captured_queries) > len(second.captured_queries)
    assert any('FROM "teams_agenttoken"' in q["sql"] for q in after_restart.captured_queries)
    assert not any('FROM "teams_agenttoken"' in q["sql"] for q in second.captured_queries)
    assert len(first.captured_queries) == 5  # the save before it cached the token


def test_a_revoked_token_stops_at_once_although_it_was_cached(member: Agent) -> None:
    _save(member, "k1", "Something worth keeping.")
    assert member.client.get(member.url("memories/k1/")).status_code == 200

    services.revoke_token(team=member.team, name="writer-bot", actor="test")

    refused = member.client.get(member.url("memories/k1/"))
    assert refused.status_code == 401
    assert refused.json()["detail"] == "this token has been revoked"


def test_a_token_changed_behind_the_services_back_is_looked_up_again(member: Agent) -> None:
    """The version moves by a trigger, so a change by raw SQL or the admin counts too."""
    _save(member, "k1", "Something worth keeping.")
    assert member.client.get(member.url("memories/k1/")).status_code == 200

    with team_scope(member.team.id):
        AgentToken.objects.filter(team=member.team).update(scopes=["read"])
    assert member.client.delete(member.url("memories/k1/")).status_code == 403
    assert member.client.get(member.url("memories/k1/")).status_code == 200

    with team_scope(member.team.id):
        AgentToken.objects.filter(team=member.team).update(expires_at=timezone.now() - timedelta(seconds=1))
    expired = member.client.get(member.url("memories/k1/"))
    assert expired.status_code == 401
    assert expired.json()["detail"] == "this token has expired"


def test_a_cached_token_expires_on_time_without_any_change(member: Agent) -> None:
    _save(member, "k1", "Something worth keeping.")
    soon = timezone.now() + timedelta(seconds=30)
    with team_scope(member.team.id):
        AgentToken.objects.filter(team=member.team).update(expires_at=soon)
    assert member.client.get(member.url("memories/k1/")).status_code == 200  # cached with its expiry

    from unittest import mock

    with mock.patch("django.utils.timezone.now", return_value=soon + timedelta(seconds=1)):
        expired = member.client.get(member.url("memories/k1/"))
    assert expired.status_code == 401


def test_a_revoked_token_of_another_team_does_not_open_this_one(member: Agent, outsider: Agent) -> None:
    _save(member, "k1", "Alpha's own text.")
    assert outsider.client.get(outsider.url("memories/")).status_code == 200
    services.revoke_token(team=member.team, name="writer-bot", actor="test")
    assert outsider.client.get(outsider.url("memories/")).status_code == 200
    foreign = outsider.client.get(member.url("memories/k1/"))
    assert foreign.status_code == 404
    assert "Alpha" not in foreign.content.decode()
