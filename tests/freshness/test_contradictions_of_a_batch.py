"""The contradiction pass over a batch (search.services.announce_indexed hands a whole
indexed batch to freshness.contradiction_pass.raise_contradictions): the same nudges as judging
each entry on its own, in statements that do not grow with the batch, and one entry
whose pass fails costs only its own.

The entries are embedded by the bundled local model and indexed in process, as
memories/batch saves and indexes them (the near check pending, search.tasks.index_memories)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from freshness import contradiction_pass
from freshness.models import Nudge, NudgeKind
from memories import writes
from memories.writes.batch import BatchEntry
from search import batch_indexing, services
from search import hooks as search_hooks
from search.hooks import IndexedEntry
from search.retrieval import candidates
from teams.models import Team
from teams.scope import team_scope
from tests.conftest import operator_view
from tests.factories import TeamFactory

OPENING_READ = re.compile(r'LEFT\("memories_memory"\."content", \d+\)')
SEEDED = [
    "We use Stripe for billing.",
    "The Postgres port is 5432.",
    "Deploys run on Tuesdays.",
    "The CDN in front of the docs site is Cloudflare.",
    "Runbook: step 1 drain the node, step 2 run the migration, step 3 verify row counts.",
]
BATCH = [
    "We moved billing from Stripe to Paddle.",
    "The Postgres port is 6432.",
    "Deploys run on Thursdays.",
    "Deploys run on Fridays.",  # disagrees with the seed and with the entry before it
    "Do not run the migration without a backup.",
    "The CDN in front of the docs site is Fastly.",
    "The on-call rota is kept in the wiki.",
]
UNRELATED = [
    f"Note {n}: the {subject} {action}."
    for n, (subject, action) in enumerate(
        (subject, action)
        for subject in (
            "image resizer",
            "payroll run",
            "VPN gateway",
            "audit log",
            "status page",
            "build cache",
        )
        for action in ("is owned by the platform team", "was rewritten in Go")
    )
]


@pytest.fixture
def saved_and_indexed(django_capture_on_commit_callbacks: Any) -> Callable[[Team, list[str], str], list[str]]:
    """Save `contents` as memories/batch does and index them as its message does; the
    announcement is left to the test. Returns the ids in the batch's order."""

    def saved_and_indexed(team: Team, contents: list[str], prefix: str) -> list[str]:
        entries = [BatchEntry(index=n, key=f"{prefix}-{n:02d}", content=c) for n, c in enumerate(contents)]
        with django_capture_on_commit_callbacks(execute=False), team_scope(team.id):
            outcomes = writes.save_batch(team=team, entries=entries, updated_by="test")
        ids = [str(outcome.result.memory.id) for outcome in outcomes]  # type: ignore[union-attr]
        outcome = batch_indexing.index_batch(team_id=team.id, memory_ids=ids)
        assert set(outcome.values()) == {services.IndexOutcome.INDEXED}
        return ids

    return saved_and_indexed


def contradictions(team: Team) -> set[tuple[str, str, str]]:
    """(newer key, older key, rule) of the team's contradiction nudges."""
    with operator_view():
        nudges = Nudge.objects.filter(team=team, kind=NudgeKind.CONTRADICTION).select_related(
            "memory", "other_memory"
        )
        return {(n.memory.key, n.other_memory.key, str(n.details["rule"])) for n in nudges}  # type: ignore[union-attr]


@pytest.mark.parametrize("vector_path", ["exact scan", "HNSW index"])
def test_a_batch_opens_the_nudges_its_entries_open_one_by_one(
    team: Team, other_team: Team, saved_and_indexed: Any, vector_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two teams with the same entries: one announced as a batch, one entry at a time.
    A pair inside the batch (Thursdays / Fridays) gets one nudge, not one per side. A
    team searched through the index has its batch's neighbours looked up entry by entry."""
    looked_up_alone: list[object] = []
    alone = contradiction_pass.nearest_other_active_entries

    def spied(**kwargs: Any) -> Any:
        looked_up_alone.append(kwargs["memory_id"])
        return alone(**kwargs)

    monkeypatch.setattr(contradiction_pass, "nearest_other_active_entries", spied)
    if vector_path == "HNSW index":
        monkeypatch.setattr(candidates, "EXACT_SCAN_BELOW", 1)
    for each in (team, other_team):
        services.announce_indexed(team_id=each.id, memory_ids=saved_and_indexed(each, SEEDED, "seed"))
    batch_ids = saved_and_indexed(team, BATCH, "new")
    one_by_one_ids = saved_and_indexed(other_team, BATCH, "new")

    looked_up_alone.clear()
    assert services.announce_indexed(team_id=team.id, memory_ids=batch_ids) == len(BATCH)
    assert len(looked_up_alone) == (len(BATCH) if vector_path == "HNSW index" else 0)
    for memory_id in one_by_one_ids:
        services.announce_indexed(team_id=other_team.id, memory_ids=[memory_id])

    opened = contradictions(team)
    assert opened == contradictions(other_team)
    assert {("new-00", "seed-00"), ("new-01", "seed-01"), ("new-03", "new-02")} <= {
        (newer, older) for newer, older, _ in opened
    }, opened
    assert not any("seed-04" in pair for pair in opened), "a runbook is never contradicted"
    # Announced again: every pair already had its nudge.
    services.announce_indexed(team_id=team.id, memory_ids=batch_ids)
    assert contradictions(team) == opened


def test_the_passs_statements_do_not_grow_with_the_batch(team: Team, saved_and_indexed: Any) -> None:
    """Reads and judgement take as many statements for 12 entries as for 3: neighbours,
    texts and past nudges are one read each for the whole batch."""
    saved_and_indexed(team, SEEDED, "seed")
    small = saved_and_indexed(team, UNRELATED[:3], "small")
    large = saved_and_indexed(team, UNRELATED[3:], "large")

    def statements(ids: list[str]) -> int:
        with CaptureQueriesContext(connection) as queries:
            services.announce_indexed(team_id=team.id, memory_ids=ids)
        # Only an opening of each text is read: a batch's neighbours may be 2,000 entries.
        for query in queries.captured_queries:
            assert '"memories_memory"."content"' not in OPENING_READ.sub("", query["sql"]), query["sql"]
        return len(queries)

    statements(small)  # this process reads the team's vault once
    assert statements(large) == statements(small)
    assert contradictions(team) == set()


def test_a_failure_on_the_batch_costs_only_the_failing_entrys_announcement(
    team: Team, saved_and_indexed: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = saved_and_indexed(team, UNRELATED[:4], "k")
    calls: list[list[str]] = []

    def receiver(*, entries: list[IndexedEntry]) -> None:
        calls.append([str(entry.memory_id) for entry in entries])
        if str(ids[1]) in calls[-1]:
            raise ValueError("bad data in one entry")

    monkeypatch.setattr(search_hooks.memories_indexed, "_receivers", [receiver])

    assert services.announce_indexed(team_id=team.id, memory_ids=ids) == 4
    assert calls == [ids, [ids[0]], [ids[1]], [ids[2]], [ids[3]]]


def test_another_teams_entries_are_never_neighbours(db: None, saved_and_indexed: Any) -> None:
    """The same texts in another team open nothing in this one."""
    first, second = TeamFactory(slug="gamma"), TeamFactory(slug="delta")
    services.announce_indexed(team_id=first.id, memory_ids=saved_and_indexed(first, SEEDED, "seed"))

    services.announce_indexed(team_id=second.id, memory_ids=saved_and_indexed(second, BATCH, "new"))

    assert contradictions(first) == set()
    assert ("new-03", "new-02") in {(newer, older) for newer, older, _ in contradictions(second)}
