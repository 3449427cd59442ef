"""The exact fact lookup reads one row through an index on (team, entity, key) whatever
the planner's statistics say of the team (docs/facts.md, "Bench"): a team whose facts
were written after the last ANALYZE is unknown to them, estimated at one row, and an
index on the team alone then looked as good as the exact one, so each lookup read and
filtered every fact of the team."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memories.facts import selectors
from teams.models import Team
from teams.roles import as_owner
from teams.scope import dangerously_bypass_team_scope, team_scope
from tests.factories import TeamFactory
from tests.search.plans import explain, scans_of

FACTS_PER_TEAM = 5_000
KEYS_PER_ENTITY = 50


def seed_facts(team: Team, count: int) -> None:
    """`count` active facts of `KEYS_PER_ENTITY` keys per entity, in one statement, as a
    bulk import writes them."""
    with dangerously_bypass_team_scope(reason="test data"), connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO memories_fact (id, team_id, entity, key, value, scope, domains, sensitivity, confidence,
                is_active, deleted_by, supersede_reason, updated_by, session, created_at)
            SELECT gen_random_uuid(), %(team)s, 'entity-' || (i / %(keys)s), 'key.' || (i %% %(keys)s),
                'value ' || i, 'team', '{}', 'normal', 1.0, true, '', '', 'seed', '', now()
            FROM generate_series(0, %(count)s - 1) AS i
            """,
            {"team": team.id, "keys": KEYS_PER_ENTITY, "count": count},
        )


def lookup_plan(team: Team, entity: str, key: str) -> list[dict[str, Any]]:
    """EXPLAIN (ANALYZE) of the statement get_fact really sends, in the team's scope."""
    with team_scope(team.id):
        with CaptureQueriesContext(connection) as captured:
            fact = selectors.get_fact(team_id=team.id, entity=entity, key=key, may_see_high=False)
        assert (fact.entity, fact.key) == (entity, key)
        (statement,) = [q["sql"] for q in captured.captured_queries if "memories_fact" in q["sql"]]
        return explain(statement, None, analyze=True)


@pytest.fixture
def known_and_new_team(transactional_db: None) -> tuple[Team, Team]:
    """A team whose facts the statistics know (ANALYZE as the owner role, as autovacuum
    does), then a team that wrote as many after it."""
    known, new = TeamFactory(), TeamFactory()
    seed_facts(known, FACTS_PER_TEAM)
    with as_owner(connection), connection.cursor() as cursor:
        cursor.execute("ANALYZE memories_fact")
        cursor.execute("SELECT reltuples FROM pg_class WHERE relname = 'memories_fact'")
        assert cursor.fetchone()[0] == FACTS_PER_TEAM  # the ANALYZE was not skipped
    seed_facts(new, FACTS_PER_TEAM)
    return known, new


@pytest.mark.parametrize("which", ["known", "new"])
def test_the_exact_lookup_reads_one_fact_even_for_a_team_the_statistics_do_not_know(
    known_and_new_team: tuple[Team, Team], which: str
) -> None:
    known, new = known_and_new_team
    team = known if which == "known" else new
    (scan,) = scans_of(lookup_plan(team, "entity-57", "key.13"), "memories_fact")
    assert scan["Node Type"] in ("Index Scan", "Index Only Scan"), scan
    # The index condition names the fact, not only its team: no row of the team is
    # read and thrown away.
    assert "entity" in scan["Index Cond"] and "key" in scan["Index Cond"], scan["Index Cond"]
    assert scan.get("Rows Removed by Filter", 0) == 0
    assert scan["Actual Rows"] == 1
