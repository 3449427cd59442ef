"""One rule says whether a key's active entry already holds what a write would store
(memories.writes): the batch save answers `unchanged` by it, and so does an import.
Both compare what the version is: its text after scrubbing, type, project, metadata
(without an import's provenance), skill and anchor."""

from __future__ import annotations

import json
from typing import Any

import pytest

from memories.exporting import EXPORT_FORMAT, EXPORT_VERSION
from memories.models import Memory
from teams.models import Team
from teams.scope import team_scope
from tests.conftest import Agent
from tests.transfer.helpers import import_file

pytestmark = pytest.mark.django_db

FILE_ANCHOR = {"type": "file", "value": "docs/deploy.md"}
WIKI_ANCHOR = {"type": "url", "value": "https://wiki.example.com/deploy"}


def batch(agent: Agent, **entry: Any) -> str:
    response = agent.client.post(
        agent.url("memories/batch/"),
        {"entries": [{"key": "deploy", "content": "Deploy with make ship.", **entry}]},
        format="json",
    )
    assert response.status_code == 200, response.content
    return str(response.json()["results"][0]["status"])


def import_line(agent: Agent, **record: Any) -> str:
    header = {"record": "header", "format": EXPORT_FORMAT, "version": EXPORT_VERSION, "team": "zulu"}
    line = {
        "record": "memory",
        "key": "deploy",
        "content": "Deploy with make ship.",
        "type": "context",
        **record,
    }
    response = import_file(agent, f"{json.dumps(header)}\n{json.dumps(line)}\n".encode())
    assert response.status_code == 200, response.content
    assert response.json()["errors"] == []
    return str(response.json()["keys"]["deploy"])


def active_anchor(team: Team) -> Any:
    with team_scope(team.id):
        return Memory.objects.get(team=team, key="deploy", is_active=True).anchor


def test_an_import_whose_only_change_is_the_anchor_supersedes_the_entry_as_a_batch_does(
    team: Team, admin_member: Agent, member: Agent, save: Any
) -> None:
    save(member, "deploy", "Deploy with make ship.", anchor=FILE_ANCHOR)

    assert import_line(admin_member, anchor=FILE_ANCHOR) == "unchanged"
    assert batch(member, anchor=FILE_ANCHOR, supersede_reason="again") == "unchanged"
    assert import_line(admin_member, anchor=WIKI_ANCHOR) == "superseded"
    assert active_anchor(team) == WIKI_ANCHOR
    assert batch(member, anchor=FILE_ANCHOR, supersede_reason="back") == "superseded"
    assert active_anchor(team) == FILE_ANCHOR


def test_provenance_is_no_change_for_a_batch_either(team: Team, admin_member: Agent, member: Agent) -> None:
    """An imported entry holds metadata.imported_from; the same text and metadata sent
    again by a batch is `unchanged`, as importing it again is."""
    assert import_line(admin_member, metadata={"tags": ["ops"]}, updated_by="ann") == "created"

    assert import_line(admin_member, metadata={"tags": ["ops"]}, updated_by="bob") == "unchanged"
    assert batch(member, metadata={"tags": ["ops"]}, type="context", supersede_reason="again") == "unchanged"
