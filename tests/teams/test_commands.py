from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from memories.models import Memory
from teams.models import AgentToken, Membership, Team, VaultEntry
from tests.conftest import Agent, operator_view


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_create_team_then_token_whose_last_line_is_the_token(db: None) -> None:
    assert "created team acme" in run("create_team", "acme", "--name", "Acme Inc")

    output = run("create_token", "acme", "--name", "deploy-bot", "--scopes", "read,write")

    token = output.strip().splitlines()[-1]
    assert token.startswith("mh_") and " " not in token
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert client.get("/api/v1/teams/acme/memories/").status_code == 200
    with operator_view():
        stored = AgentToken.objects.get(name="deploy-bot")
    assert stored.token_hash == AgentToken.hash_token(token)
    assert token not in str(stored.__dict__)
    assert Team.objects.get(slug="acme").name == "Acme Inc"


@pytest.mark.parametrize("slug", ["Acme", "-acme", "ac me", "a" * 64])
def test_create_team_rejects_bad_slugs(db: None, slug: str) -> None:
    with pytest.raises(CommandError):
        run("create_team", slug)
    assert not Team.objects.exists()


def test_create_team_twice_fails(db: None) -> None:
    run("create_team", "acme")
    with pytest.raises(CommandError, match="already exists"):
        run("create_team", "acme")


@pytest.mark.parametrize("scopes", ["", "read,delete", "root"])
def test_create_token_rejects_unknown_scopes(team: Team, scopes: str) -> None:
    with pytest.raises(CommandError):
        run("create_token", team.slug, "--name", "bot", "--scopes", scopes)


def test_create_token_for_unknown_team_fails(db: None) -> None:
    with pytest.raises(CommandError):
        run("create_token", "ghost", "--name", "bot")


def test_revoke_token_makes_requests_401(member: Agent) -> None:
    assert "revoked" in run("revoke_token", member.team.slug, "--name", "writer-bot")

    assert member.client.get(member.url("memories/")).status_code == 401
    with pytest.raises(CommandError):
        run("revoke_token", member.team.slug, "--name", "writer-bot")


def test_token_name_can_be_reused_after_revocation(member: Agent) -> None:
    run("revoke_token", member.team.slug, "--name", "writer-bot")
    output = run("create_token", member.team.slug, "--name", "writer-bot")
    assert output.strip().splitlines()[-1].startswith("mh_")


def test_shutdown_team_needs_yes(member: Agent) -> None:
    with pytest.raises(CommandError, match="--yes"):
        run("shutdown_team", member.team.slug)
    assert Team.objects.filter(pk=member.team.pk).exists()


def test_shutdown_team_deletes_every_row_of_that_team_and_nothing_else(
    member: Agent, outsider: Agent, django_user_model
) -> None:  # type: ignore[no-untyped-def]
    for agent in (member, outsider):
        agent.client.post(agent.url("memories/"), {"key": "k", "content": "one"}, format="json")
        agent.client.post(
            agent.url("memories/"), {"key": "k", "content": "two", "supersede_reason": "r"}, format="json"
        )
        agent.client.post(agent.url("memories/"), {"key": "gone", "content": "x"}, format="json")
        agent.client.delete(agent.url("memories/gone/"))
        agent.client.put(agent.url("vault/v/"), {"value": "x-secret-4711", "is_secret": True}, format="json")
        user = django_user_model.objects.create_user(username=f"user-{agent.team.slug}")
        with operator_view():
            Membership.objects.create(team=agent.team, user=user, role="member")

    output = run("shutdown_team", member.team.slug, "--yes")

    assert "shut down" in output
    with operator_view():
        for model in (Memory, VaultEntry, AgentToken, Membership):
            assert not model.objects.filter(team_id=member.team.id).exists(), model
        assert Memory.objects.filter(team=outsider.team).count() == 3
        assert VaultEntry.objects.filter(team=outsider.team).count() == 1
        assert AgentToken.objects.filter(team=outsider.team).count() == 1
        assert Membership.objects.filter(team=outsider.team).count() == 1
    assert not Team.objects.filter(slug=member.team.slug).exists()
    assert outsider.client.get(outsider.url("memories/k/")).json()["content"] == "two"
