"""Facts in an import over a team that has them: the memories' conflict rules, bad
lines by number, the client's batches. (Every field into an empty team:
tests/transfer/test_round_trip.py.)"""

from __future__ import annotations

import json

from memories.facts.models import Fact
from memories.facts.services import set_fact
from memoryhub_client.transfer import import_batches
from teams.scope import team_scope
from tests.conftest import Agent, operator_view
from tests.transfer.helpers import export_body, import_file


def seed(agent: Agent) -> None:
    with team_scope(agent.team.id):
        set_fact(team=agent.team, entity="acme", key="provider", value="Paddle", actor="ann")
        set_fact(team=agent.team, entity="acme", key="region", value="eu-west-1", actor="ann")


def test_importing_the_same_file_again_changes_no_fact(admin_member: Agent) -> None:
    seed(admin_member)
    body = export_body(admin_member)

    report = import_file(admin_member, body).json()

    assert report["facts"]["unchanged"] == 2 and report["facts"]["versions_written"] == 0
    with operator_view():
        assert Fact.objects.count() == 2


def test_a_different_value_supersedes_with_the_reason_imported_unless_skip_existing(
    admin_member: Agent,
) -> None:
    seed(admin_member)
    body = export_body(admin_member)
    with team_scope(admin_member.team.id):
        set_fact(
            team=admin_member.team, entity="acme", key="provider", value="Stripe", actor="bob", reason="x"
        )

    skipped = import_file(admin_member, body, skip_existing="true").json()
    assert skipped["facts"]["skipped"] == 1 and skipped["facts"]["unchanged"] == 1

    report = import_file(admin_member, body).json()
    assert report["facts"]["superseded"] == 1
    with operator_view():
        active = Fact.objects.get(entity="acme", key="provider", is_active=True)
    assert (active.value, active.supersede_reason, active.updated_by) == ("Paddle", "imported", "admin-bot")
    assert active.imported_from is not None and active.imported_from["updated_by"] == "ann"


def test_a_bad_fact_line_is_reported_by_number_and_the_rest_applies(admin_member: Agent) -> None:
    header = {"record": "header", "format": "memoryhub-export", "version": 3, "team": "elsewhere"}
    lines = [
        header,
        {"record": "fact", "id": "a", "entity": "acme", "key": "provider", "value": "Paddle"},
        {"record": "fact", "id": "b", "entity": "acme", "key": "region", "value": "x", "confidence": 7},
        {"record": "fact", "id": "c", "entity": "bad entity", "key": "k", "value": "x"},
        {"record": "fact", "id": "d", "entity": "acme", "key": "plan", "value": "x", "state": "sideways"},
    ]
    body = "\n".join(json.dumps(line) for line in lines).encode()

    report = import_file(admin_member, body).json()

    assert [error["line"] for error in report["errors"]] == [3, 4, 5]
    assert report["facts"]["created"] == 1
    refused = import_file(admin_member, body, strict="true")
    assert refused.status_code == 400
    with operator_view():
        assert [f.key for f in Fact.objects.all()] == ["provider"]


def test_the_clients_batches_keep_a_facts_versions_together(admin_member: Agent) -> None:
    with team_scope(admin_member.team.id):
        for i in range(30):
            set_fact(team=admin_member.team, entity=f"service-{i}", key="owner", value="ops " * 20, actor="a")
            set_fact(team=admin_member.team, entity=f"service-{i}", key="owner", value="dev " * 20, actor="a",
                     reason="moved")  # fmt: skip
    batches = import_batches(export_body(admin_member), batch_bytes=4000)

    assert len(batches) > 2
    for batch in batches:
        facts = [json.loads(line) for line in batch.body.split(b"\n")[1:] if b'"record": "fact"' in line]
        entities = [fact["entity"] for fact in facts]
        assert all(entities.count(entity) == 2 for entity in entities)
