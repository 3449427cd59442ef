"""Changing a secret needs admin, weak secrets are refused, and the
audit trail (reveals, changes, deletions from every surface) is readable by admins."""

from __future__ import annotations

from typing import Any

import pytest

from teams import services
from teams.models import AuditEvent, VaultEntry
from tests.conftest import Agent, operator_view

SECRET = "s3cr3t-value-for-prod-db"


@pytest.fixture
def secret(admin_member: Agent) -> None:
    response = admin_member.client.put(
        admin_member.url("vault/db-password/"), {"value": SECRET, "is_secret": True}, format="json"
    )
    assert response.status_code == 201


def _stored(key: str) -> VaultEntry:
    with operator_view():
        return VaultEntry.objects.get(key=key)


def test_write_token_cannot_turn_a_secret_into_a_plain_value(secret: None, member: Agent) -> None:
    response = member.client.put(
        member.url("vault/db-password/"), {"value": "now-readable", "is_secret": False}, format="json"
    )

    assert response.status_code == 403
    assert response.json()["error"] == "forbidden"
    entry = _stored("db-password")
    assert entry.is_secret and entry.value == ""
    assert services.reveal_vault_value(entry) == SECRET


def test_write_token_cannot_replace_a_secret(secret: None, member: Agent) -> None:
    response = member.client.put(
        member.url("vault/db-password/"), {"value": "attacker-chosen-1", "is_secret": True}, format="json"
    )

    assert response.status_code == 403
    assert services.reveal_vault_value(_stored("db-password")) == SECRET


def test_write_token_cannot_delete_a_secret(secret: None, member: Agent) -> None:
    response = member.client.delete(member.url("vault/db-password/"))

    assert response.status_code == 403
    assert _stored("db-password").is_secret


def test_downgraded_secret_is_never_readable_by_a_read_token(
    secret: None, member: Agent, readonly_member: Agent
) -> None:
    member.client.put(
        member.url("vault/db-password/"), {"value": "x-plain-1", "is_secret": False}, format="json"
    )

    response = readonly_member.client.get(readonly_member.url("vault/db-password/"))

    assert response.status_code == 403
    assert SECRET.encode() not in response.content


def test_admin_token_may_change_downgrade_and_delete_a_secret(secret: None, admin_member: Agent) -> None:
    rotated = admin_member.client.put(
        admin_member.url("vault/db-password/"),
        {"value": "rotated-value-42", "is_secret": True},
        format="json",
    )
    downgraded = admin_member.client.put(
        admin_member.url("vault/db-password/"), {"value": "plain-now", "is_secret": False}, format="json"
    )
    assert (rotated.status_code, downgraded.status_code) == (200, 200)
    assert _stored("db-password").value == "plain-now"
    assert admin_member.client.delete(admin_member.url("vault/db-password/")).status_code == 204


def test_write_token_still_creates_secrets_and_changes_plain_values(member: Agent) -> None:
    created = member.client.put(
        member.url("vault/api-key/"), {"value": "k-8f3a9c2e71", "is_secret": True}, format="json"
    )
    plain = member.client.put(member.url("vault/region/"), {"value": "eu-west-1"}, format="json")
    changed = member.client.put(member.url("vault/region/"), {"value": "eu-west-2"}, format="json")
    deleted = member.client.delete(member.url("vault/region/"))

    assert [r.status_code for r in (created, plain, changed, deleted)] == [201, 201, 200, 204]


@pytest.mark.parametrize(
    "weak",
    [
        "short",  # under 8 characters
        "csrfmiddlewaretoken",  # would break every dashboard form
        "Password",  # a common word, any case
        '"password"',  # ...quoted
        "<input type=hidden>",  # markup
        "&nbsp;&nbsp;",  # entities
        "aaaaaaaaaaaa",  # one repeated character
    ],
)
def test_weak_secrets_are_refused_with_a_clear_400(member: Agent, weak: str) -> None:
    response = member.client.put(member.url("vault/weak/"), {"value": weak, "is_secret": True}, format="json")

    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "invalid" and "value" in body["fields"]
    with operator_view():
        assert not VaultEntry.objects.filter(key="weak").exists()


def test_a_weak_value_is_fine_as_a_plain_value(member: Agent) -> None:
    response = member.client.put(member.url("vault/mode/"), {"value": "short"}, format="json")

    assert response.status_code == 201


# --- the audit trail through the API ----------------------------------------------------------


def test_audit_lists_api_reveals_changes_and_deletions_for_admins(secret: None, admin_member: Agent) -> None:
    admin_member.client.get(admin_member.url("vault/db-password/"))
    admin_member.client.delete(admin_member.url("vault/db-password/"))

    response = admin_member.client.get(admin_member.url("audit/"))

    assert response.status_code == 200
    body = response.json()
    assert body["next"] is None
    vault_events = [
        (e["action"], e["target"], e["actor"]) for e in body["results"] if e["target"] == "db-password"
    ]
    assert vault_events == [
        ("vault.delete", "db-password", "admin-bot"),
        ("vault.reveal", "db-password", "admin-bot"),
        ("vault.set", "db-password", "admin-bot"),
    ]
    assert SECRET.encode() not in response.content


def test_audit_needs_the_admin_scope(member: Agent, readonly_member: Agent) -> None:
    for agent in (member, readonly_member):
        response = agent.client.get(agent.url("audit/"))
        assert response.status_code == 403
        assert response.json()["error"] == "forbidden"


def test_audit_pages_with_a_cursor(admin_member: Agent) -> None:
    for n in range(5):
        admin_member.client.put(admin_member.url(f"vault/k{n}/"), {"value": "v"}, format="json")

    first = admin_member.client.get(admin_member.url("audit/"), {"limit": 3}).json()
    second = admin_member.client.get(first["next"]).json()

    # 6 events: the fixture's token.create and 5 vault.set.
    assert len(first["results"]) == 3 and len(second["results"]) == 3
    ids = [e["id"] for e in first["results"] + second["results"]]
    assert len(set(ids)) == 6 and second["next"] is None


def test_audit_of_another_team_is_404_with_no_byte_of_it(
    secret: None, admin_member: Agent, outsider: Agent
) -> None:
    admin_member.client.get(admin_member.url("vault/db-password/"))

    response = outsider.client.get(outsider.url("audit/", team=admin_member.team.slug))

    assert response.status_code == 404
    for leaked in (b"db-password", b"admin-bot", b"vault.", b"alpha"):
        assert leaked not in response.content
    own = outsider.client.get(outsider.url("audit/")).json()["results"]
    assert [e["action"] for e in own] == [AuditEvent.Action.TOKEN_CREATE]


# --- the team's vault quota ------------------------------------------------------------------------


def test_a_new_key_past_the_vault_quota_is_409_and_replacing_still_works(
    member: Agent, settings: Any
) -> None:
    settings.MEMORYHUB_QUOTA_VAULT_ENTRIES = 2
    for key in ("a", "b"):
        assert (
            member.client.put(member.url(f"vault/{key}/"), {"value": "v"}, format="json").status_code == 201
        )

    refused = member.client.put(member.url("vault/c/"), {"value": "v"}, format="json")
    replaced = member.client.put(member.url("vault/a/"), {"value": "w"}, format="json")

    assert refused.status_code == 409
    assert refused.json()["error"] == "quota_exceeded" and refused.json()["limit"] == 2
    assert "quota" in refused.json()["detail"]
    assert replaced.status_code == 200
    with operator_view():
        assert sorted(VaultEntry.objects.values_list("key", flat=True)) == ["a", "b"]
