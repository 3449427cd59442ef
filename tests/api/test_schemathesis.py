"""Schemathesis against the live OpenAPI schema: whatever input an agent sends, the API
answers without a 5xx, with a documented status code, and with a body that matches the
schema (every error in the one error shape).

The schema is the one the app serves at /api/schema/, and every case goes through the
app's WSGI entry point in-process, with real transactions (transactional_db): requests
commit as they do in production, so nothing is hidden by a test-wide transaction.

Every case is sent as an agent of a real team, with the `team` path parameter set to
that team; otherwise every case would be a 404. The team starts with memories (active,
superseded, deleted) and vault entries (plain and secret), and what a case writes stays
for the cases after it, so lists, reads, history, conflicts and deletes meet real rows.
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from memories import writes
from memoryhub.wsgi import application
from teams import services as team_services
from teams.models import Team
from teams.scope import team_scope
from tests.conftest import Agent, make_agent

pytestmark = pytest.mark.slow  # fuzzing

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


def _seed(team: Team) -> None:
    with team_scope(team.id):
        save = writes.save_memory
        save(team=team, key="0", content="The staging database is db-2.", updated_by="seed")
        save(
            team=team,
            key="0",
            content="The staging database is db-3.",
            supersede_reason="minor correction",
            updated_by="seed",
        )
        save(team=team, key="A", content="Never deploy on a Friday.", type_name="context", updated_by="seed")
        save(team=team, key="a", content="Gone soon.", metadata={"tags": ["x"]}, updated_by="seed")
        writes.delete_memory(team=team, key="a", deleted_by="seed")
        team_services.set_vault_entry(team=team, key="0", value="eu-west-1", is_secret=False, actor="seed")
        team_services.set_vault_entry(
            team=team, key="A", value="s3cr3t-staging-password", is_secret=True, actor="seed"
        )


@pytest.fixture
def agent(team: Team) -> Agent:
    """An agent with every scope, so that scope checks never hide what lies behind them."""
    _seed(team)
    return make_agent(team, "schemathesis-bot", ["read", "write", "admin"])


# POST import/ takes JSON Lines: valid export files, files with bad lines, and any bytes.
_EXPORT_HEADER = b'{"record": "header", "format": "memoryhub-export", "version": 1}\n'
schemathesis.openapi.media_type(
    "application/jsonl",
    st.one_of(
        st.binary(max_size=200),
        st.lists(
            st.sampled_from(
                [
                    b'{"record": "memory", "key": "imported-1", "content": "Fuzzed fact.", "type": "lesson"}',
                    b'{"record": "memory", "key": "0", "content": "Fuzzed override.", "state": "deleted"}',
                    b'{"record": "annotation", "memory": "nowhere", "note": "x"}',
                    b'{"record": "memory", "key": "bad key", "content": 5}',
                    b"{not json",
                ]
            )
            | st.binary(max_size=80),
            max_size=5,
        ).map(lambda lines: _EXPORT_HEADER + b"\n".join(lines)),
    ),
)
schema = schemathesis.openapi.from_wsgi("/api/schema/", application)


@pytest.mark.django_db(transaction=True)
@settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    database=None,
    # The team and its rows are meant to outlive single inputs: state accumulates.
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.data_too_large,
    ],
)
@schema.parametrize()
def test_api_answers_every_input_as_its_schema_says(case: schemathesis.Case, agent: Agent) -> None:
    case.path_parameters["team"] = agent.team.slug
    case.call_and_validate(headers={"Authorization": f"Bearer {agent.token}"}, checks=CHECKS)
