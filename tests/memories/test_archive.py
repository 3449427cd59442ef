"""Archive: a soft state of a key's active entry. It leaves the list, search's
default results and injection, stays in history, and is restored as it was; a key saved
again meanwhile is not overwritten; read tokens cannot archive; bad input is a 4xx in
the one error shape."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from memories import writes
from memories.exceptions import MemoryNotFound
from memories.models import Memory
from tests.conftest import Agent, operator_view, search


def test_archive_then_restore_keeps_the_same_version(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    saved = save(member, "cache-policy", "We cache rendered pages for five minutes.")

    archived = member.client.post(member.url("memories/cache-policy/archive/"), {}, format="json")

    assert archived.status_code == 200, archived.content
    body = archived.json()
    assert body["state"] == "archived" and body["archived_by"] == "writer-bot" and not body["is_active"]
    assert member.client.get(member.url("memories/cache-policy/")).status_code == 404
    assert member.client.get(member.url("memories/")).json()["results"] == []
    assert search(member, "cache rendered pages")["results"] == []
    assert [r["id"] for r in search(member, "cache rendered pages", include_archived=True)["results"]] == [
        saved["id"]
    ]
    assert member.client.get(member.url("injection/"), {"format": "json"}).json()["entries"] == []
    history = member.client.get(member.url("memories/cache-policy/history/")).json()["history"]
    assert [e["kind"] for e in history] == ["archived", "created"]

    restored = member.client.post(member.url("memories/cache-policy/restore/"), {}, format="json")

    assert restored.status_code == 200 and restored.json()["id"] == saved["id"]
    assert restored.json()["state"] == "active" and restored.json()["archived_at"] is None
    assert [r["id"] for r in search(member, "cache rendered pages")["results"]] == [saved["id"]]


def test_a_key_saved_again_is_not_overwritten_by_a_restore(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    save(member, "cache-policy", "We cache rendered pages for five minutes.")
    member.client.post(member.url("memories/cache-policy/archive/"), {}, format="json")
    again = save(member, "cache-policy", "We no longer cache rendered pages.", allow_duplicate=True)

    refused = member.client.post(member.url("memories/cache-policy/restore/"), {}, format="json")

    assert refused.status_code == 409 and refused.json()["error"] == "conflict"
    assert refused.json()["current"]["id"] == again["id"]


def test_restore_and_archive_of_what_is_not_there(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    save(member, "cache-policy", "We cache rendered pages for five minutes.")
    save(member, "gone", "A short-lived note about the staging proxy.")
    member.client.delete(member.url("memories/gone/"))

    active = member.client.post(member.url("memories/cache-policy/restore/"), {}, format="json")
    deleted = member.client.post(member.url("memories/gone/restore/"), {}, format="json")
    never = member.client.post(member.url("memories/nothing-here/archive/"), {}, format="json")

    assert active.status_code == 409 and active.json()["error"] == "conflict"
    assert deleted.status_code == 404 and deleted.json()["error"] == "not_found"
    assert never.status_code == 404


def test_a_read_token_cannot_archive_or_restore(readonly_member: Agent, member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    save(member, "cache-policy", "We cache rendered pages for five minutes.")

    for path in ("memories/cache-policy/archive/", "memories/cache-policy/restore/"):
        assert readonly_member.client.post(readonly_member.url(path), {}, format="json").status_code == 403
    with operator_view():
        assert Memory.objects.get(key="cache-policy").archived_at is None


@pytest.mark.parametrize(
    "body",
    [{"expected_version": 7}, {"expected_version": "not-a-uuid"}, {"unknown": 1}],
)
def test_bad_archive_input_is_400_in_the_one_shape(member: Agent, save, body: object) -> None:  # type: ignore[no-untyped-def]
    save(member, "cache-policy", "We cache rendered pages for five minutes.")

    response = member.client.post(member.url("memories/cache-policy/archive/"), body, format="json")

    assert response.status_code == 400
    assert set(response.json()) >= {"error", "detail"}


def test_an_expected_version_that_moved_on_is_409(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    first = save(member, "cache-policy", "We cache rendered pages for five minutes.")
    save(member, "cache-policy", "We cache rendered pages for ten minutes.", supersede_reason="longer")

    response = member.client.post(
        member.url("memories/cache-policy/archive/"), {"expected_version": first["id"]}, format="json"
    )

    assert response.status_code == 409 and response.json()["error"] == "stale_version"


def test_the_database_refuses_an_active_or_deleted_archived_row(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    saved = save(member, "cache-policy", "We cache rendered pages for five minutes.")

    with operator_view(), pytest.raises(IntegrityError), transaction.atomic():
        Memory.objects.filter(id=saved["id"]).update(archived_at="2026-01-01T00:00:00Z")


def test_archive_service_names_a_missing_key(member: Agent) -> None:
    with pytest.raises(MemoryNotFound):
        writes.archive_memory(team=member.team, key="never-saved", archived_by="test")
