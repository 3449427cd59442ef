"""An export with the vault (`with_vault`, sealed under a passphrase), its import, and
the audit trail of exports and imports."""

from __future__ import annotations

import json
from typing import Any

import pytest

from memories.models import Memory
from teams.models import AuditEvent, Team, VaultEntry
from teams.scope import team_scope
from teams.selectors import reveal_vault_value
from teams.services import set_vault_entry
from tests.conftest import Agent, make_agent, operator_view
from tests.factories import TeamFactory
from tests.transfer.helpers import import_file, seed_rich_team

pytestmark = pytest.mark.django_db

PASSPHRASE = "correct horse battery staple"
SECRET = "sk-live-9f8e7d6c5b4a39281706"
PLAIN_VALUE = "https://ci.example.org/alpha"
PASSPHRASE_HEADER = "HTTP_X_MEMORYHUB_VAULT_PASSPHRASE"


@pytest.fixture
def new_team_admin(db: None) -> Agent:
    return make_agent(TeamFactory(slug="charlie", name="Charlie"), "charlie-admin", ["admin"])


@pytest.fixture
def vaulted_team(team: Team) -> Team:
    seed_rich_team(team)
    with team_scope(team.id):
        set_vault_entry(team=team, key="stripe-key", value=SECRET, is_secret=True, actor="ann")
        set_vault_entry(team=team, key="ci-url", value=PLAIN_VALUE, is_secret=False, actor="ann")
    return team


def export_with_vault(agent: Agent, passphrase: str | None = PASSPHRASE) -> Any:
    headers = {PASSPHRASE_HEADER: passphrase} if passphrase is not None else {}
    return agent.client.get(agent.url("export/") + "?with_vault=true", **headers)


def body_of(response: Any) -> bytes:
    assert response.status_code == 200, response.content
    return b"".join(response.streaming_content)


def import_with(agent: Agent, body: bytes, passphrase: str | None, **params: str) -> Any:
    headers = {PASSPHRASE_HEADER: passphrase} if passphrase is not None else {}
    query = "&".join(f"{name}={value}" for name, value in params.items())
    return agent.client.post(
        agent.url("import/") + (f"?{query}" if query else ""),
        data=body,
        content_type="application/jsonl",
        **headers,
    )


def vault_of(team: Team) -> dict[str, tuple[bool, str]]:
    with operator_view():
        return {
            entry.key: (entry.is_secret, reveal_vault_value(entry))
            for entry in VaultEntry.objects.filter(team=team)
        }


def audit_actions(team: Team) -> list[tuple[str, str]]:
    with operator_view():
        return list(
            AuditEvent.objects.filter(team=team).order_by("created_at", "id").values_list("action", "target")
        )


def test_a_plain_export_leaves_the_vault_out(vaulted_team: Team, admin_member: Agent) -> None:
    body = body_of(admin_member.client.get(admin_member.url("export/")))

    records = [json.loads(line) for line in body.splitlines()]
    assert "vault" not in records[0]
    assert not [r for r in records if r["record"] == "vault"]
    assert SECRET.encode() not in body and PLAIN_VALUE.encode() not in body


def test_the_vault_is_exported_sealed_and_never_in_clear(vaulted_team: Team, admin_member: Agent) -> None:
    body = body_of(export_with_vault(admin_member))

    records = [json.loads(line) for line in body.splitlines()]
    vault = [r for r in records if r["record"] == "vault"]
    assert [(r["key"], r["is_secret"]) for r in vault] == [("ci-url", False), ("stripe-key", True)]
    assert records[0]["vault"]["kdf"] == "scrypt"
    assert records[-1] == {**records[-1], "record": "end", "vault": 2}
    # Neither the secret nor the plain value, nor the passphrase, is anywhere in the file.
    assert SECRET.encode() not in body
    assert PLAIN_VALUE.encode() not in body
    assert PASSPHRASE.encode() not in body


@pytest.mark.parametrize("passphrase", [None, "too short"])
def test_with_vault_needs_a_passphrase_of_twelve_characters(
    vaulted_team: Team, admin_member: Agent, passphrase: str | None
) -> None:
    response = export_with_vault(admin_member, passphrase)

    assert response.status_code == 400
    assert response.json()["error"] == "invalid"
    assert SECRET not in response.content.decode()


def test_the_vault_comes_back_with_the_passphrase_and_a_second_import_changes_nothing(
    vaulted_team: Team, admin_member: Agent, new_team_admin: Agent
) -> None:
    body = body_of(export_with_vault(admin_member))

    first = import_with(new_team_admin, body, PASSPHRASE)

    assert first.status_code == 200, first.content
    assert first.json()["vault"] == {"created": 2, "replaced": 0, "unchanged": 0, "skipped": 0}
    assert vault_of(new_team_admin.team) == {"stripe-key": (True, SECRET), "ci-url": (False, PLAIN_VALUE)}
    second = import_with(new_team_admin, body, PASSPHRASE)
    assert second.json()["vault"] == {"created": 0, "replaced": 0, "unchanged": 2, "skipped": 0}


def test_a_changed_vault_value_is_replaced_or_with_skip_existing_left_alone(
    vaulted_team: Team, admin_member: Agent, new_team_admin: Agent
) -> None:
    body = body_of(export_with_vault(admin_member))
    charlie = new_team_admin.team
    with team_scope(charlie.id):
        set_vault_entry(
            team=charlie, key="ci-url", value="https://elsewhere.example", is_secret=False, actor="x"
        )

    skipped = import_with(new_team_admin, body, PASSPHRASE, skip_existing="true")
    assert skipped.json()["vault"] == {"created": 1, "replaced": 0, "unchanged": 0, "skipped": 1}
    assert vault_of(charlie)["ci-url"] == (False, "https://elsewhere.example")

    replaced = import_with(new_team_admin, body, PASSPHRASE)
    assert replaced.json()["vault"] == {"created": 0, "replaced": 1, "unchanged": 1, "skipped": 0}
    assert vault_of(charlie)["ci-url"] == (False, PLAIN_VALUE)


def test_without_the_passphrase_the_vault_is_skipped_and_the_memories_imported(
    vaulted_team: Team, admin_member: Agent, new_team_admin: Agent
) -> None:
    body = body_of(export_with_vault(admin_member))

    response = import_with(new_team_admin, body, None)

    assert response.status_code == 200
    assert response.json()["vault"]["skipped"] == 2
    assert response.json()["created"] > 0
    assert vault_of(new_team_admin.team) == {}


def test_a_wrong_passphrase_refuses_the_file_before_anything_is_applied(
    vaulted_team: Team, admin_member: Agent, new_team_admin: Agent
) -> None:
    body = body_of(export_with_vault(admin_member))

    response = import_with(new_team_admin, body, "not the passphrase at all")

    assert response.status_code == 400
    assert response.json()["error"] == "invalid"
    assert "passphrase" in response.json()["detail"]
    assert vault_of(new_team_admin.team) == {}
    with operator_view():
        assert not Memory.objects.filter(team=new_team_admin.team).exists()


def test_a_file_asking_for_other_scrypt_costs_is_refused(
    vaulted_team: Team, admin_member: Agent, new_team_admin: Agent
) -> None:
    lines = body_of(export_with_vault(admin_member)).splitlines()
    header = json.loads(lines[0])
    header["vault"]["n"] = 2**24  # gigabytes of memory for whoever opens it
    tampered = b"\n".join([json.dumps(header).encode(), *lines[1:]])

    response = import_with(new_team_admin, tampered, PASSPHRASE)

    assert response.status_code == 400
    assert response.json()["error"] == "invalid"


def test_a_tampered_sealed_value_is_a_bad_line_and_the_rest_is_applied(
    vaulted_team: Team, admin_member: Agent, new_team_admin: Agent
) -> None:
    lines = body_of(export_with_vault(admin_member)).splitlines()
    number = next(i for i, line in enumerate(lines) if b'"stripe-key"' in line and b'"vault"' in line)
    record = json.loads(lines[number])
    record["sealed"] = record["sealed"][:-8] + "AAAAAAAA"
    lines[number] = json.dumps(record).encode()

    response = import_with(new_team_admin, b"\n".join(lines), PASSPHRASE)

    assert response.status_code == 200
    assert [e["line"] for e in response.json()["errors"]] == [number + 1]
    assert vault_of(new_team_admin.team) == {"ci-url": (False, PLAIN_VALUE)}


def test_exports_and_imports_are_in_the_audit_trail_and_a_dry_run_is_not(
    vaulted_team: Team, admin_member: Agent, new_team_admin: Agent
) -> None:
    plain = body_of(admin_member.client.get(admin_member.url("export/")))
    body_of(export_with_vault(admin_member))
    assert import_file(new_team_admin, plain, dry_run="true").status_code == 200
    assert import_file(new_team_admin, plain).status_code == 200

    exports = [event for event in audit_actions(vaulted_team) if event[0] == "team.export"]
    assert exports == [("team.export", ""), ("team.export", "with the vault, sealed")]
    imports = [event for event in audit_actions(new_team_admin.team) if event[0] == "team.import"]
    assert len(imports) == 1
    assert imports[0][1].startswith("keys: ") and "0 superseded" in imports[0][1]
