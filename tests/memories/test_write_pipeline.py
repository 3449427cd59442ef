"""The save pipeline's seams: the hooks it calls, the stale-version check under the key
lock, the one definition of a version's state and the one history-event builder."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
from django.db import connection

from memories import hooks, selectors, writes
from memories.exceptions import MemoryExists, StaleVersion
from memories.models import Memory, MemoryState
from teams.models import Team
from teams.scope import team_scope
from tests.conftest import operator_view


def save(team: Team, key: str, content: str, **kwargs: Any) -> writes.SaveResult:
    with team_scope(team.id):
        return writes.save_memory(team=team, key=key, content=content, updated_by="tester", **kwargs)


def test_every_stored_version_calls_memory_written_inside_the_transaction(
    team: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[int, uuid.UUID, bool]] = []

    def receiver(*, team_id: int, memory_id: uuid.UUID) -> None:
        calls.append((team_id, memory_id, connection.in_atomic_block))

    monkeypatch.setattr(hooks.memory_written, "_receivers", [receiver])
    first = save(team, "k", "one").memory
    second = save(team, "k", "two", supersede_reason="changed").memory
    with team_scope(team.id):
        restored = writes.unsupersede_memory(team=team, key="k", reason="back", updated_by="t")

    assert calls == [(team.id, first.id, True), (team.id, second.id, True), (team.id, restored.id, True)]


def test_a_refused_save_writes_nothing_and_calls_no_hook(team: Team, monkeypatch: pytest.MonkeyPatch) -> None:
    written: list[uuid.UUID] = []
    monkeypatch.setattr(hooks.memory_written, "_receivers", [lambda **kw: written.append(kw["memory_id"])])
    save(team, "k", "one")
    written.clear()

    with pytest.raises(MemoryExists):
        save(team, "k", "two")

    assert written == []
    with operator_view():
        assert list(Memory.objects.filter(team=team, key="k").values_list("content", flat=True)) == ["one"]


def test_the_duplicate_finder_hook_decides_whether_a_new_key_is_saved(
    team: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    holder = save(team, "holder", "The staging database is called pluto.").memory
    match = hooks.DuplicateMatch(memory=holder, similarity=0.97, matched_by="embedding", threshold=0.92)
    asked: list[str] = []

    def finder(*, team: Team, text: str, key: str) -> hooks.DuplicateMatch:
        asked.append(text)
        return match

    monkeypatch.setattr(hooks.find_duplicate, "_receivers", [finder])
    result = save(team, "other", "Staging DB: pluto.")

    assert asked == ["Staging DB: pluto."]
    assert result.saved is False and result.memory.id == holder.id
    with operator_view():
        assert not Memory.objects.filter(team=team, key="other").exists()


def test_expected_version_lets_the_writer_of_the_active_version_supersede(team: Team) -> None:
    first = save(team, "k", "one").memory

    second = save(team, "k", "two", supersede_reason="edit", expected_version=first.id).memory

    assert second.supersedes_id == first.id and second.is_active


def test_expected_version_refuses_when_someone_superseded_it_meanwhile(team: Team) -> None:
    first = save(team, "k", "one").memory
    save(team, "k", "two", supersede_reason="their edit", expected_version=first.id)

    with pytest.raises(StaleVersion) as raised:
        save(team, "k", "three", supersede_reason="my edit", expected_version=first.id)

    assert raised.value.code == "stale_version" and raised.value.status == 409
    assert raised.value.extra["current"].content == "two"
    with operator_view():
        assert Memory.objects.get(team=team, key="k", is_active=True).content == "two"


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_edits_of_one_version_cannot_both_supersede_it(team: Team) -> None:
    """The check runs under the key's lock: of two writers that opened the same version,
    exactly one replaces it; the other is told it is stale."""
    base = save(team, "k", "opened by both").memory
    outcomes: list[str] = []
    barrier = threading.Barrier(2)

    def edit(text: str) -> None:
        try:
            barrier.wait(10)
            save(team, "k", text, supersede_reason="edit", expected_version=base.id)
            outcomes.append("saved")
        except StaleVersion:
            outcomes.append("stale")
        finally:
            connection.close()

    threads = [threading.Thread(target=edit, args=(text,)) for text in ("edit a", "edit b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert sorted(outcomes) == ["saved", "stale"]
    with operator_view():
        rows = list(Memory.objects.filter(team=team, key="k").order_by("created_at"))
    assert len(rows) == 2 and [r.is_active for r in rows] == [False, True]
    assert rows[1].supersedes_id == base.id


def test_each_state_condition_matches_the_state_of_every_row(team: Team) -> None:
    save(team, "kept", "kept one")
    save(team, "changed", "changed one")
    save(team, "changed", "changed two", supersede_reason="edit")
    save(team, "gone", "gone one")
    save(team, "aside", "aside one")
    with team_scope(team.id):
        writes.delete_memory(team=team, key="gone", deleted_by="t")
        writes.archive_memory(team=team, key="aside", archived_by="t")
        rows = Memory.objects.for_team(team.id)
        by_state = {state: {(m.key, m.content) for m in rows.in_state(state)} for state in MemoryState.values}
        assert {m.state for m in rows} == set(MemoryState.values)
        for memory in rows:
            assert (memory.key, memory.content) in by_state[memory.state]
        assert rows.in_state("all").count() == rows.count() == 5

    assert by_state == {
        "active": {("kept", "kept one"), ("changed", "changed two")},
        "superseded": {("changed", "changed one")},
        "deleted": {("gone", "gone one")},
        "archived": {("aside", "aside one")},
    }


def test_history_reads_a_deleted_and_resaved_key_as_one_story(team: Team) -> None:
    save(team, "k", "one")
    save(team, "k", "two", supersede_reason="edit")
    with team_scope(team.id):
        writes.delete_memory(team=team, key="k", deleted_by="remover")
    save(team, "k", "three")

    with team_scope(team.id):
        events = selectors.memory_history(team=team, key="k")
        recent = selectors.recent_history(team=team, limit=10)
        changes = selectors.recent_history(team=team, limit=10, changes_only=True)

    assert [(e.kind, e.memory.content, e.by) for e in events] == [
        ("created", "three", "tester"),
        ("deleted", "two", "remover"),
        ("hard", "two", "tester"),
        ("created", "one", "tester"),
    ]
    assert [(e.kind, e.key) for e in recent] == [(e.kind, e.key) for e in events]
    assert [e.kind for e in changes] == ["deleted", "hard"]
    assert [e.kind for e in selectors.history_events([], [])] == []
