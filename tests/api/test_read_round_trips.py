"""Every database round trip of a read is a point where its thread waits for a core
again, which a busy neighbour's work may hold: a GET of
one entry makes exactly the round trips it needs, in the request's own transaction."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.conftest import Agent

# As the service runs it: the request's transaction is the outermost one.
pytestmark = pytest.mark.django_db(transaction=True)


def test_a_get_of_one_entry_makes_only_the_round_trips_it_needs(member: Agent) -> None:
    saved = member.client.post(
        member.url("memories/"),
        {"key": "deploy-day", "content": "Deploys happen on Tuesdays."},
        format="json",
    )
    assert saved.status_code == 201

    with CaptureQueriesContext(connection) as captured:
        response = member.client.get(member.url("memories/deploy-day/"))

    assert response.status_code == 200
    assert response.json()["freshness"] is not None
    statements = [query["sql"].split()[0].upper() for query in captured.captured_queries]
    # BEGIN; the token's lookup in its own scope (3); the team's binding; the entry; its
    # access count; its notes; the vault's stamp for read-time redaction; COMMIT. Neither
    # the team's row (the view holds it) nor unbinding the team before COMMIT (COMMIT
    # clears it) costs one.
    assert statements[0] == "BEGIN" and statements[-1] == "COMMIT"
    assert len(statements) == 10, [query["sql"][:80] for query in captured.captured_queries]
    assert not any('FROM "teams_team"' in query["sql"] for query in captured.captured_queries)
