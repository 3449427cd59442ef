"""The fact search's statement looks each of a fact's name trigrams up in one hash of the
query's (search.unified.fact_search_sql): compared element by element, a long query
against 500 facts took 15 ms, three times the memory search's own SQL. It reads the
facts once, whatever the planner estimates: a join of the facts with their own counts,
planned generically for one row, compared every pair (500 x 482 rows, 30 ms)."""

from __future__ import annotations

import pytest

from memories.facts.models import Sensitivity
from memories.facts.services import set_fact
from search.models import SEARCH_CONFIG
from search.unified import FACT_MIN_SCORE, fact_search_sql, search_facts
from teams.models import Team
from teams.scope import team_scope
from tests.search.plans import explain_prepared, scans_of

pytestmark = pytest.mark.django_db

SERVICES = ["billing-api", "search-indexer", "report-builder", "media-transcoder", "feature-flags"]


@pytest.fixture
def facts(team: Team) -> None:
    with team_scope(team.id):
        for n in range(40):
            service = SERVICES[n % len(SERVICES)]
            set_fact(team=team, entity=f"{service}-{n}", key="owner.team", value=f"squad {n}", actor="t")


@pytest.mark.parametrize("may_see_high", [True, False])
@pytest.mark.parametrize("plan_cache_mode", ["force_custom_plan", "force_generic_plan"])
def test_name_trigrams_are_looked_up_in_a_hash_and_the_facts_read_once(
    team: Team, facts: None, may_see_high: bool, plan_cache_mode: str
) -> None:
    params = {
        "query": "who is looking into the connection pool exhaustion problem for report-builder",
        "config": SEARCH_CONFIG,
        "team": team.id,
        "high": Sensitivity.HIGH,
        "floor": FACT_MIN_SCORE,
        "limit": 10,
    }
    with team_scope(team.id):
        nodes = explain_prepared(fact_search_sql(may_see_high=may_see_high), params, plan_cache_mode)

    assert len(scans_of(nodes, "memories_fact")) == 1
    conditions = " ".join(str(node.get(field, "")) for node in nodes for field in ("Filter", "Join Filter"))
    assert "hashed SubPlan" in conditions, conditions
    assert "name_trigrams &&" not in conditions and "= ANY (qq.trigrams)" not in conditions, conditions


def test_a_name_in_another_spelling_is_still_found(team: Team, facts: None) -> None:
    with team_scope(team.id):
        hits = search_facts(team=team, query="reportbuilder 2 owner", may_see_high=True, limit=3)
        nothing = search_facts(team=team, query="the a of", may_see_high=True, limit=3)

    assert hits and hits[0].entity == "report-builder-2"
    assert nothing == []
