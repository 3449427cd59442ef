"""What a read still redacts: the team's vault secrets, through one compiled matcher
cached per team and rebuilt when the team's secrets change."""

from __future__ import annotations

from teams.models import Team
from teams.scope import team_scope
from teams.scrubber import SecretMatcher
from teams.vault_matcher import team_secret_matcher
from tests.conftest import Agent

OLD = "old-s3cret-value-1234"
NEW = "new-s3cret-value-5678"


def put_secret(agent: Agent, key: str, value: str) -> None:
    response = agent.client.put(
        agent.url(f"vault/{key}/"), {"value": value, "is_secret": True}, format="json"
    )
    assert response.status_code in (200, 201), response.content


def matcher_of(team: Team) -> SecretMatcher:
    with team_scope(team.id):
        return team_secret_matcher(team_id=team.id)


def test_the_matcher_is_reused_until_the_vault_changes(team: Team, admin_member: Agent) -> None:
    put_secret(admin_member, "db-password", OLD)

    first = matcher_of(team)
    assert matcher_of(team) is first
    assert first.redact(f"pw {OLD}") == ("pw [REDACTED:vault_secret]", 1)

    put_secret(admin_member, "db-password", NEW)
    replaced = matcher_of(team)
    assert replaced is not first
    assert replaced.redact(f"{OLD} {NEW}") == (f"{OLD} [REDACTED:vault_secret]", 1)

    assert admin_member.client.delete(admin_member.url("vault/db-password/")).status_code == 204
    assert matcher_of(team).is_empty


def test_a_plain_vault_value_is_not_a_secret_to_redact(team: Team, admin_member: Agent) -> None:
    admin_member.client.put(admin_member.url("vault/region/"), {"value": "eu-west-1a"}, format="json")

    assert matcher_of(team).is_empty


def test_the_matcher_knows_html_escaped_forms(team: Team, admin_member: Agent) -> None:
    put_secret(admin_member, "token", "a<b>&c'd\"e")

    assert matcher_of(team).redact("x a&lt;b&gt;&amp;c&#x27;d&quot;e y") == ("x [REDACTED:vault_secret] y", 1)


def test_responses_follow_a_changed_secret(member: Agent, admin_member: Agent) -> None:
    created = member.client.post(
        member.url("memories/"), {"key": "notes", "content": f"first {OLD} then {NEW}"}, format="json"
    )
    assert created.status_code == 201
    put_secret(admin_member, "db-password", OLD)
    assert member.client.get(member.url("memories/notes/")).json()["content"] == (
        f"first [REDACTED:vault_secret] then {NEW}"
    )

    put_secret(admin_member, "db-password", NEW)

    assert member.client.get(member.url("memories/notes/")).json()["content"] == (
        f"first {OLD} then [REDACTED:vault_secret]"
    )


def test_teams_do_not_share_a_matcher(team: Team, other_team: Team, admin_member: Agent) -> None:
    put_secret(admin_member, "db-password", OLD)

    assert matcher_of(team).redact(OLD)[1] == 1
    assert matcher_of(other_team).is_empty


def test_error_bodies_are_redacted_too(team: Team, member: Agent, admin_member: Agent) -> None:
    put_secret(admin_member, "db-password", OLD)

    # DRF's error messages are a str subclass (ErrorDetail).
    response = member.client.get(member.url("memories/"), {"type": OLD})

    assert response.status_code == 400
    assert OLD.encode() not in response.content
