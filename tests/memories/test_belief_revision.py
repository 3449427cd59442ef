"""Belief revision: unsupersede (restore the previous version without rewriting history),
what the team believed at a time (`as_of`), and reading a superseded version by id."""

from __future__ import annotations

import threading
import uuid
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext
from django.utils.dateparse import parse_datetime
from rest_framework.test import APIClient

from memories.models import Memory
from search.models import Chunk
from tests.conftest import Agent, operator_view


def unsupersede(agent: Agent, key: str, body: Any = None) -> Any:
    payload = {"reason": "the old value was right"} if body is None else body
    return agent.client.post(agent.url(f"memories/{key}/unsupersede/"), payload, format="json")


def get(agent: Agent, path: str, **params: str) -> Any:
    return agent.client.get(agent.url(path), params)


def at(value: str | datetime, shift_us: int = 0) -> str:
    moment = parse_datetime(value) if isinstance(value, str) else value
    assert moment is not None
    return (moment + timedelta(microseconds=shift_us)).isoformat()


@pytest.fixture
def chain(member: Agent, save) -> dict[str, dict[str, Any]]:  # type: ignore[no-untyped-def]
    """db-host: v1 (lesson, project ops, metadata), then v2 replacing it."""
    v1 = save(
        member,
        "db-host",
        "The primary database is db-1.internal.",
        type="lesson",
        project="ops",
        metadata={"source": "runbook"},
    )
    v2 = save(
        member,
        "db-host",
        "The primary database moved to db-2.internal.",
        type="decision",
        metadata={"source": "chat"},
        supersede_reason="failover to db-2",
    )
    return {"v1": v1, "v2": v2}


# --- unsupersede ---------------------------------------------------------------------


def test_unsupersede_restores_the_previous_version_as_a_new_active_row(
    member: Agent, chain: dict[str, dict[str, Any]]
) -> None:
    v1, v2 = chain["v1"], chain["v2"]

    response = unsupersede(member, "db-host", {"reason": "failover was rolled back"})

    assert response.status_code == 201, response.content
    body = response.json()
    assert body["id"] not in (v1["id"], v2["id"])
    assert body["content"] == "The primary database is db-1.internal."
    assert (body["type"], body["project"], body["metadata"]) == ("lesson", "ops", {"source": "runbook"})
    assert body["is_active"] is True and body["state"] == "active"
    assert body["supersedes_id"] == v2["id"]
    assert body["restored_from_id"] == v1["id"]
    assert body["supersede_kind"] == "unsupersede"
    assert body["supersede_reason"] == "failover was rolled back"
    assert body["updated_by"] == "writer-bot"
    assert get(member, "memories/db-host/").json()["id"] == body["id"]


def test_unsupersede_never_rewrites_earlier_versions(member: Agent, chain: dict[str, dict[str, Any]]) -> None:
    with operator_view():
        before = {m.id: (m.content, m.supersede_reason, m.created_at) for m in Memory.objects.all()}

    unsupersede(member, "db-host")

    with operator_view():
        rows = {m.id: m for m in Memory.objects.filter(key="db-host")}
    assert len(rows) == 3
    for memory_id, (content, reason, created_at) in before.items():
        row = rows[memory_id]
        assert (row.content, row.supersede_reason, row.created_at) == (content, reason, created_at)
        assert row.is_active is False and row.deleted_at is None


def test_unsupersede_is_an_event_in_the_history_with_reason_who_and_when(
    member: Agent, chain: dict[str, dict[str, Any]]
) -> None:
    restored = unsupersede(member, "db-host", {"reason": "failover was rolled back"}).json()

    history = get(member, "memories/db-host/history/").json()["history"]

    assert [event["kind"] for event in history] == ["unsupersede", "hard", "created"]
    event = history[0]
    assert event["reason"] == "failover was rolled back"
    assert event["by"] == "writer-bot"
    assert event["at"] == restored["created_at"]
    assert event["memory"]["restored_from_id"] == chain["v1"]["id"]
    # The replaced versions say where the truth moved to.
    assert history[1]["memory"]["superseded_by"]["id"] == restored["id"]
    assert history[1]["memory"]["superseded_by"]["kind"] == "unsupersede"
    assert history[2]["memory"]["superseded_by"]["id"] == chain["v2"]["id"]
    assert event["memory"]["superseded_by"] is None


def test_unsupersede_twice_brings_back_what_the_first_one_undid(
    member: Agent, chain: dict[str, dict[str, Any]]
) -> None:
    first = unsupersede(member, "db-host").json()

    second = unsupersede(member, "db-host", {"reason": "no, the failover stands"})

    assert second.status_code == 201
    assert second.json()["content"] == "The primary database moved to db-2.internal."
    assert second.json()["restored_from_id"] == chain["v2"]["id"]
    assert second.json()["supersedes_id"] == first["id"]


def test_unsupersede_is_indexed_and_found_by_search(
    member: Agent, chain: dict[str, dict[str, Any]], django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        restored = unsupersede(member, "db-host").json()

    assert len(callbacks) == 1
    with operator_view():
        assert Memory.objects.get(id=restored["id"]).index_state == "indexed"
        assert Chunk.objects.filter(memory_id=restored["id"]).exists()
    results = member.client.post(
        member.url("search/"), {"query": "primary database db-1", "include_superseded": False}, format="json"
    ).json()["results"]
    assert [r["id"] for r in results] == [restored["id"]]


def test_unsupersede_with_no_previous_version_answers_409_and_changes_nothing(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    only = save(member, "solo", "Only one version.")

    response = unsupersede(member, "solo")

    assert response.status_code == 409
    body = response.json()
    assert body["error"] == "no_previous_version"
    assert "no previous version" in body["detail"]
    assert body["current"]["id"] == only["id"]
    with operator_view():
        rows = list(Memory.objects.filter(key="solo").values_list("id", "is_active"))
    assert rows == [(uuid.UUID(only["id"]), True)]


def test_unsupersede_of_a_deleted_key_answers_404(member: Agent, chain: dict[str, dict[str, Any]]) -> None:
    assert member.client.delete(member.url("memories/db-host/")).status_code == 204

    response = unsupersede(member, "db-host")

    assert response.status_code == 404
    assert response.json()["error"] == "not_found"
    assert "deleted" in response.json()["detail"]
    with operator_view():
        assert not Memory.objects.filter(key="db-host", is_active=True).exists()
        assert Memory.objects.filter(key="db-host").count() == 2


def test_unsupersede_of_an_unknown_key_answers_404(member: Agent) -> None:
    response = unsupersede(member, "never-saved")

    assert response.status_code == 404
    assert response.json() == {"error": "not_found", "detail": "no memory under this key"}


@pytest.mark.parametrize(
    "body",
    [{}, {"reason": ""}, {"reason": "   "}, {"reason": None}, {"reason": 5}, {"reason": "x" * 2001}],
)
def test_unsupersede_needs_a_reason_of_at_most_2000_characters(
    member: Agent, chain: dict[str, dict[str, Any]], body: dict[str, Any]
) -> None:
    response = unsupersede(member, "db-host", body)

    assert response.status_code == 400, response.content
    assert "reason" in response.json()["fields"]
    assert get(member, "memories/db-host/").json()["id"] == chain["v2"]["id"]


def test_unsupersede_rejects_unknown_fields(member: Agent, chain: dict[str, dict[str, Any]]) -> None:
    response = unsupersede(member, "db-host", {"reason": "ok", "version": chain["v1"]["id"]})

    assert response.status_code == 400
    assert response.json()["fields"] == {"version": ["unknown field"]}


def test_unsupersede_needs_the_write_scope(readonly_member: Agent, chain: dict[str, dict[str, Any]]) -> None:
    response = unsupersede(readonly_member, "db-host")

    assert response.status_code == 403
    with operator_view():
        assert Memory.objects.filter(key="db-host").count() == 2


def test_unsupersede_carries_votes_of_the_restored_version_but_not_its_reads(
    member: Agent, chain: dict[str, dict[str, Any]]
) -> None:
    with operator_view():
        Memory.objects.filter(id=chain["v1"]["id"]).update(upvotes=3, downvotes=1, access_count=9)

    body = unsupersede(member, "db-host").json()

    assert (body["upvotes"], body["downvotes"], body["rating"]) == (3, 1, 2)
    assert body["access_count"] == 0


# --- as_of -----------------------------------------------------------------------------


def test_as_of_answers_the_version_active_at_each_moment(
    member: Agent, chain: dict[str, dict[str, Any]]
) -> None:
    v1, v2 = chain["v1"], chain["v2"]
    v3 = unsupersede(member, "db-host").json()

    def content_at(moment: str) -> tuple[int, str | None]:
        response = get(member, "memories/db-host/", as_of=moment)
        return response.status_code, response.json().get("id")

    assert content_at(at(v1["created_at"], -1)) == (404, None)
    assert content_at(at(v1["created_at"])) == (200, v1["id"])
    assert content_at(at(v2["created_at"], -1)) == (200, v1["id"])
    assert content_at(at(v2["created_at"])) == (200, v2["id"])
    assert content_at(at(v3["created_at"], -1)) == (200, v2["id"])
    assert content_at(at(v3["created_at"])) == (200, v3["id"])
    assert content_at("2999-01-01T00:00:00Z") == (200, v3["id"])


def test_as_of_a_superseded_version_says_where_the_truth_moved_to(
    member: Agent, chain: dict[str, dict[str, Any]]
) -> None:
    response = get(member, "memories/db-host/", as_of=at(chain["v2"]["created_at"], -1))

    body = response.json()
    assert body["content"] == "The primary database is db-1.internal."
    assert body["state"] == "superseded"
    assert body["superseded_by"] == {
        "id": chain["v2"]["id"],
        "key": "db-host",
        "reason": "failover to db-2",
        "kind": "hard",
        "is_active": True,
    }


def test_as_of_shows_a_deleted_entry_before_its_deletion_and_never_after(
    member: Agent, chain: dict[str, dict[str, Any]], save
) -> None:  # type: ignore[no-untyped-def]
    assert member.client.delete(member.url("memories/db-host/")).status_code == 204
    with operator_view():
        deleted_at = Memory.objects.get(id=chain["v2"]["id"]).deleted_at
    again = save(member, "db-host", "Rebuilt: the database is db-9.internal.")

    before = get(member, "memories/db-host/", as_of=at(deleted_at, -1))
    gap = get(member, "memories/db-host/", as_of=at(deleted_at))
    later = get(member, "memories/db-host/", as_of=at(again["created_at"]))

    assert before.status_code == 200
    assert before.json()["id"] == chain["v2"]["id"] and before.json()["state"] == "deleted"
    assert gap.status_code == 404
    assert b"db-2" not in gap.content and b"db-1" not in gap.content
    assert later.json()["id"] == again["id"]


def test_list_as_of_answers_what_the_team_believed_then(
    member: Agent, chain: dict[str, dict[str, Any]], save
) -> None:  # type: ignore[no-untyped-def]
    other = save(member, "cache", "Redis holds sessions.")
    assert member.client.delete(member.url("memories/cache/")).status_code == 204
    with operator_view():
        cache_deleted_at = Memory.objects.get(id=other["id"]).deleted_at

    def listed(moment: str) -> list[tuple[str, str]]:
        response = get(member, "memories/", as_of=moment)
        assert response.status_code == 200, response.content
        return [(m["key"], m["id"]) for m in response.json()["results"]]

    assert listed(at(chain["v1"]["created_at"], -1)) == []
    assert listed(at(chain["v2"]["created_at"], -1)) == [("db-host", chain["v1"]["id"])]
    assert listed(at(cache_deleted_at, -1)) == [("cache", other["id"]), ("db-host", chain["v2"]["id"])]
    assert listed(at(cache_deleted_at)) == [("db-host", chain["v2"]["id"])]
    first_page = get(member, "memories/", as_of=at(chain["v2"]["created_at"], -1)).json()
    assert first_page["results"][0]["superseded_by"]["id"] == chain["v2"]["id"]


def test_list_as_of_keeps_its_filters(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    save(member, "a", "alpha", type="lesson", project="web")
    save(member, "b", "bravo", type="decision", project="web")
    now = get(member, "memories/").json()["results"][0]["created_at"]

    lessons = get(member, "memories/", as_of=at(now), type="warning").json()["results"]
    web = get(member, "memories/", as_of=at(now), project="web").json()["results"]

    assert [m["key"] for m in lessons] == ["a"]
    assert {m["key"] for m in web} == {"a", "b"}


def test_list_as_of_costs_the_same_queries_for_many_keys(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    def queries_for_list() -> int:
        moment = "2999-01-01T00:00:00Z"
        with CaptureQueriesContext(connection) as captured:
            response = get(member, "memories/", as_of=moment)
        assert response.status_code == 200
        return len(captured.captured_queries)

    for n in range(2):
        save(member, f"k{n}", f"first {n}")
        save(member, f"k{n}", f"second {n}", supersede_reason="r")
    few = queries_for_list()
    for n in range(2, 8):
        save(member, f"k{n}", f"first {n}")
        save(member, f"k{n}", f"second {n}", supersede_reason="r")
    many = queries_for_list()

    assert few == many


@pytest.mark.parametrize(
    "value",
    [
        "yesterday",
        "2026-01-01",
        "2026-01-01T00:00:00",  # no time zone
        "2026-13-01T00:00:00Z",
        "2026-01-01T00:00:00+25:00",
        "0001-01-01T00:00:00+05:00",  # before the first representable UTC instant
        "x" * 100,
    ],
)
@pytest.mark.parametrize("path", ["memories/db-host/", "memories/"])
def test_bad_as_of_answers_400_naming_the_parameter(
    member: Agent, chain: dict[str, dict[str, Any]], value: str, path: str
) -> None:
    response = get(member, path, as_of=value)

    assert response.status_code == 400, (value, response.content)
    assert set(response.json()["fields"]) == {"as_of"}


def test_as_of_offsets_are_honoured_and_an_unencoded_plus_is_understood(
    member: Agent, chain: dict[str, dict[str, Any]]
) -> None:
    v2_created = parse_datetime(chain["v2"]["created_at"])
    assert v2_created is not None
    just_before_in_paris = (v2_created - timedelta(microseconds=1)).astimezone(ZoneInfo("Europe/Paris"))
    text = just_before_in_paris.isoformat()
    assert "+" in text

    encoded = get(member, "memories/db-host/", as_of=text)
    # A client that forgot to encode '+' sends a space.
    raw = member.client.get(member.url(f"memories/db-host/?as_of={text}"))

    assert encoded.json()["id"] == chain["v1"]["id"]
    assert raw.status_code == 200 and raw.json()["id"] == chain["v1"]["id"]


# --- one version by id -------------------------------------------------------------------


def test_a_superseded_version_by_id_says_where_the_truth_moved_to(
    member: Agent, chain: dict[str, dict[str, Any]]
) -> None:
    response = get(member, f"memories/db-host/versions/{chain['v1']['id']}/")

    assert response.status_code == 200
    body = response.json()
    assert body["content"] == "The primary database is db-1.internal."
    assert body["state"] == "superseded"
    assert body["superseded_by"]["id"] == chain["v2"]["id"]
    assert body["superseded_by"]["reason"] == "failover to db-2"
    assert body["annotations"] == []


def test_the_active_version_by_id_has_no_successor(member: Agent, chain: dict[str, dict[str, Any]]) -> None:
    body = get(member, f"memories/db-host/versions/{chain['v2']['id']}/").json()

    assert body["state"] == "active" and body["superseded_by"] is None


def test_a_version_is_found_only_under_its_own_key(
    member: Agent, chain: dict[str, dict[str, Any]], save
) -> None:  # type: ignore[no-untyped-def]
    save(member, "other", "Another key.")

    assert get(member, f"memories/other/versions/{chain['v1']['id']}/").status_code == 404
    assert get(member, "memories/db-host/versions/6d1c2f1e-0000-4000-8000-000000000000/").status_code == 404
    malformed = get(member, "memories/db-host/versions/not-a-uuid/")
    assert malformed.status_code == 400
    assert set(malformed.json()["fields"]) == {"version_id"}


# --- isolation -----------------------------------------------------------------------------


def test_other_team_cannot_read_versions_as_of_or_unsupersede_this_teams_keys(
    member: Agent, outsider: Agent, chain: dict[str, dict[str, Any]]
) -> None:
    v1_id = chain["v1"]["id"]
    responses = [
        # Alpha's URLs with bravo's token.
        outsider.client.get(member.url("memories/db-host/"), {"as_of": "2999-01-01T00:00:00Z"}),
        outsider.client.get(member.url("memories/"), {"as_of": "2999-01-01T00:00:00Z"}),
        outsider.client.get(member.url(f"memories/db-host/versions/{v1_id}/")),
        outsider.client.post(member.url("memories/db-host/unsupersede/"), {"reason": "x"}, format="json"),
        # Alpha's key and version id under bravo's own URL.
        outsider.client.get(outsider.url("memories/db-host/"), {"as_of": "2999-01-01T00:00:00Z"}),
        outsider.client.get(outsider.url(f"memories/db-host/versions/{v1_id}/")),
        outsider.client.post(outsider.url("memories/db-host/unsupersede/"), {"reason": "x"}, format="json"),
    ]

    for response in responses:
        assert response.status_code == 404, response.content
        for marker in (b"db-1", b"db-2", b"alpha", b"runbook", v1_id.encode()):
            assert marker not in response.content
    own_list = outsider.client.get(outsider.url("memories/"), {"as_of": "2999-01-01T00:00:00Z"})
    assert own_list.status_code == 200 and own_list.json()["results"] == []
    with operator_view():
        assert Memory.objects.filter(key="db-host").count() == 2
        assert Memory.objects.get(id=chain["v2"]["id"]).is_active


# --- concurrency -----------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_concurrent_saves_unsupersedes_rates_and_reads_of_one_key_keep_one_unbroken_chain(
    member: Agent,
) -> None:
    """Unsupersede takes the same per-(team, key) lock as save: mixed concurrent writers
    leave one active entry, a chain with no forks, and every restore a true copy."""
    member.client.post(member.url("memories/"), {"key": "shared", "content": "version 0"}, format="json")
    member.client.post(
        member.url("memories/"),
        {"key": "shared", "content": "version 1", "supersede_reason": "r"},
        format="json",
    )
    calls: list[tuple[str, str, dict[str, Any] | None]] = []
    for i in range(6):
        calls.append(
            ("post", "memories/", {"key": "shared", "content": f"v{i + 2}", "supersede_reason": "r"})
        )
        calls.append(("post", "memories/shared/unsupersede/", {"reason": f"undo {i}"}))
    calls += [("post", "memories/shared/rate/", {"direction": "up"})] * 3
    calls += [("get", "memories/shared/", None)] * 3
    barrier = threading.Barrier(len(calls))
    statuses = [0] * len(calls)

    def worker(index: int) -> None:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {member.token}")
        method, path, body = calls[index]
        try:
            barrier.wait(timeout=30)
            statuses[index] = getattr(client, method)(member.url(path), body, format="json").status_code
        finally:
            connections.close_all()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    assert statuses == [201] * 12 + [200] * 6
    with operator_view():
        rows = {m.id: m for m in Memory.objects.filter(key="shared")}
    assert len(rows) == 14
    assert len([m for m in rows.values() if m.is_active]) == 1
    predecessors = [m.supersedes_id for m in rows.values() if m.supersedes_id]
    assert len(predecessors) == len(set(predecessors)) == 13
    for memory in rows.values():
        if memory.supersede_kind == "unsupersede":
            replaced = rows[memory.supersedes_id]
            assert memory.restored_from_id == replaced.supersedes_id
            assert memory.content == rows[memory.restored_from_id].content
