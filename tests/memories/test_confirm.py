"""Confirming an entry: `last_confirmed_at` moves, no new version is made,
and the key's history shows the confirmation (who, when, note)."""

from __future__ import annotations

import datetime as dt

import pytest

from memories import writes
from memories.exceptions import MemoryNotFound
from memories.models import Confirmation, Memory
from teams.scope import team_scope
from tests.conftest import Agent, operator_view


def confirm(agent: Agent, key: str, **body: object):  # type: ignore[no-untyped-def]
    return agent.client.post(agent.url(f"memories/{key}/confirm/"), body, format="json")


def row(memory_id: str) -> Memory:
    with operator_view():
        return Memory.objects.get(id=memory_id)


def age(memory_id: str, days: int) -> None:
    """Make the entry as if it were saved (and last confirmed) `days` ago."""
    with operator_view():
        past = Memory.objects.get(id=memory_id).created_at - dt.timedelta(days=days)
        Memory.objects.filter(id=memory_id).update(created_at=past, last_confirmed_at=past)


def test_a_new_entry_starts_confirmed_at_its_creation(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    saved = save(member, "stack", "We use Postgres.")

    memory = row(saved["id"])
    assert memory.last_confirmed_at == memory.created_at
    assert saved["last_confirmed_at"] == saved["created_at"]
    assert saved["freshness"] == "fresh"
    assert saved["confirmed_by_count"] == 0


def test_confirm_resets_last_confirmed_at_without_a_new_version(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    saved = save(member, "stack", "We use Postgres.")
    age(saved["id"], 40)
    before = row(saved["id"])

    response = confirm(member, "stack", note="checked the compose file")

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["id"] == saved["id"]
    assert body["freshness"] == "fresh"
    after = row(saved["id"])
    assert after.last_confirmed_at > before.last_confirmed_at
    assert body["last_confirmed_at"] == after.last_confirmed_at.isoformat().replace("+00:00", "Z")
    # No new version, and the entry itself did not change.
    with operator_view():
        assert Memory.objects.filter(team=member.team, key="stack").count() == 1
    assert after.updated_at == before.updated_at
    assert after.content == before.content


def test_confirmation_appears_in_the_history_of_the_key(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    saved = save(member, "stack", "We use Postgres.")
    confirm(member, "stack", note="still on 16")

    history = member.client.get(member.url("memories/stack/history/")).json()["history"]

    assert [event["kind"] for event in history] == ["confirmed", "created"]
    assert history[0]["by"] == "writer-bot"
    assert history[0]["reason"] == "still on 16"
    assert history[0]["memory"]["id"] == saved["id"]


def test_two_distinct_confirmers_are_counted_once_each(member: Agent, readonly_member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    saved = save(member, "stack", "We use Postgres.")
    with team_scope(member.team.id):
        writes.confirm_memory(team=member.team, key="stack", confirmed_by="ada")
        writes.confirm_memory(team=member.team, key="stack", confirmed_by="ada")
        writes.confirm_memory(team=member.team, key="stack", confirmed_by="bob")

    assert row(saved["id"]).confirmed_by_count == 2
    with operator_view():
        assert Confirmation.objects.filter(memory_id=saved["id"]).count() == 3


def test_confirm_of_a_key_without_active_entry_is_404(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    save(member, "gone", "Soon deleted.")
    member.client.delete(member.url("memories/gone/"))

    assert confirm(member, "gone").status_code == 404
    assert confirm(member, "never-saved").status_code == 404
    with team_scope(member.team.id), pytest.raises(MemoryNotFound):
        writes.confirm_memory(team=member.team, key="never-saved", confirmed_by="ada")


def test_confirm_needs_the_write_scope(member: Agent, readonly_member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    save(member, "stack", "We use Postgres.")

    response = confirm(readonly_member, "stack")

    assert response.status_code == 403
    assert set(response.json()) >= {"error", "detail"}


@pytest.mark.parametrize(
    "body",
    [{"note": "x" * 2001}, {"note": 42}, {"note": "a\x00b"}, {"nope": "x"}],
)
def test_bad_confirm_input_is_400_in_the_one_error_shape(member: Agent, save, body: dict) -> None:  # type: ignore[no-untyped-def]
    saved = save(member, "stack", "We use Postgres.")

    response = confirm(member, "stack", **body)

    assert response.status_code == 400
    assert set(response.json()) >= {"error", "detail"}
    assert row(saved["id"]).confirmed_by_count == 0


def test_outsider_cannot_confirm_and_sees_nothing(member: Agent, outsider: Agent, save) -> None:  # type: ignore[no-untyped-def]
    saved = save(member, "alpha-stack", "Alpha runs on Postgres.")

    on_alpha_url = outsider.client.post(member.url("memories/alpha-stack/confirm/"), {}, format="json")
    in_own_team = confirm(outsider, "alpha-stack")

    assert on_alpha_url.status_code == in_own_team.status_code == 404
    for response in (on_alpha_url, in_own_team):
        assert b"alpha-stack" not in response.content and b"Postgres" not in response.content
    assert row(saved["id"]).confirmed_by_count == 0


def test_anchor_is_saved_returned_and_carried_over_on_supersede(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    anchor = {"type": "url", "value": "https://status.example.org/health", "expect": 200}
    saved = save(member, "status", "The status page is green.", anchor=anchor)
    assert saved["anchor"] == anchor

    replaced = save(member, "status", "The status page is green again.", supersede_reason="wording")
    assert replaced["anchor"] == anchor

    cleared = save(member, "status", "No status page.", supersede_reason="gone", anchor=None)
    assert cleared["anchor"] is None


@pytest.mark.parametrize(
    "anchor",
    [
        {"type": "ftp", "value": "x"},
        {"type": "url", "value": "not a url"},
        {"type": "url", "value": "ftp://example.org/x"},
        {"type": "api", "value": "https://user:secret@example.org/"},
        {"type": "url", "value": "https://example.org/" + "a" * 2001},
        {"type": "url", "value": "https://example.org/\x00"},
        {"type": "file", "value": ""},
        {"type": "url", "value": "https://example.org/", "expect": 42},
        {"type": "url", "value": "https://example.org/", "expect": True},
        {"type": "url", "value": "https://example.org/", "expect": "x" * 201},
        {"type": "url", "value": "https://example.org/", "extra": 1},
        "https://example.org/",
    ],
)
def test_malformed_anchor_is_400_and_nothing_is_saved(member: Agent, anchor: object) -> None:
    response = member.client.post(
        member.url("memories/"), {"key": "k", "content": "Anchored.", "anchor": anchor}, format="json"
    )

    assert response.status_code == 400, response.content
    assert set(response.json()) >= {"error", "detail"}
    with operator_view():
        assert not Memory.objects.filter(team=member.team, key="k").exists()


def test_file_anchor_with_substring_expectation_is_accepted(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    anchor = {"type": "file", "value": "docs/runbook.md", "expect": "## Deploy"}

    assert save(member, "runbook", "The runbook says how to deploy.", anchor=anchor)["anchor"] == anchor
