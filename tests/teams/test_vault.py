"""Secrets: encrypted at rest, masked in lists, shown only by the explicit GET of
their key, never in any other response or log line."""

from __future__ import annotations

import logging

import pytest
from django.db import connection

from teams.models import VaultEntry
from tests.conftest import Agent, operator_view

SECRET = "s3cr3t-value-for-prod-db"


@pytest.fixture
def secret(admin_member: Agent) -> None:
    response = admin_member.client.put(
        admin_member.url("vault/prod-db-password/"), {"value": SECRET, "is_secret": True}, format="json"
    )
    assert response.status_code == 201


def test_secret_is_encrypted_at_rest(secret: None, admin_member: Agent) -> None:
    with operator_view(), connection.cursor() as cursor:
        cursor.execute("SELECT value, ciphertext FROM teams_vaultentry WHERE key = 'prod-db-password'")
        value, ciphertext = cursor.fetchone()
    assert value == ""
    assert SECRET not in ciphertext and ciphertext.startswith("gAAAAA")


def test_put_answers_masked_and_then_200_on_replace(secret: None, admin_member: Agent) -> None:
    response = admin_member.client.put(
        admin_member.url("vault/prod-db-password/"), {"value": SECRET + "2", "is_secret": True}, format="json"
    )
    assert response.status_code == 200
    assert response.json()["value"] == "********"
    assert SECRET.encode() not in response.content


def test_list_masks_secrets_and_shows_plain_values(secret: None, admin_member: Agent) -> None:
    admin_member.client.put(admin_member.url("vault/region/"), {"value": "eu-west-1"}, format="json")

    response = admin_member.client.get(admin_member.url("vault/"))

    entries = {e["key"]: e for e in response.json()["results"]}
    assert entries["prod-db-password"]["value"] == "********" and entries["prod-db-password"]["is_secret"]
    assert entries["region"]["value"] == "eu-west-1"
    assert SECRET.encode() not in response.content


def test_explicit_get_with_admin_scope_reveals_the_secret(secret: None, admin_member: Agent) -> None:
    response = admin_member.client.get(admin_member.url("vault/prod-db-password/"))

    assert response.status_code == 200
    assert response.json()["value"] == SECRET


def test_read_write_token_cannot_reveal_a_secret(secret: None, member: Agent) -> None:
    response = member.client.get(member.url("vault/prod-db-password/"))

    assert response.status_code == 403
    assert SECRET.encode() not in response.content


def test_read_token_reads_plain_values(member: Agent, readonly_member: Agent) -> None:
    member.client.put(member.url("vault/region/"), {"value": "eu-west-1"}, format="json")

    response = readonly_member.client.get(readonly_member.url("vault/region/"))

    assert response.status_code == 200 and response.json()["value"] == "eu-west-1"


def test_delete_removes_the_entry(secret: None, admin_member: Agent) -> None:
    assert admin_member.client.delete(admin_member.url("vault/prod-db-password/")).status_code == 204
    assert admin_member.client.get(admin_member.url("vault/prod-db-password/")).status_code == 404
    assert admin_member.client.delete(admin_member.url("vault/prod-db-password/")).status_code == 404
    with operator_view():
        assert not VaultEntry.objects.exists()


def test_secret_never_appears_in_any_other_response_or_log(
    member: Agent, admin_member: Agent, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    # Saved before the value became a secret, in words no credential rule reads as one
    # (`the db password is …` is redacted when written): the stored text still holds it,
    # and only the response scrubber stands between it and the reader.
    early = member.client.post(
        member.url("memories/"), {"key": "db-notes", "content": f"the db answers to {SECRET}"}, format="json"
    )
    assert early.status_code == 201
    admin_member.client.put(
        admin_member.url("vault/prod-db-password/"), {"value": SECRET, "is_secret": True}, format="json"
    )

    responses = [
        member.client.get(member.url("memories/")),
        member.client.get(member.url("memories/db-notes/")),
        member.client.get(member.url("memories/db-notes/history/")),
        member.client.post(member.url("memories/"), {"key": "db-notes", "content": "again"}, format="json"),
        member.client.post(
            member.url("memories/"),
            {"key": "later", "content": f"password {SECRET}", "metadata": {"pw": SECRET}},
            format="json",
        ),
        member.client.get(member.url("vault/")),
        member.client.get(member.url("vault/prod-db-password/")),
        admin_member.client.put(
            admin_member.url("vault/prod-db-password/"), {"value": SECRET, "is_secret": True}, format="json"
        ),
    ]

    statuses = [r.status_code for r in responses]
    assert statuses == [200, 200, 200, 409, 201, 200, 403, 200]
    for response in responses:
        assert SECRET.encode() not in response.content, response.request["PATH_INFO"]
    assert b"[REDACTED:vault_secret]" in responses[1].content
    assert SECRET not in caplog.text
    # ...and the one place it is shown:
    assert admin_member.client.get(admin_member.url("vault/prod-db-password/")).json()["value"] == SECRET
    assert SECRET not in caplog.text


def test_log_lines_are_scrubbed_of_credential_shapes(caplog: pytest.LogCaptureFixture) -> None:
    from teams.scrubber import CredentialScrubbingFilter

    logger = logging.getLogger("memoryhub.test")
    handler_filter = CredentialScrubbingFilter()
    record = logger.makeRecord(
        "memoryhub.test", logging.INFO, __file__, 1, "calling with %s", ("Bearer abcdefghijklmnop1234",), None
    )

    handler_filter.filter(record)

    assert "abcdefghijklmnop1234" not in record.getMessage()
    assert "[REDACTED:bearer_token]" in record.getMessage()
