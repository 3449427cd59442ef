from __future__ import annotations

from memories.models import Memory
from tests.conftest import Agent, operator_view


def post(agent: Agent, body: dict[str, object], **headers: str):  # type: ignore[no-untyped-def]
    return agent.client.post(agent.url("memories/"), body, format="json", **headers)


def test_create_returns_201_with_the_entry(member: Agent) -> None:
    response = post(
        member, {"key": "deploy-friday", "content": "Never deploy on Fridays.", "type": "warning"}
    )

    assert response.status_code == 201
    body = response.json()
    expected_fields = {
        "id", "key", "content", "type", "project", "metadata", "is_active", "supersedes_id",
        "supersede_reason", "updated_by", "created_at", "updated_at", "index_state",
    }  # fmt: skip
    assert expected_fields <= set(body)
    assert body["type"] == "lesson"
    assert body["is_active"] is True
    assert body["updated_by"] == "writer-bot"
    with operator_view():
        assert Memory.objects.get(id=body["id"]).content == "Never deploy on Fridays."


def test_create_conflict_answers_409_with_current_entry(member: Agent) -> None:
    first = post(member, {"key": "k", "content": "one"}).json()

    response = post(member, {"key": "k", "content": "two"})

    assert response.status_code == 409
    body = response.json()
    assert body["error"] == "conflict"
    assert body["current"]["id"] == first["id"]
    assert body["current"]["content"] == "one"
    with operator_view():
        assert Memory.objects.filter(team=member.team, key="k").count() == 1


def test_supersede_through_the_api(member: Agent) -> None:
    first = post(member, {"key": "k", "content": "one"}).json()

    response = post(member, {"key": "k", "content": "two", "supersede_reason": "changed"})

    assert response.status_code == 201
    body = response.json()
    assert (body["content"], body["is_active"], body["supersede_reason"]) == ("two", True, "changed")
    assert body["supersedes_id"] == first["id"]
    assert body["supersede_kind"] == "hard"
    with operator_view():
        old, new = Memory.objects.filter(team=member.team, key="k").order_by("created_at")
    assert (old.content, old.is_active, old.deleted_at) == ("one", False, None)
    assert (str(new.id), new.content, new.is_active, new.supersedes_id) == (body["id"], "two", True, old.id)


def test_session_header_is_recorded_in_updated_by(member: Agent) -> None:
    response = post(member, {"key": "k", "content": "one"}, HTTP_X_MEMORYHUB_SESSION="sess-42")

    assert response.status_code == 201
    assert response.json()["updated_by"] == "writer-bot/sess-42"
    with operator_view():
        assert Memory.objects.get(team=member.team, key="k").updated_by == "writer-bot/sess-42"


def test_hint_and_redactions_are_in_the_response(member: Agent) -> None:
    response = post(member, {"key": "k", "content": "Always pin versions. ghp_" + "a" * 36})

    assert response.status_code == 201
    body = response.json()
    assert body["hint"]["suggested_type"] == "lesson"
    assert body["redactions"] == [{"kind": "github_token", "count": 1}]
    assert "ghp_" not in body["content"] and body["content"].startswith("Always pin versions. ")
    with operator_view():
        stored = Memory.objects.get(team=member.team, key="k")
    assert stored.content == body["content"] and "a" * 36 not in stored.content


def test_list_returns_active_entries_filtered_and_paginated(member: Agent) -> None:
    post(member, {"key": "a", "content": "alpha", "type": "lesson", "project": "web"})
    post(member, {"key": "b", "content": "bravo", "type": "decision", "project": "web"})
    post(member, {"key": "c", "content": "charlie", "type": "lesson", "project": "api"})
    post(member, {"key": "a", "content": "alpha 2", "supersede_reason": "update"})

    everything = member.client.get(member.url("memories/")).json()
    lessons = member.client.get(member.url("memories/"), {"type": "warning"}).json()
    web = member.client.get(member.url("memories/"), {"project": "web"}).json()
    first_page = member.client.get(member.url("memories/"), {"limit": 2}).json()
    second_page = member.client.get(first_page["next"]).json()

    assert [m["key"] for m in everything["results"]] == ["a", "c", "b"]
    assert [m["content"] for m in lessons["results"]] == ["alpha 2", "charlie"]
    assert {m["key"] for m in web["results"]} == {"a", "b"}
    assert len(first_page["results"]) == 2 and second_page["next"] is None
    assert [m["key"] for m in first_page["results"] + second_page["results"]] == ["a", "c", "b"]


def test_list_runs_a_fixed_number_of_queries(member: Agent, django_assert_max_num_queries) -> None:  # type: ignore[no-untyped-def]
    for i in range(30):
        post(member, {"key": f"k{i}", "content": f"note {i}"})

    with django_assert_max_num_queries(12):
        response = member.client.get(member.url("memories/"))

    assert response.status_code == 200
    assert {(m["key"], m["content"]) for m in response.json()["results"]} == {
        (f"k{i}", f"note {i}") for i in range(30)
    }


def test_retrieve_returns_the_active_entry(member: Agent) -> None:
    first = post(member, {"key": "k", "content": "one"}).json()
    second = post(member, {"key": "k", "content": "two", "supersede_reason": "update"}).json()

    response = member.client.get(member.url("memories/k/"))

    assert response.status_code == 200
    body = response.json()
    assert (body["id"], body["content"], body["is_active"]) == (second["id"], "two", True)
    assert body["supersedes_id"] == first["id"]


def test_retrieve_reads_a_long_text_a_slice_at_a_time(member: Agent) -> None:
    post(member, {"key": "runbook", "content": "".join(f"line {n}\n" for n in range(1, 8))})

    part = member.client.get(member.url("memories/runbook/"), {"from_line": 3, "lines": 2}).json()
    whole = member.client.get(member.url("memories/runbook/")).json()
    past = member.client.get(member.url("memories/runbook/"), {"from_line": 9})

    assert part["content"] == "line 3\nline 4\n"
    assert (part["from_line"], part["to_line"], part["total_lines"], part["has_more"]) == (3, 4, 7, True)
    assert (whole["from_line"], whole["to_line"], whole["has_more"]) == (1, 7, False)
    assert whole["content"].count("\n") == 7
    assert past.status_code == 400 and "from_line" in past.json()["fields"]


def test_keys_with_dots_and_colons_route(member: Agent) -> None:
    saved = post(member, {"key": "learn:deploy.v2:ab12@x", "content": "one"}).json()

    response = member.client.get(member.url("memories/learn:deploy.v2:ab12@x/"))

    assert response.status_code == 200
    assert (response.json()["id"], response.json()["key"]) == (saved["id"], "learn:deploy.v2:ab12@x")


def test_history_shows_the_whole_chain(member: Agent) -> None:
    post(member, {"key": "k", "content": "one"})
    post(member, {"key": "k", "content": "two", "supersede_reason": "new facts"})
    member.client.delete(member.url("memories/k/"))

    response = member.client.get(member.url("memories/k/history/"))

    assert response.status_code == 200
    history = response.json()["history"]
    assert [(e["kind"], e["reason"], e["by"]) for e in history] == [
        ("deleted", "", "writer-bot"),
        ("hard", "new facts", "writer-bot"),
        ("created", "", "writer-bot"),
    ]
    assert [e["memory"]["content"] for e in history] == ["two", "two", "one"]


def test_delete_is_soft_and_answers_204(member: Agent) -> None:
    post(member, {"key": "k", "content": "one"})

    response = member.client.delete(member.url("memories/k/"))

    assert response.status_code == 204 and response.content == b""
    read = member.client.get(member.url("memories/k/"))
    again = member.client.delete(member.url("memories/k/"))
    assert (read.status_code, read.json()["error"]) == (404, "not_found")
    assert again.status_code == 404
    assert again.json() == {"error": "not_found", "detail": "no active memory under this key"}
    with operator_view():
        row = Memory.objects.get(team=member.team, key="k")
    assert row.deleted_at is not None and not row.is_active
    assert (row.deleted_by, row.content) == ("writer-bot", "one")


def test_read_only_token_can_read_but_not_write(member: Agent, readonly_member: Agent) -> None:
    saved = post(member, {"key": "k", "content": "one"}).json()

    read = readonly_member.client.get(readonly_member.url("memories/k/"))
    assert read.status_code == 200
    assert (read.json()["id"], read.json()["content"]) == (saved["id"], "one")
    refused = {"error": "forbidden", "detail": "this token lacks the 'write' scope"}
    response = post(readonly_member, {"key": "k2", "content": "two"})
    assert response.status_code == 403
    assert response.json() == refused
    deleted = readonly_member.client.delete(readonly_member.url("memories/k/"))
    assert deleted.status_code == 403 and deleted.json() == refused
    with operator_view():
        assert list(
            Memory.objects.filter(team=member.team).values_list("key", "is_active", "deleted_at")
        ) == [("k", True, None)]
