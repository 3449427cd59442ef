"""Every database round trip of a read is a point where its thread waits for a core
again, which a busy neighbour's work may hold: an authenticated GET of one entry makes
two (the token's check, which binds the transaction to the team too, and the entry), in
the request's own transaction. The token's lookup is cached per process
(teams.token_cache), and a revoked, expired or re-scoped token still stops at once."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from teams import services, token_cache
from teams.models import AgentToken
from teams.scope import set_request_team, team_scope
from tests.conftest import Agent

# As the service runs it: the request's transaction is the outermost one.
pytestmark = pytest.mark.django_db(transaction=True)


def _save(agent: Agent, key: str, content: str, **extra: str) -> None:
    saved = agent.client.post(
        agent.url("memories/"), {"key": key, "content": content, **extra}, format="json"
    )
    assert saved.status_code == 201, saved.json()


def test_a_get_of_one_entry_makes_two_round_trips(member: Agent) -> None:
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
    # The token's check (its team's row, with the version of its tokens and of its vault)
    # binding the team in the same statement, and the entry with its access count and
    # notes in one statement; BEGIN and COMMIT around them. Nothing else: no token lookup
    # in its own scope (the cache), no vault query (the version came with the team's row),
    # no binding of its own, no unbinding.
    assert statements == ["BEGIN", "SELECT", "WITH", "COMMIT"], [
        query["sql"][:80] for query in captured.captured_queries
    ]
    check = captured.captured_queries[1]["sql"]
    assert 'FROM "teams_team"' in check
    assert f"set_config('memoryhub.team_id', '{member.team.id}', true)" in check
    # The same answer as the read through separate queries gave.
    assert body["content"] == "Deploys happen on Wednesdays."
    assert [note["note"] for note in body["annotations"]] == ["Not in August."]
    assert body["access_count"] == before["access_count"] + 1
    assert response["ETag"] == f'"{body["id"]}"'


def test_the_first_request_of_a_token_looks_it_up_and_the_next_do_not(member: Agent) -> None:
    _save(member, "k1", "Something worth keeping.")  # the token's first request: cached since

    def statements_of_a_get() -> list[str]:
        with CaptureQueriesContext(connection) as captured:
            assert member.client.get(member.url("memories/k1/")).status_code == 200
        # Read now: the next request empties the connection's query log.
        return [query["sql"] for query in captured.captured_queries]

    cached = statements_of_a_get()
    token_cache.forget_all()  # as a fresh process finds it
    looked_up = statements_of_a_get()
    again = statements_of_a_get()

    assert len(cached) == 4 and len(again) == 4
    assert not any('FROM "teams_agenttoken"' in sql for sql in cached + again)
    assert any('FROM "teams_agenttoken"' in sql for sql in looked_up)
    assert len(looked_up) > len(cached)


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


def test_a_call_refused_after_the_token_check_sends_nothing_more(
    member: Agent, readonly_member: Agent, outsider: Agent
) -> None:
    """The check's statement has bound the transaction to the token's own team: a call
    refused after it (another team's address, a scope the token lacks) reads nothing in
    it, and its answer holds nothing of the team."""
    _save(member, "k1", "Alpha's own text.")
    for agent in (readonly_member, outsider):
        assert agent.client.get(agent.url("memories/")).status_code == 200  # its token cached

    for send, status in (
        (lambda: outsider.client.get(member.url("memories/k1/")), 404),
        (lambda: readonly_member.client.delete(readonly_member.url("memories/k1/")), 403),
    ):
        with CaptureQueriesContext(connection) as captured:
            refused = send()
        assert refused.status_code == status, refused.content
        assert "Alpha" not in refused.content.decode()
        statements = [query["sql"] for query in captured.captured_queries]
        assert len(statements) == 3, statements
        assert statements[0] == "BEGIN" and 'FROM "teams_team"' in statements[1]
        assert statements[2] in ("COMMIT", "ROLLBACK")
    with team_scope(member.team.id):
        from memories.models import Memory

        assert Memory.objects.filter(key="k1", is_active=True).count() == 1


def test_the_check_binds_the_viewer_the_token_is(member: Agent, django_user_model: Any) -> None:
    """A team's token sees as the team, a person's token as that person: the check binds
    the viewer that admitting the call would bind, and the person's own entry is found."""
    from rest_framework.test import APIClient

    from teams.models import Membership

    user = django_user_model.objects.create_user("mia", "mia@example.com", "pw-for-mia-1234")
    with team_scope(member.team.id):
        Membership.objects.create(team=member.team, user=user, role=Membership.Role.MEMBER)
    issued = services.create_token(
        team=member.team, name="mia-laptop", scopes=["read", "write"], actor="test", user_id=user.pk
    )
    mia = Agent(team=member.team, token=issued.raw, client=APIClient())
    mia.client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.raw}")
    _save(mia, "@mia:dotfiles", "In the quokka-hollow repository.")
    _save(member, "k1", "Something worth keeping.")

    for agent, key, viewer in ((member, "k1", "team"), (mia, "@mia:dotfiles", str(user.pk))):
        with CaptureQueriesContext(connection) as captured:
            assert agent.client.get(agent.url(f"memories/{key}/")).status_code == 200
        check = captured.captured_queries[1]["sql"]
        assert f"set_config('memoryhub.viewer', '{viewer}', true)" in check, check
    assert member.client.get(member.url("memories/@mia:dotfiles/")).status_code == 404


def test_a_revoked_token_of_another_team_does_not_open_this_one(member: Agent, outsider: Agent) -> None:
    _save(member, "k1", "Alpha's own text.")
    assert outsider.client.get(outsider.url("memories/")).status_code == 200
    services.revoke_token(team=member.team, name="writer-bot", actor="test")
    assert outsider.client.get(outsider.url("memories/")).status_code == 200
    foreign = outsider.client.get(member.url("memories/k1/"))
    assert foreign.status_code == 404
    assert "Alpha" not in foreign.content.decode()


def test_the_guard_before_a_body_asks_nothing_of_a_token_the_process_knows(member: Agent) -> None:
    from teams.authentication import is_live_token

    token_cache.forget_all()
    with CaptureQueriesContext(connection) as unknown:
        assert is_live_token(member.token)
    assert unknown.captured_queries  # read now: the next request empties the query log
    _save(member, "k1", "Something worth keeping.")  # authentication caches it
    with CaptureQueriesContext(connection) as known:
        assert is_live_token(member.token)
    assert known.captured_queries == []
    assert not is_live_token("mh_made-up")

    # Revoked: the guard may still let it through to authentication, which refuses it.
    services.revoke_token(team=member.team, name="writer-bot", actor="test")
    refused = member.client.post(member.url("search/"), {"query": "keeping"}, format="json")
    assert refused.status_code == 401


def test_a_stale_save_of_the_team_does_not_bring_a_revoked_token_back(member: Agent) -> None:
    from teams.models import Team

    _save(member, "k1", "Something worth keeping.")
    stale = Team.objects.get(id=member.team.id)  # read before the revocation, as a form would
    services.revoke_token(team=member.team, name="writer-bot", actor="test")
    stale.name = "Alpha renamed"
    stale.save()  # writes every field, the versions it read included

    assert member.client.get(member.url("memories/k1/")).status_code == 401
    assert Team.objects.get(id=member.team.id).token_version > stale.token_version


def test_a_reads_commit_does_not_wait_for_the_disk_and_a_writes_does(member: Agent) -> None:
    """A read writes only counters (its access count): losing a database crash's last
    fraction of a second of them is cheaper than a disk flush on every read."""

    def binding_of(send: Any) -> str:
        with CaptureQueriesContext(connection) as captured:
            response = send()
        assert response.status_code in (200, 201), response.content
        bindings = [
            q["sql"] for q in captured.captured_queries if "set_config('memoryhub.team_id'" in q["sql"]
        ]
        assert bindings
        return "\n".join(bindings)

    saved = binding_of(
        lambda: member.client.post(member.url("memories/"), {"key": "k1", "content": "Kept."}, format="json")
    )
    read = binding_of(lambda: member.client.get(member.url("memories/k1/")))
    searched = binding_of(lambda: member.client.post(member.url("search/"), {"query": "kept"}, format="json"))

    assert "synchronous_commit" not in saved
    assert "'synchronous_commit', 'off'" in read and "'synchronous_commit', 'off'" in searched
    with transaction.atomic():
        set_request_team(member.team.id, viewer="team", durable=False)
        with connection.cursor() as cursor:
            cursor.execute("SHOW synchronous_commit")
            assert cursor.fetchone() == ("off",)
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")  # transaction-local: gone with it
        assert cursor.fetchone() == ("on",)
