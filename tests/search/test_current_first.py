"""A key shows up in search as its current entry, once, ranked by the best match of any
of its versions; a replaced version only when asked, marked, and never above the
current entry of its key (search.retrieval.versions). Through the REST API with the
embedded local model, in each mode; the steps on their own below."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from memories.models import Memory
from search.retrieval.candidates import Candidate
from search.retrieval.scoring import Scored
from search.retrieval.versions import attach_versions, collapse_versions, heads_first
from tests.conftest import Agent, search

OLD = "Never deploy on Fridays."
NEW = "Never deploy on Fridays or before holidays."
QUESTION = "deploy on a Friday?"
MODES = ("keyword", "vector", "hybrid")


@pytest.fixture
def friday(member: Agent, save) -> tuple[dict[str, Any], dict[str, Any]]:  # type: ignore[no-untyped-def]
    """The key saved, then superseded; and an unrelated entry, so that ranks mean something."""
    old = save(member, "deploy-friday", OLD, type="lesson")
    new = save(member, "deploy-friday", NEW, type="lesson", supersede_reason="holiday freeze")
    save(member, "lunch", "The team orders pizza on Wednesdays from the place on Elm Street.")
    return old, new


@pytest.mark.parametrize("mode", MODES)
def test_the_current_version_comes_first_and_the_old_one_is_absent(
    friday: tuple[dict[str, Any], dict[str, Any]], member: Agent, mode: str
) -> None:
    old, new = friday

    results = search(member, QUESTION, mode=mode, max_results=5)["results"]

    assert results[0]["id"] == new["id"]
    assert results[0]["is_active"] is True and results[0]["superseded"] is False
    assert [r["key"] for r in results].count("deploy-friday") == 1
    assert old["id"] not in {r["id"] for r in results}


@pytest.mark.parametrize("mode", MODES)
def test_asked_for_the_old_version_is_present_marked_and_below_its_successor(
    friday: tuple[dict[str, Any], dict[str, Any]], member: Agent, mode: str
) -> None:
    old, new = friday

    results = search(member, QUESTION, mode=mode, max_results=5, include_superseded=True)["results"]

    ids = [r["id"] for r in results]
    assert ids[0] == new["id"]
    assert ids.index(old["id"]) == ids.index(new["id"]) + 1
    replaced = results[ids.index(old["id"])]
    assert replaced["superseded"] is True and replaced["is_active"] is False
    assert replaced["superseded_by"]["id"] == new["id"]
    assert replaced["superseded_by"]["reason"] == "holiday freeze"
    assert replaced["score"] <= results[0]["score"]


@pytest.mark.parametrize("mode", MODES)
def test_the_current_entry_takes_the_score_of_an_old_wording_that_matches_better(
    member: Agent,
    save,
    mode: str,  # type: ignore[no-untyped-def]
) -> None:
    old = save(member, "vpn", "The VPN gateway is vpn-old.example.org.")
    new = save(
        member,
        "vpn",
        "Remote access now goes through Tailscale; ask IT for an invite.",
        supersede_reason="moved",
    )
    save(member, "lunch", "The team orders pizza on Wednesdays from the place on Elm Street.")

    asked = search(member, "VPN gateway", mode=mode, max_results=5, include_superseded=True)["results"]
    by_id = {r["id"]: r for r in asked}
    results = search(member, "VPN gateway", mode=mode, max_results=5)["results"]

    # The new wording has neither word: the key is found through its old version, and
    # it is the current entry that is shown, with the old version's score.
    assert results[0]["id"] == new["id"]
    assert results[0]["snippet"].startswith("Remote access")
    # Its score is the old version's, but for decay: it is a few milliseconds younger.
    assert results[0]["score"] == pytest.approx(by_id[old["id"]]["score"], abs=1e-4)
    assert results[0]["score"] >= by_id[old["id"]]["score"]
    assert [r["id"] for r in asked][:2] == [new["id"], old["id"]]


def test_a_filter_that_leaves_the_current_entry_out_leaves_the_key_out(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    old = save(member, "runbook", "Restart the ingest workers with the restart-ingest script.", type="lesson")
    save(
        member, "runbook", "The ingest workers restart themselves now.", type="context", supersede_reason="x"
    )

    assert search(member, "restart ingest workers", types=["lesson"])["results"] == []
    asked = search(member, "restart ingest workers", types=["lesson"], include_superseded=True)["results"]
    # Its successor does not pass the filter, so the old version stands alone, marked.
    assert [(r["id"], r["superseded"]) for r in asked] == [(old["id"], True)]


def test_a_chain_of_versions_collapses_to_the_active_one(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    first = save(member, "db-host", "The primary database is db-1.internal.")
    second = save(member, "db-host", "The primary database is db-2.internal.", supersede_reason="failover")
    third = save(member, "db-host", "The primary database is db-3.internal.", supersede_reason="failover")

    assert [r["id"] for r in search(member, "primary database")["results"]] == [third["id"]]
    asked = search(member, "primary database", include_superseded=True)["results"]
    assert asked[0]["id"] == third["id"]
    assert {r["id"] for r in asked[1:]} == {first["id"], second["id"]}
    successors = {r["id"]: r["superseded_by"]["id"] for r in asked[1:]}
    assert successors == {first["id"]: second["id"], second["id"]: third["id"]}


# --- the steps on their own -----------------------------------------------------------


def _memory(key: str, *, active: bool, days_old: float = 0.0) -> Memory:
    return Memory(
        id=uuid.uuid4(),
        key=key,
        content=key,
        is_active=active,
        created_at=timezone.now() - timedelta(days=days_old),
    )


def test_collapse_gives_the_head_the_best_match_of_each_path_and_drops_versions() -> None:
    head, old, other = _memory("k", active=True), _memory("k", active=False), _memory("o", active=True)
    found = {
        old.id: Candidate(old.id, keyword_rank=4.0, keyword_chunk=7, similarity=0.2, found_by={"keyword"}),
        head.id: Candidate(head.id, keyword_rank=1.0, keyword_chunk=9, similarity=0.6, found_by={"vector"}),
        other.id: Candidate(other.id, keyword_rank=2.0, found_by={"keyword"}),
    }
    memories = {m.id: m for m in (head, old, other)}

    head_of = collapse_versions(found, memories, {"k": head}, include_superseded=False)

    assert head_of == {}
    assert set(found) == {head.id, other.id}
    assert (found[head.id].keyword_rank, found[head.id].similarity) == (4.0, 0.6)
    assert found[head.id].keyword_chunk == 9  # its own text, not the old version's
    assert found[head.id].found_by == {"keyword", "vector"}


def test_collapse_brings_in_a_head_only_its_old_version_found_and_keeps_versions_when_asked() -> None:
    head, old = _memory("k", active=True), _memory("k", active=False)
    found = {old.id: Candidate(old.id, keyword_rank=3.0, found_by={"keyword"})}

    head_of = collapse_versions(found, {head.id: head, old.id: old}, {"k": head}, include_superseded=True)

    assert head_of == {old.id: head.id}
    assert found[head.id].keyword_rank == 3.0 and found[head.id].similarity is None
    assert old.id in found


def test_collapse_leaves_a_fired_skill_out() -> None:
    head, old = _memory("k", active=True), _memory("k", active=False)
    found = {old.id: Candidate(old.id, keyword_rank=3.0)}

    collapse_versions(
        found, {old.id: old}, {"k": head}, include_superseded=False, left_out=frozenset({head.id})
    )

    assert found == {}


def test_a_version_never_scores_or_ranks_above_its_head() -> None:
    head, old, other = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    ranked = [
        Scored(0.9, Candidate(old), {}),
        Scored(0.5, Candidate(other), {}),
        Scored(0.4, Candidate(head), {}),
    ]
    head_of = {old: head}

    raised = heads_first(ranked, head_of)

    assert [(s.candidate.memory_id, s.score) for s in raised][:2] in (
        [(head, 0.9), (old, 0.9)],
        [(old, 0.9), (head, 0.9)],
    )
    picked = [s for s in raised if s.candidate.memory_id not in head_of]
    versions = [s for s in raised if s.candidate.memory_id in head_of]
    ordered = attach_versions(picked, versions, head_of, limit=3)
    assert [s.candidate.memory_id for s in ordered] == [head, old, other]
    # Cut at the limit; a version whose head is not picked is not shown.
    assert [s.candidate.memory_id for s in attach_versions(picked, versions, head_of, limit=1)] == [head]
    assert attach_versions(picked[1:], versions, head_of, limit=3) == picked[1:]
