"""Dedup on save: a new key whose text an active entry already holds. Longer text
supersedes that entry, shorter or equal text is refused with `duplicate_of`; exact
copies are caught by hash without embeddings; allow_duplicate, the team's threshold,
only active entries, and the cross-key supersede in history and unsupersede.

The similarity check sees only entries whose vectors indexing wrote. The first tests run
that flow as production does: a real worker process indexes each save (tests/worker.py).
The rules after them index in-process after commit, as the broker-less fallback does.

Similarities below are those of the embedded local model (all-MiniLM-L6-v2, int8)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import IntegrityError, transaction

from memories import hooks as memory_hooks
from memories import writes
from memories.models import Memory
from search import duplicates_on_save
from search.chunking import content_hash
from search.embeddings.base import EmbeddingUnavailable
from search.models import EmbeddingCache
from teams.models import Team
from teams.scope import team_scope
from tests.conftest import Agent, operator_view
from tests.worker import CeleryProcess, wait_for_index_state

TESTS = "Run the full test suite with make test before pushing."
TESTS_LONGER = "Before pushing, run make test to run the whole test suite."  # 0.947, longer
STAGING = "The staging database runs on db-3.internal, port 5433."
STAGING_SHORTER = "Staging DB: db-3.internal port 5433."  # 0.939, shorter
STAGING_LONGER = "The staging database runs on db-3.internal, port 5433, and is reset every night."  # 0.874
ON_CALL = "The on-call engineer this week is Ada Lovelace."
ON_CALL_SAME_LENGTH = "Ada Lovelace is the on-call engineer this week."  # 0.986, same length
UNRELATED = "Ada's hobby is zymurgy; she brews a porter every winter."


@pytest.fixture
def post(django_capture_on_commit_callbacks: Any):  # type: ignore[no-untyped-def]
    """POST memories/ and run what the save enqueued after commit (indexing, so the
    entry's vectors exist for the next save's similarity check)."""

    def post(agent: Agent, key: str, content: str, **extra: Any) -> Any:
        with django_capture_on_commit_callbacks(execute=True):
            return agent.client.post(
                agent.url("memories/"), {"key": key, "content": content, **extra}, format="json"
            )

    return post


def active_keys(team: Team) -> set[str]:
    with operator_view():
        return set(Memory.objects.filter(team=team, is_active=True).values_list("key", flat=True))


def set_team(team: Team, **fields: Any) -> None:
    with operator_view():
        Team.objects.filter(id=team.id).update(**fields)
    team.refresh_from_db()


def post_indexed_by_worker(agent: Agent, key: str, content: str, **extra: Any) -> Any:
    """POST memories/; once it is saved, wait until the worker has indexed it."""
    response = agent.client.post(
        agent.url("memories/"), {"key": key, "content": content, **extra}, format="json"
    )
    if response.status_code == 201:
        assert response.json()["index_state"] == "pending"
        wait_for_index_state(agent.team.id, key)
    return response


# --------------------------------------------------------------------------- both ways, on the worker


@pytest.mark.django_db(transaction=True)
def test_a_longer_near_duplicate_under_a_new_key_supersedes_the_entry(
    member: Agent, worker: CeleryProcess
) -> None:
    old = post_indexed_by_worker(member, "testing", TESTS, type="lesson", project="web").json()

    response = post_indexed_by_worker(member, "before-push", TESTS_LONGER)

    assert response.status_code == 201, response.content
    body = response.json()
    assert body["key"] == "before-push" and body["content"] == TESTS_LONGER
    assert body["supersedes_id"] == old["id"]
    assert body["supersede_kind"] == "soft"
    assert body["supersede_reason"] == "minor correction: longer duplicate saved as 'before-push'"
    assert body["replaced_duplicate"]["key"] == "testing"
    assert body["replaced_duplicate"]["matched_by"] == "embedding"
    assert 0.92 <= body["replaced_duplicate"]["similarity"] < 1
    # What the entry is carries over, as on any supersede.
    assert (body["type"], body["project"]) == ("lesson", "web")
    assert active_keys(member.team) == {"before-push"}
    with operator_view():
        replaced = Memory.objects.get(id=old["id"])
    assert replaced.state == "superseded" and replaced.deleted_at is None


@pytest.mark.django_db(transaction=True)
def test_a_shorter_near_duplicate_is_refused_and_names_the_entry_that_holds_it(
    member: Agent, worker: CeleryProcess
) -> None:
    held = post_indexed_by_worker(member, "staging-db", STAGING).json()

    response = post_indexed_by_worker(member, "staging", STAGING_SHORTER)

    assert response.status_code == 200
    body = response.json()
    assert body["saved"] is False
    assert body["duplicate_of"]["id"] == held["id"]
    assert body["duplicate_of"]["key"] == "staging-db"
    assert body["duplicate_of"]["content"] == STAGING
    assert body["matched_by"] == "embedding"
    assert 0.92 <= body["similarity"] < 1
    assert body["threshold"] == 0.92
    assert "staging-db" in body["detail"] and "allow_duplicate" in body["detail"]
    with operator_view():
        assert not Memory.objects.filter(team=member.team, key="staging").exists()
    assert active_keys(member.team) == {"staging-db"}


def test_a_near_duplicate_of_the_same_length_is_refused(member: Agent, post) -> None:  # type: ignore[no-untyped-def]
    post(member, "on-call", ON_CALL)

    response = post(member, "who-is-on-call", ON_CALL_SAME_LENGTH)

    assert len(ON_CALL) == len(ON_CALL_SAME_LENGTH)
    assert response.status_code == 200
    assert response.json()["duplicate_of"]["key"] == "on-call"
    assert active_keys(member.team) == {"on-call"}


def test_unrelated_text_is_saved_as_usual(member: Agent, post) -> None:  # type: ignore[no-untyped-def]
    post(member, "staging-db", STAGING)

    response = post(member, "hobby", UNRELATED)

    assert response.status_code == 201
    assert response.json()["replaced_duplicate"] is None
    assert response.json()["supersedes_id"] is None
    assert active_keys(member.team) == {"staging-db", "hobby"}


# --------------------------------------------------------------------------- exact copies by hash


def test_the_same_text_is_caught_by_hash_with_the_none_profile(member: Agent, post) -> None:  # type: ignore[no-untyped-def]
    set_team(member.team, embedding_profile="none")
    held = post(member, "staging-db", STAGING).json()

    copy = post(member, "staging-copy", STAGING)
    near = post(member, "staging", STAGING_SHORTER)

    assert copy.status_code == 200
    assert copy.json()["duplicate_of"]["id"] == held["id"]
    assert (copy.json()["matched_by"], copy.json()["similarity"]) == ("content_hash", 1.0)
    # Without embeddings only exact copies are seen.
    assert near.status_code == 201
    assert active_keys(member.team) == {"staging-db", "staging"}


def test_the_same_text_is_caught_while_the_provider_is_down(
    member: Agent,
    post,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    post(member, "staging-db", STAGING)

    def down(team: Team) -> None:
        raise EmbeddingUnavailable("connection refused")

    monkeypatch.setattr(duplicates_on_save, "team_provider", down)
    copy = member.client.post(
        member.url("memories/"), {"key": "staging-copy", "content": STAGING}, format="json"
    )
    near = member.client.post(
        member.url("memories/"), {"key": "staging", "content": STAGING_SHORTER}, format="json"
    )

    assert copy.status_code == 200 and copy.json()["matched_by"] == "content_hash"
    # Fails open: the similarity check is skipped, the save goes through.
    assert near.status_code == 201
    assert active_keys(member.team) == {"staging-db", "staging"}


def test_the_hash_is_of_the_scrubbed_text(member: Agent, post) -> None:  # type: ignore[no-untyped-def]
    set_team(member.team, embedding_profile="none")
    post(member, "key-a", "The deploy token is sk-AAAAAAAAAAAAAAAAAAAAAAAAAAAA for now.")

    response = post(member, "key-b", "The deploy token is sk-BBBBBBBBBBBBBBBBBBBBBBBBBBBB for now.")

    # Both redact to the same stored text, so the second is the same entry.
    assert response.status_code == 200
    assert response.json()["matched_by"] == "content_hash"
    assert response.json()["redactions"] == [{"kind": "openai_key", "count": 1}]


# --------------------------------------------------------------------------- escape hatches and scope


def test_allow_duplicate_saves_the_copy_anyway(member: Agent, post) -> None:  # type: ignore[no-untyped-def]
    post(member, "staging-db", STAGING)

    copy = post(member, "staging-copy", STAGING, allow_duplicate=True)
    near = post(member, "staging", STAGING_SHORTER, allow_duplicate=True)

    assert copy.status_code == near.status_code == 201
    assert copy.json()["supersedes_id"] is None and near.json()["supersedes_id"] is None
    assert active_keys(member.team) == {"staging-db", "staging-copy", "staging"}


def test_allow_duplicate_must_be_a_boolean(member: Agent, post) -> None:  # type: ignore[no-untyped-def]
    response = post(member, "x", STAGING, allow_duplicate="yes")

    assert response.status_code == 400
    assert "allow_duplicate" in response.json()["fields"]


def test_deleted_and_superseded_entries_do_not_count(member: Agent, post) -> None:  # type: ignore[no-untyped-def]
    post(member, "staging-db", STAGING)
    post(member, "staging-db", UNRELATED, supersede_reason="wrong entry")
    post(member, "testing", TESTS)
    member.client.delete(member.url("memories/testing/"))

    again_superseded = post(member, "staging-again", STAGING)
    again_deleted = post(member, "testing-again", TESTS)

    assert again_superseded.status_code == 201
    assert again_deleted.status_code == 201
    assert again_superseded.json()["supersedes_id"] is None
    assert active_keys(member.team) == {"staging-db", "staging-again", "testing-again"}


def test_other_teams_entries_do_not_count(member: Agent, outsider: Agent, post) -> None:  # type: ignore[no-untyped-def]
    post(outsider, "staging-db", STAGING)

    response = post(member, "staging-db", STAGING)

    assert response.status_code == 201
    assert active_keys(member.team) == {"staging-db"}


def test_superseding_an_existing_key_is_never_a_duplicate_case(member: Agent, post) -> None:  # type: ignore[no-untyped-def]
    post(member, "staging-db", STAGING)
    post(member, "notes", UNRELATED)

    response = post(member, "notes", STAGING_SHORTER, supersede_reason="moved the note here")

    assert response.status_code == 201
    assert response.json()["replaced_duplicate"] is None
    assert active_keys(member.team) == {"staging-db", "notes"}


def test_a_key_with_an_active_entry_still_answers_409_for_a_copy(member: Agent, post) -> None:  # type: ignore[no-untyped-def]
    post(member, "staging-db", STAGING)

    response = post(member, "staging-db", STAGING)

    assert response.status_code == 409
    assert response.json()["error"] == "conflict"


# --------------------------------------------------------------------------- threshold


def test_a_threshold_of_1_leaves_only_exact_copies(member: Agent, post) -> None:  # type: ignore[no-untyped-def]
    post(member, "staging-db", STAGING)
    set_team(member.team, dedup_threshold=1.0)

    near = post(member, "staging", STAGING_SHORTER)  # 0.939
    copy = post(member, "staging-copy", STAGING)

    assert near.status_code == 201
    assert copy.status_code == 200 and copy.json()["threshold"] == 1.0
    assert active_keys(member.team) == {"staging-db", "staging"}


def test_a_lower_threshold_catches_looser_duplicates(member: Agent, post) -> None:  # type: ignore[no-untyped-def]
    post(member, "staging-db", STAGING)
    set_team(member.team, dedup_threshold=0.85)

    response = post(member, "staging-nightly", STAGING_LONGER)  # 0.874, longer

    assert response.status_code == 201
    assert response.json()["replaced_duplicate"]["key"] == "staging-db"
    assert 0.85 <= response.json()["replaced_duplicate"]["similarity"] < 0.92
    assert active_keys(member.team) == {"staging-nightly"}


def test_the_default_threshold_keeps_merely_related_text_apart(member: Agent, post) -> None:  # type: ignore[no-untyped-def]
    post(member, "staging-db", STAGING)

    response = post(member, "staging-nightly", STAGING_LONGER)  # 0.874 < 0.92

    assert response.status_code == 201
    assert response.json()["replaced_duplicate"] is None
    assert active_keys(member.team) == {"staging-db", "staging-nightly"}


@pytest.mark.parametrize("threshold", [0.0, -0.5, 1.01])
def test_the_threshold_is_kept_in_0_1_by_the_database(team: Team, threshold: float) -> None:
    with operator_view(), pytest.raises(IntegrityError), transaction.atomic():
        Team.objects.filter(id=team.id).update(dedup_threshold=threshold)


def test_a_threshold_of_1_is_allowed(team: Team) -> None:
    with operator_view():
        Team.objects.filter(id=team.id).update(dedup_threshold=1.0)
        assert Team.objects.get(id=team.id).dedup_threshold == 1.0


# --------------------------------------------------------------------------- embedding cache


def test_the_check_embeds_through_the_cache_so_indexing_sends_nothing_again(member: Agent, post) -> None:  # type: ignore[no-untyped-def]
    post(member, "staging-db", STAGING)

    # Not indexed (on-commit callbacks not run): only the duplicate check embedded it.
    response = member.client.post(
        member.url("memories/"), {"key": "hobby", "content": UNRELATED}, format="json"
    )

    assert response.status_code == 201
    with team_scope(member.team.id):
        assert EmbeddingCache.objects.filter(content_hash=content_hash(UNRELATED)).count() == 1


# --------------------------------------------------------------------------- history and unsupersede


def test_history_of_the_replaced_key_points_to_the_new_key(member: Agent, post) -> None:  # type: ignore[no-untyped-def]
    old = post(member, "testing", TESTS).json()
    new = post(member, "before-push", TESTS_LONGER).json()

    history = member.client.get(member.url("memories/testing/history/")).json()["history"]
    version = member.client.get(member.url(f"memories/testing/versions/{old['id']}/")).json()

    assert [event["kind"] for event in history] == ["created"]
    assert history[0]["memory"]["state"] == "superseded"
    assert history[0]["memory"]["superseded_by"]["key"] == "before-push"
    assert history[0]["memory"]["superseded_by"]["id"] == new["id"]
    assert version["superseded_by"]["kind"] == "soft"
    assert member.client.get(member.url("memories/testing/")).status_code == 404


def test_unsupersede_of_a_longer_duplicate_brings_the_other_key_back(member: Agent, post) -> None:  # type: ignore[no-untyped-def]
    old = post(member, "testing", TESTS, type="lesson").json()
    post(member, "before-push", TESTS_LONGER)

    response = member.client.post(
        member.url("memories/before-push/unsupersede/"), {"reason": "these are two rules"}, format="json"
    )

    assert response.status_code == 201, response.content
    restored = response.json()
    assert restored["key"] == "testing"
    assert (restored["content"], restored["type"]) == (TESTS, "lesson")
    assert restored["restored_from_id"] == old["id"]
    assert restored["supersede_kind"] == "unsupersede"
    assert active_keys(member.team) == {"testing"}
    history = member.client.get(member.url("memories/before-push/history/")).json()["history"]
    assert history[0]["memory"]["superseded_by"]["key"] == "testing"
    # Undoing it brings the longer text back under its own key.
    again = member.client.post(
        member.url("memories/testing/unsupersede/"), {"reason": "one rule after all"}, format="json"
    )
    assert again.status_code == 201
    assert (again.json()["key"], again.json()["content"]) == ("before-push", TESTS_LONGER)
    assert active_keys(member.team) == {"before-push"}


def test_unsupersede_refuses_when_the_other_key_has_an_entry_again(member: Agent, post) -> None:  # type: ignore[no-untyped-def]
    post(member, "testing", TESTS)
    post(member, "before-push", TESTS_LONGER)
    post(member, "testing", UNRELATED)

    response = member.client.post(
        member.url("memories/before-push/unsupersede/"), {"reason": "two rules"}, format="json"
    )

    assert response.status_code == 409
    assert response.json()["error"] == "conflict"
    assert response.json()["current"]["key"] == "testing"
    assert active_keys(member.team) == {"testing", "before-push"}


def test_unsupersede_of_a_key_moved_elsewhere_says_so(member: Agent, post) -> None:  # type: ignore[no-untyped-def]
    post(member, "testing", TESTS)
    post(member, "before-push", TESTS_LONGER)

    response = member.client.post(member.url("memories/testing/unsupersede/"), {"reason": "x"}, format="json")

    assert response.status_code == 404
    assert "another key" in response.json()["detail"]


# --------------------------------------------------------------------------- other writers


def test_learnings_are_not_blocked_by_dedup(member: Agent, post) -> None:  # type: ignore[no-untyped-def]
    post(member, "testing", TESTS)

    response = member.client.post(
        member.url("learnings/"), {"topic": "ci", "claim": TESTS, "confidence": "high"}, format="json"
    )

    assert response.status_code == 201
    assert response.json()["outcome"] == "created"
    assert len(active_keys(member.team)) == 2


def test_the_service_refusal_writes_nothing(team: Team) -> None:
    with team_scope(team.id):
        first = writes.save_memory(team=team, key="a", content=STAGING, updated_by="t")
        result = writes.save_memory(team=team, key="b", content=STAGING, updated_by="t")
        rows = Memory.objects.filter(team=team).count()

    assert first.saved and first.duplicate is None
    assert not result.saved
    assert result.memory.id == first.memory.id
    assert result.duplicate is not None and result.duplicate.matched_by == "content_hash"
    assert rows == 1


def test_a_duplicate_changed_meanwhile_is_not_superseded(team: Team, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check runs before any lock; the entry it found is read again under its lock."""
    with team_scope(team.id):
        held = writes.save_memory(team=team, key="a", content=STAGING_SHORTER, updated_by="t").memory
        stale = memory_hooks.DuplicateMatch(
            memory=held, similarity=0.95, matched_by="embedding", threshold=0.92
        )
        writes.delete_memory(team=team, key="a", deleted_by="t")
        monkeypatch.setattr(memory_hooks.find_duplicate, "first", lambda **kwargs: stale)
        result = writes.save_memory(team=team, key="b", content=STAGING, updated_by="t")

    assert result.saved
    assert result.duplicate is None and result.memory.supersedes_id is None
