"""A supersede may name the version it was based on
(`expected_version` or `If-Match`), and a key's history comes a page at a time."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from memories.models import Memory
from tests.conftest import Agent, operator_view

Save = Any


def _post(agent: Agent, body: dict[str, Any], **headers: str) -> Any:
    return agent.client.post(agent.url("memories/"), body, format="json", **headers)


def _active(agent: Agent, key: str) -> str:
    with operator_view():
        return Memory.objects.get(team=agent.team, key=key, is_active=True).content


# --- expected_version / If-Match -------------------------------------------------------------------


def test_get_of_a_key_answers_the_active_version_as_etag(member: Agent, save: Save) -> None:
    first = save(member, "k", "one")

    response = member.client.get(member.url("memories/k/"))

    assert response["ETag"] == f'"{first["id"]}"'


def test_supersede_with_the_current_expected_version_saves(member: Agent, save: Save) -> None:
    first = save(member, "k", "one")

    response = _post(
        member, {"key": "k", "content": "two", "supersede_reason": "r", "expected_version": first["id"]}
    )

    assert response.status_code == 201
    assert response.json()["supersedes_id"] == first["id"]
    assert _active(member, "k") == "two"


def test_supersede_with_a_stale_expected_version_is_409_with_the_current_entry(
    member: Agent, save: Save
) -> None:
    first = save(member, "k", "one")
    save(member, "k", "two", supersede_reason="someone else")

    response = _post(
        member, {"key": "k", "content": "mine", "supersede_reason": "r", "expected_version": first["id"]}
    )

    assert response.status_code == 409
    body = response.json()
    assert body["error"] == "stale_version"
    assert body["current"]["content"] == "two"
    assert _active(member, "k") == "two"


def test_if_match_header_is_the_same_check(member: Agent, save: Save) -> None:
    first = save(member, "k", "one")
    save(member, "k", "two", supersede_reason="someone else")
    body = {"key": "k", "content": "mine", "supersede_reason": "r"}

    stale = _post(member, body, HTTP_IF_MATCH=f'"{first["id"]}"')
    etag = member.client.get(member.url("memories/k/"))["ETag"]
    fresh = _post(member, body, HTTP_IF_MATCH=etag)

    assert stale.status_code == 409 and stale.json()["error"] == "stale_version"
    assert fresh.status_code == 201
    assert _active(member, "k") == "mine"


def test_expected_version_of_a_key_without_active_entry_is_stale(member: Agent) -> None:
    response = _post(member, {"key": "new", "content": "x", "expected_version": str(uuid.uuid4())})

    assert response.status_code == 409 and response.json()["error"] == "stale_version"
    assert response.json()["current"] is None
    with operator_view():
        assert not Memory.objects.filter(key="new").exists()


@pytest.mark.parametrize(
    ("headers", "extra"),
    [
        ({"HTTP_IF_MATCH": "not-a-uuid"}, {}),
        ({"HTTP_IF_MATCH": "*"}, {}),
        ({"HTTP_IF_MATCH": f'W/"{uuid.uuid4()}"'}, {}),
        ({"HTTP_IF_MATCH": "x" * 10_000}, {}),
        ({"HTTP_IF_MATCH": f'"{uuid.uuid4()}"'}, {"expected_version": str(uuid.uuid4())}),
        ({}, {"expected_version": "nope"}),
        ({}, {"expected_version": 12}),
    ],
)
def test_malformed_or_disagreeing_versions_are_400(
    member: Agent, save: Save, headers: dict[str, str], extra: dict[str, Any]
) -> None:
    save(member, "k", "one")

    response = _post(member, {"key": "k", "content": "two", "supersede_reason": "r", **extra}, **headers)

    assert response.status_code == 400
    assert response.json()["error"] == "invalid"
    assert _active(member, "k") == "one"


def test_expected_version_against_another_team_is_404_with_nothing_of_it(
    member: Agent, outsider: Agent, save: Save
) -> None:
    first = save(member, "k", "alpha's secret plan")

    response = _post(
        outsider,
        {"key": "k", "content": "x", "supersede_reason": "r", "expected_version": first["id"]},
    )
    across = outsider.client.post(
        member.url("memories/"), {"key": "k", "content": "x", "expected_version": first["id"]}, format="json"
    )

    # In its own team the key has no active entry: stale, and nothing of alpha in the body.
    assert response.status_code == 409 and response.json()["current"] is None
    assert b"secret plan" not in response.content
    assert across.status_code == 404
    assert b"secret plan" not in across.content and first["id"].encode() not in across.content


# --- history pages ----------------------------------------------------------------------------------


@pytest.fixture
def long_history(member: Agent, save: Save) -> list[str]:
    """v0..v4 under one key, with a deletion between v2 and v3."""
    save(member, "k", "v0")
    save(member, "k", "v1", supersede_reason="r1")
    save(member, "k", "v2", supersede_reason="r2")
    assert member.client.delete(member.url("memories/k/")).status_code == 204
    save(member, "k", "v3")
    save(member, "k", "v4", supersede_reason="r4")
    return ["v4", "v3", "v2", "v2", "v1", "v0"]  # the deleted version brings two events


def _walk(agent: Agent, url: str, **params: Any) -> list[dict[str, Any]]:
    pages = []
    response = agent.client.get(url, params)
    while True:
        assert response.status_code == 200, response.content
        pages.append(response.json())
        if pages[-1]["next"] is None:
            return pages
        response = agent.client.get(pages[-1]["next"])


def test_history_without_paging_parameters_keeps_its_shape(member: Agent, long_history: list[str]) -> None:
    body = member.client.get(member.url("memories/k/history/")).json()

    assert body["key"] == "k" and body["next"] is None and body["previous"] is None
    assert [e["memory"]["content"] for e in body["history"]] == long_history
    assert [e["kind"] for e in body["history"]] == ["hard", "created", "deleted", "hard", "hard", "created"]


def test_history_pages_cover_every_event_once_in_order(member: Agent, long_history: list[str]) -> None:
    pages = _walk(member, member.url("memories/k/history/"), limit=2)

    assert [len({e["memory"]["id"] for e in p["history"]}) for p in pages] == [2, 2, 1]
    contents = [e["memory"]["content"] for p in pages for e in p["history"]]
    assert contents == long_history
    assert all(p["key"] == "k" for p in pages)
    back = member.client.get(pages[-1]["previous"]).json()
    assert [e["memory"]["content"] for e in back["history"]] == ["v2", "v2", "v1"]


@pytest.mark.parametrize("params", [{"limit": "0"}, {"limit": "201"}, {"limit": "x"}, {"cursor": "garbage"}])
def test_history_refuses_bad_paging_parameters(
    member: Agent, long_history: list[str], params: dict[str, str]
) -> None:
    response = member.client.get(member.url("memories/k/history/"), params)

    assert response.status_code == 400
    assert response.json()["error"] == "invalid"


def test_history_of_another_team_is_404_even_with_a_valid_cursor(
    member: Agent, outsider: Agent, long_history: list[str]
) -> None:
    cursor_link = member.client.get(member.url("memories/k/history/"), {"limit": 2}).json()["next"]
    cursor = cursor_link.split("cursor=")[1].split("&")[0]

    across = outsider.client.get(member.url("memories/k/history/"), {"cursor": cursor, "limit": 2})
    own = outsider.client.get(outsider.url("memories/k/history/"), {"cursor": cursor, "limit": 2})

    assert across.status_code == 404 and own.status_code == 404
    for response in (across, own):
        assert b"v1" not in response.content and b"writer-bot" not in response.content
