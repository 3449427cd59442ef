from __future__ import annotations

import pytest

from core.errors import InvalidInput
from memories import selectors, writes
from memories.exceptions import ContentTooLarge, MemoryExists, MemoryNotFound, UnknownMemoryType
from memories.models import MAX_CONTENT_BYTES, Memory
from teams import services as team_services
from teams.models import Team
from teams.scope import team_scope


def save(team: Team, key: str, content: str, **kwargs: object) -> writes.SaveResult:
    with team_scope(team.id):
        return writes.save_memory(team=team, key=key, content=content, updated_by="tester", **kwargs)


def versions(team: Team, key: str) -> list[Memory]:
    with team_scope(team.id):
        return list(Memory.objects.filter(team=team, key=key).order_by("created_at"))


def test_save_inserts_first_version_as_active_context(team: Team) -> None:
    result = save(team, "deploy-friday", "Never deploy on Fridays.")

    memory = result.memory
    assert memory.is_active and memory.deleted_at is None
    assert memory.type == "context"
    assert memory.supersedes_id is None and memory.supersede_kind == ""
    assert memory.content_hash == Memory.hash_content("Never deploy on Fridays.")
    assert memory.index_state == "pending"


def test_save_without_reason_rejects_and_returns_current_entry(team: Team) -> None:
    first = save(team, "k", "one").memory

    with pytest.raises(MemoryExists) as raised:
        save(team, "k", "two")

    assert raised.value.extra["current"].id == first.id
    assert [v.content for v in versions(team, "k")] == ["one"]


def test_save_with_reason_supersedes_hard_and_links_chain(team: Team) -> None:
    first = save(team, "k", "one").memory

    second = save(team, "k", "two", supersede_reason="the API moved to v2").memory

    old, new = versions(team, "k")
    assert old.id == first.id and not old.is_active and old.deleted_at is None
    assert new.id == second.id and new.is_active
    assert new.supersedes_id == first.id
    assert new.supersede_reason == "the API moved to v2"
    assert new.supersede_kind == "hard"


@pytest.mark.parametrize("reason", ["minor correction", "Minor Correction", "  minor correction "])
def test_minor_correction_is_a_soft_supersede(team: Team, reason: str) -> None:
    save(team, "k", "one")

    second = save(team, "k", "one, fixed typo", supersede_reason=reason).memory

    assert second.supersede_kind == "soft"
    assert second.supersede_reason == reason.strip()


def test_blank_reason_counts_as_no_reason(team: Team) -> None:
    save(team, "k", "one")

    with pytest.raises(MemoryExists):
        save(team, "k", "two", supersede_reason="   ")


def test_supersede_without_type_keeps_the_previous_type(team: Team) -> None:
    save(team, "k", "Never deploy on Fridays.", type_name="lesson")

    second = save(team, "k", "Never deploy on Fridays or holidays.", supersede_reason="wider").memory

    assert second.type == "lesson"


def test_supersede_with_type_changes_it(team: Team) -> None:
    save(team, "k", "Use Postgres.", type_name="context")

    second = save(team, "k", "Use Postgres.", type_name="decision", supersede_reason="agreed").memory

    assert second.type == "decision"


def test_reason_without_active_entry_just_inserts(team: Team) -> None:
    memory = save(team, "fresh", "text", supersede_reason="nothing to replace").memory

    assert memory.supersedes_id is None and memory.supersede_kind == "" and memory.supersede_reason == ""


@pytest.mark.parametrize(
    ("alias", "canonical"),
    [
        ("core", "identity"),
        ("self", "identity"),
        ("warning", "lesson"),
        ("insight", "lesson"),
        ("learning", "lesson"),
        ("commitment", "decision"),
        ("choice", "decision"),
        ("active", "context"),
        ("background", "context"),
        ("pointer", "reference"),
        ("link", "reference"),
        ("archive", "historical"),
        ("past", "historical"),
        ("LESSON", "lesson"),
    ],
)
def test_type_aliases_resolve_at_write_time(team: Team, alias: str, canonical: str) -> None:
    assert save(team, "k", "text", type_name=alias).memory.type == canonical


def test_unknown_type_is_rejected_and_nothing_is_written(team: Team) -> None:
    with pytest.raises(UnknownMemoryType):
        save(team, "k", "text", type_name="gossip")

    assert versions(team, "k") == []


@pytest.mark.parametrize("key", ["", "-leading-dash", "has space", "slash/inside", "x" * 201, "ünicode"])
def test_malformed_keys_are_rejected(team: Team, key: str) -> None:
    with pytest.raises(InvalidInput):
        save(team, key, "text")


@pytest.mark.parametrize("key", ["learn:topic-slug:claimhash", "a", "user@host", "v1.2_final", "x" * 200])
def test_well_formed_keys_are_accepted(team: Team, key: str) -> None:
    assert save(team, key, "text").memory.key == key


@pytest.mark.parametrize("content", ["", "   ", "\n\t"])
def test_empty_content_is_rejected(team: Team, content: str) -> None:
    with pytest.raises(InvalidInput):
        save(team, "k", content)


def test_content_limit_is_64_kib_of_utf8(team: Team) -> None:
    assert save(team, "fits", "a" * MAX_CONTENT_BYTES).memory.content == "a" * MAX_CONTENT_BYTES
    with pytest.raises(ContentTooLarge):
        save(team, "too-big", "é" * (MAX_CONTENT_BYTES // 2 + 1))


def test_delete_marks_inactive_with_deleted_at(team: Team) -> None:
    save(team, "k", "one")

    with team_scope(team.id):
        deleted = writes.delete_memory(team=team, key="k", deleted_by="tester")

    (row,) = versions(team, "k")
    assert row.id == deleted.id and not row.is_active
    assert row.deleted_at is not None and row.deleted_by == "tester"
    assert row.state == "deleted"


def test_delete_of_missing_key_is_not_found(team: Team) -> None:
    with team_scope(team.id), pytest.raises(MemoryNotFound):
        writes.delete_memory(team=team, key="nothing-here", deleted_by="tester")


def test_superseded_and_deleted_are_told_apart(team: Team) -> None:
    save(team, "k", "one")
    save(team, "k", "two", supersede_reason="update")
    with team_scope(team.id):
        writes.delete_memory(team=team, key="k", deleted_by="tester")

    assert [v.state for v in versions(team, "k")] == ["superseded", "deleted"]


def test_saving_after_delete_starts_a_new_active_entry(team: Team) -> None:
    save(team, "k", "one")
    with team_scope(team.id):
        writes.delete_memory(team=team, key="k", deleted_by="tester")

    again = save(team, "k", "back again").memory

    assert again.is_active and again.supersedes_id is None


def test_history_lists_every_event_newest_first(team: Team) -> None:
    save(team, "k", "one")
    save(team, "k", "two", supersede_reason="changed plan")
    save(team, "k", "two!", supersede_reason="minor correction")
    with team_scope(team.id):
        writes.delete_memory(team=team, key="k", deleted_by="cleaner")
        history = selectors.memory_history(team=team, key="k")

    assert [(e.kind, e.reason, e.by) for e in history] == [
        ("deleted", "", "cleaner"),
        ("soft", "minor correction", "tester"),
        ("hard", "changed plan", "tester"),
        ("created", "", "tester"),
    ]


def test_type_hint_suggests_but_never_rejects(team: Team) -> None:
    result = save(team, "k", "Never run migrations by hand in production.", type_name="context")

    assert result.memory.type == "context"
    assert result.hint is not None and result.hint.suggested_type == "lesson"
    assert save(team, "k2", "Never run migrations by hand.", type_name="lesson").hint is None


def test_credentials_are_redacted_before_storage(team: Team) -> None:
    with team_scope(team.id):
        team_services.set_vault_entry(
            team=team, key="db-password", value="correct-horse-battery", is_secret=True, actor="t"
        )

    result = save(
        team,
        "k",
        "db pass correct-horse-battery, key AKIAABCDEFGHIJKLMNOP",
        metadata={"note": "Bearer abcdefghijklmnopqrstuvwxyz012345"},
    )

    stored = versions(team, "k")[0]
    assert "correct-horse-battery" not in stored.content
    assert "AKIAABCDEFGHIJKLMNOP" not in stored.content
    assert "abcdefghijklmnopqrstuvwxyz012345" not in str(stored.metadata)
    kinds = {r["kind"] for r in result.redactions}
    assert kinds == {"vault_secret", "aws_access_key", "bearer_token"}


def test_one_team_key_does_not_block_another_team(team: Team, other_team: Team) -> None:
    save(team, "shared-key", "alpha's")
    assert save(other_team, "shared-key", "bravo's").memory.is_active
