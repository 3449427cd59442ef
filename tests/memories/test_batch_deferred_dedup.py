"""The batch save makes only the exact duplicate check in the request
(no embedding); an entry it stores under a new key without allow_duplicate or a reason
gets the near check once the worker has indexed it, and a near duplicate then becomes
a soft supersede: the longer text stays, and a new entry that is not longer is the one
replaced (the single save would have refused it). The single save keeps its synchronous
check (tests/search/test_dedup.py).

Indexing runs in-process after commit, as the broker-less fallback does, except in the
test with the real worker (tests/worker.py). Similarities are those of the bundled local
model, as in tests/search/test_dedup.py."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from memories import writes
from memories.hooks import DuplicateMatch
from memories.models import Memory
from search import hooks as search_hooks
from search.embeddings.base import EmbeddingUnavailable
from search.embeddings.profiles import provider_for
from search.services import index_memory
from teams.models import Team
from teams.scope import team_scope
from tests.conftest import Agent, operator_view
from tests.freshness.test_contradiction_flow import NEW_PORT, OLD_PORT, contradictions_of
from tests.search.test_dedup import (
    ON_CALL,
    ON_CALL_SAME_LENGTH,
    STAGING,
    STAGING_SHORTER,
    TESTS,
    TESTS_LONGER,
    UNRELATED,
    active_keys,
    set_team,
)
from tests.worker import INDEX_SECONDS, CeleryProcess, wait_for, wait_for_index_state

ANNOUNCED = re.compile(r"Task search\.announce_indexed\[[^\]]+\] succeeded")


@pytest.fixture
def embedded(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every text the local provider (the teams' default profile) was asked to embed."""
    provider = provider_for("local")
    assert provider is not None
    texts: list[str] = []
    original = provider.embed_documents

    def observed(batch_texts: list[str]) -> list[list[float]]:
        texts.extend(batch_texts)
        return original(batch_texts)

    monkeypatch.setattr(provider, "embed_documents", observed)
    yield texts


@pytest.fixture
def post_batch(django_capture_on_commit_callbacks: Any):  # type: ignore[no-untyped-def]
    """POST memories/batch/ and return (its results, the after-commit callbacks, not yet
    run: indexing, and the near check with it)."""

    def post_batch(agent: Agent, entries: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], Any]:
        with django_capture_on_commit_callbacks(execute=False) as callbacks:
            response = agent.client.post(agent.url("memories/batch/"), {"entries": entries}, format="json")
        assert response.status_code == 200, response.content
        return response.json()["results"], callbacks

    return post_batch


def run(callbacks: Any) -> None:
    for callback in callbacks:
        callback()


def row(memory_id: object) -> Memory:
    with operator_view():
        return Memory.objects.get(id=memory_id)


def pending(team: Team) -> set[str]:
    with operator_view():
        return set(Memory.objects.filter(team=team, near_check_pending=True).values_list("key", flat=True))


# --------------------------------------------------------------------------- both ways, after indexing


def test_a_longer_near_duplicate_supersedes_the_entry_once_indexed_and_the_request_embeds_nothing(
    member: Agent, save: Any, post_batch: Any, embedded: list[str]
) -> None:
    old = save(member, "testing", TESTS, type="lesson")
    embedded.clear()

    results, callbacks = post_batch(member, [{"key": "before-push", "content": TESTS_LONGER}])

    assert embedded == []  # no provider call in the request
    assert results[0]["status"] == "created" and results[0].get("replaced_duplicate") is None
    assert active_keys(member.team) == {"testing", "before-push"}
    assert pending(member.team) == {"before-push"}

    run(callbacks)

    new = row(results[0]["id"])
    assert active_keys(member.team) == {"before-push"}
    assert str(new.supersedes_id) == old["id"] and new.supersede_kind == "soft"
    assert new.supersede_reason == "minor correction: longer duplicate saved as 'before-push'"
    assert row(old["id"]).state == "superseded"
    assert pending(member.team) == set()
    history = member.client.get(member.url("memories/testing/history/")).json()["history"]
    assert history[0]["memory"]["superseded_by"]["key"] == "before-push"
    assert history[0]["memory"]["superseded_by"]["kind"] == "soft"
    assert member.client.get(member.url("memories/testing/")).status_code == 404


@pytest.mark.parametrize(
    ("held_key", "held", "new_key", "near"),
    [
        ("staging-db", STAGING, "staging", STAGING_SHORTER),  # 0.939, shorter
        ("on-call", ON_CALL, "who-is-on-call", ON_CALL_SAME_LENGTH),  # 0.986, same length
    ],
)
def test_a_near_duplicate_that_is_not_longer_is_itself_superseded_by_the_entry_holding_it(
    member: Agent, save: Any, post_batch: Any, held_key: str, held: str, new_key: str, near: str
) -> None:
    kept = save(member, held_key, held)

    results, callbacks = post_batch(member, [{"key": new_key, "content": near}])
    assert results[0]["status"] == "created"
    run(callbacks)

    assert active_keys(member.team) == {held_key}
    survivor = row(kept["id"])
    assert survivor.is_active and survivor.content == held
    assert str(survivor.supersedes_id) == results[0]["id"] and survivor.supersede_kind == "soft"
    assert f"'{new_key}'" in survivor.supersede_reason
    assert row(results[0]["id"]).state == "superseded"
    history = member.client.get(member.url(f"memories/{new_key}/history/")).json()["history"]
    assert history[0]["memory"]["superseded_by"]["key"] == held_key
    assert member.client.get(member.url(f"memories/{new_key}/")).status_code == 404
    moved = member.client.post(member.url(f"memories/{new_key}/unsupersede/"), {"reason": "x"}, format="json")
    assert moved.status_code == 404 and "another key" in moved.json()["detail"]
    assert pending(member.team) == set()


def test_a_near_text_that_disagrees_is_kept_and_left_to_the_contradiction_flow(
    member: Agent, save: Any, post_batch: Any
) -> None:
    set_team(member.team, dedup_threshold=0.90)  # the port pair is 0.917 apart
    old = save(member, "postgres-port", OLD_PORT)

    results, callbacks = post_batch(member, [{"key": "postgres-port-pooler", "content": NEW_PORT}])
    run(callbacks)

    assert active_keys(member.team) == {"postgres-port", "postgres-port-pooler"}
    assert row(results[0]["id"]).supersedes_id is None and row(old["id"]).supersedes_id is None
    assert pending(member.team) == set()
    # The contradiction pass ran after the check and saw both entries active.
    ((newer, older),) = [(n.memory_id, n.other_memory_id) for n in contradictions_of(member.team)]
    assert (str(newer), str(older)) == (results[0]["id"], old["id"])


def test_without_the_disagreement_judge_the_port_change_would_be_merged(
    member: Agent, save: Any, post_batch: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the previous test relies on: the deferred check asks texts_disagree."""
    set_team(member.team, dedup_threshold=0.90)
    monkeypatch.setattr(search_hooks.texts_disagree, "_receivers", [])
    save(member, "postgres-port", OLD_PORT)

    results, callbacks = post_batch(member, [{"key": "postgres-port-pooler", "content": NEW_PORT}])
    assert results[0]["status"] == "created"
    run(callbacks)

    assert active_keys(member.team) == {"postgres-port"}


# --------------------------------------------------------------------------- what is never checked


def test_exact_copies_are_still_answered_in_the_request_as_duplicates(
    member: Agent, save: Any, post_batch: Any, embedded: list[str]
) -> None:
    held = save(member, "staging-db", STAGING)
    embedded.clear()

    results, _ = post_batch(
        member, [{"key": "staging-copy", "content": STAGING}, {"key": "staging", "content": STAGING_SHORTER}]
    )

    assert embedded == []
    assert results[0]["status"] == "duplicate"
    assert results[0]["duplicate_of"]["id"] == held["id"]
    assert results[0]["duplicate_of"]["matched_by"] == "content_hash"
    assert results[1]["status"] == "created"  # the near one waits for indexing
    with operator_view():
        assert not Memory.objects.filter(team=member.team, key="staging-copy").exists()
    assert pending(member.team) == {"staging"}


def test_allow_duplicate_and_a_supersede_under_an_existing_key_are_never_checked(
    member: Agent, save: Any, post_batch: Any, embedded: list[str]
) -> None:
    save(member, "testing", TESTS)
    save(member, "notes", UNRELATED)
    embedded.clear()

    results, callbacks = post_batch(
        member,
        [
            {"key": "forced", "content": TESTS_LONGER, "allow_duplicate": True},
            {"key": "notes", "content": TESTS_LONGER + " Always.", "supersede_reason": "moved the rule"},
            {"key": "lunch", "content": "The team has lunch together on Thursdays at noon."},
        ],
    )
    assert embedded == []
    assert [r["status"] for r in results] == ["created", "superseded", "created"]
    assert pending(member.team) == {"lunch"}  # only the plain new key waits for the check
    run(callbacks)

    assert active_keys(member.team) == {"testing", "forced", "notes", "lunch"}
    assert pending(member.team) == set()
    assert row(results[0]["id"]).supersedes_id is None
    assert row(results[1]["id"]).supersede_reason == "moved the rule"


def test_another_teams_near_identical_entry_is_never_touched(
    member: Agent, outsider: Agent, save: Any, post_batch: Any, embedded: list[str]
) -> None:
    theirs = save(outsider, "testing", TESTS)
    save(member, "hobby", UNRELATED)  # the team has vectors: a near check would embed
    embedded.clear()

    results, callbacks = post_batch(member, [{"key": "before-push", "content": TESTS_LONGER}])
    assert embedded == []
    assert pending(member.team) == {"before-push"}
    run(callbacks)

    assert row(results[0]["id"]).supersedes_id is None
    assert pending(member.team) == set()
    assert active_keys(member.team) == {"hobby", "before-push"}
    assert active_keys(outsider.team) == {"testing"}
    assert row(theirs["id"]).is_active
    history = outsider.client.get(outsider.url("memories/testing/history/")).json()["history"]
    assert [(e["kind"], e["memory"]["state"]) for e in history] == [("created", "active")]


# --------------------------------------------------------------------------- the flag fails open


def test_with_the_none_profile_the_flag_is_cleared_and_nothing_merged(
    member: Agent, save: Any, post_batch: Any
) -> None:
    save(member, "testing", TESTS)
    set_team(member.team, embedding_profile="none")

    _, callbacks = post_batch(member, [{"key": "before-push", "content": TESTS_LONGER}])
    assert pending(member.team) == {"before-push"}
    run(callbacks)

    assert pending(member.team) == set()
    assert active_keys(member.team) == {"testing", "before-push"}


def test_with_a_failing_provider_the_check_waits_for_the_retry_that_indexes_the_entry(
    member: Agent, save: Any, post_batch: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    save(member, "testing", TESTS)
    provider = provider_for("local")

    def down(texts: list[str]) -> list[list[float]]:
        raise EmbeddingUnavailable("connection refused")

    results, callbacks = post_batch(member, [{"key": "before-push", "content": TESTS_LONGER}])
    monkeypatch.setattr(provider, "embed_documents", down)
    run(callbacks)

    assert row(results[0]["id"]).index_state == "failed"
    assert pending(member.team) == {"before-push"}
    assert active_keys(member.team) == {"testing", "before-push"}

    monkeypatch.undo()  # the provider is back; the reconcile job's retry indexes the entry
    index_memory(team_id=member.team.id, memory_id=results[0]["id"])

    assert pending(member.team) == set()
    assert active_keys(member.team) == {"before-push"}


# --------------------------------------------------------------------------- undo, re-runs, races


def test_unsupersede_brings_the_replaced_entry_back(member: Agent, save: Any, post_batch: Any) -> None:
    old = save(member, "testing", TESTS, type="lesson")
    _, callbacks = post_batch(member, [{"key": "before-push", "content": TESTS_LONGER}])
    assert active_keys(member.team) == {"testing", "before-push"}  # until indexed
    run(callbacks)
    assert active_keys(member.team) == {"before-push"}

    response = member.client.post(
        member.url("memories/before-push/unsupersede/"), {"reason": "these are two rules"}, format="json"
    )

    assert response.status_code == 201, response.content
    restored = response.json()
    assert (restored["key"], restored["content"], restored["type"]) == ("testing", TESTS, "lesson")
    assert restored["restored_from_id"] == old["id"]
    assert active_keys(member.team) == {"testing"}


def test_a_rerun_of_the_indexing_or_the_check_changes_nothing(
    member: Agent, save: Any, post_batch: Any
) -> None:
    old = save(member, "testing", TESTS)
    results, callbacks = post_batch(member, [{"key": "before-push", "content": TESTS_LONGER}])
    run(callbacks)
    with operator_view():
        before = list(Memory.objects.filter(team=member.team).order_by("id").values())

    assert index_memory(team_id=member.team.id, memory_id=results[0]["id"]) == "indexed"
    stale = DuplicateMatch(memory=row(old["id"]), similarity=0.95, matched_by="embedding", threshold=0.92)
    with team_scope(member.team.id):
        assert writes.settle_near_check(team=member.team, memory_id=results[0]["id"], duplicate=stale) is None

    with operator_view():
        assert list(Memory.objects.filter(team=member.team).order_by("id").values()) == before


def test_a_duplicate_changed_before_the_locks_is_left_alone(
    member: Agent, save: Any, post_batch: Any
) -> None:
    """The lookup runs before the locks; both entries are read again under them."""
    old = save(member, "testing", TESTS)
    results, _ = post_batch(member, [{"key": "before-push", "content": TESTS_LONGER}])
    found = DuplicateMatch(memory=row(old["id"]), similarity=0.95, matched_by="embedding", threshold=0.92)
    assert member.client.delete(member.url("memories/testing/")).status_code == 204

    with team_scope(member.team.id):
        replaced = writes.settle_near_check(team=member.team, memory_id=results[0]["id"], duplicate=found)

    assert replaced is None
    assert row(results[0]["id"]).supersedes_id is None
    assert row(old["id"]).state == "deleted"
    assert pending(member.team) == set()


def test_an_entry_that_already_replaced_a_version_keeps_both(
    member: Agent, save: Any, post_batch: Any
) -> None:
    """The supersede is recorded in place on the survivor's row, which has one
    `supersedes`: an entry holding the text that already replaced a version stays as
    it is, next to the shorter near duplicate."""
    save(member, "staging-db", UNRELATED)
    kept = save(member, "staging-db", STAGING, supersede_reason="wrong entry")

    _, callbacks = post_batch(member, [{"key": "staging", "content": STAGING_SHORTER}])
    run(callbacks)

    assert active_keys(member.team) == {"staging-db", "staging"}
    assert row(kept["id"]).supersede_reason == "wrong entry"
    assert pending(member.team) == set()


# --------------------------------------------------------------------------- the real worker


@pytest.mark.django_db(transaction=True)
def test_the_worker_settles_the_near_check_after_indexing(
    member: Agent, worker: CeleryProcess, embedded: list[str]
) -> None:
    saved = member.client.post(member.url("memories/"), {"key": "testing", "content": TESTS}, format="json")
    assert saved.status_code == 201
    wait_for_index_state(member.team.id, "testing")

    log_from = worker.log_position()
    embedded.clear()

    response = member.client.post(
        member.url("memories/batch/"),
        {"entries": [{"key": "before-push", "content": TESTS_LONGER}]},
        format="json",
    )
    assert response.json()["results"][0]["status"] == "created"
    assert embedded == []  # this process (the request) embedded nothing; the worker did
    # The batch's last message: the contradiction pass after its indexing (and near check).
    wait_for(lambda: ANNOUNCED.search(worker.log_since(log_from)) is not None, INDEX_SECONDS, "the announce")

    assert active_keys(member.team) == {"before-push"}

    new = row(response.json()["results"][0]["id"])
    assert str(new.supersedes_id) == saved.json()["id"] and new.supersede_kind == "soft"
    assert not new.near_check_pending and new.index_state == "indexed"
