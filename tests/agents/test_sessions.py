"""The agent session registry: boot (with the TTL sweep), heartbeat, update, end, list,
and the same 404 for another team's sessions as for everything else."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agents.models import AgentSession
from agents.sessions import HEARTBEAT_RESOLUTION
from memories import writes
from memories.models import Memory
from teams.scope import team_scope
from teams.services import shutdown_team
from tests.conftest import Agent, operator_view

HEADER = "HTTP_X_MEMORYHUB_SESSION"


def boot(agent: Agent, **body: Any) -> dict[str, Any]:
    response = agent.client.post(agent.url("sessions/"), body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def age(session_id: str, seconds: float) -> None:
    """Pretend the session's last heartbeat was `seconds` ago."""
    with operator_view():
        AgentSession.objects.filter(pk=session_id).update(
            last_heartbeat_at=timezone.now() - timedelta(seconds=seconds)
        )


def heartbeats() -> dict[str, Any]:
    """The last heartbeat of every session of every team, by id."""
    with operator_view():
        return {str(pk): at for pk, at in AgentSession.objects.values_list("pk", "last_heartbeat_at")}


def stored(session_id: str) -> AgentSession:
    with operator_view():
        return AgentSession.objects.select_related("token").get(pk=session_id)


# --- boot -------------------------------------------------------------------


def test_boot_registers_the_session_with_what_the_agent_sent(member: Agent) -> None:
    body = boot(
        member,
        source="claude-code",
        project="api",
        cwd="/home/me/api",
        pid=4242,
        host="laptop",
        current_task="fix the flaky test",
    )

    session = body["session"]
    assert session["status"] == "live" and session["ended_at"] is None
    assert session["agent"] == "writer-bot"
    assert (session["source"], session["project"], session["cwd"], session["pid"], session["host"]) == (
        "claude-code",
        "api",
        "/home/me/api",
        4242,
        "laptop",
    )
    assert body["other_sessions"] == [] and body["expired_sessions"] == 0
    row = stored(session["id"])
    assert row.team_id == member.team.id and row.token.name == "writer-bot"
    assert row.current_task == "fix the flaky test"


def test_boot_with_an_empty_body_is_allowed(member: Agent) -> None:
    session = boot(member)["session"]

    assert session["project"] == "" and session["pid"] is None
    row = stored(session["id"])
    assert (row.team_id, row.agent, row.project, row.pid, row.ended_at) == (
        member.team.id,
        "writer-bot",
        "",
        None,
        None,
    )


def test_boot_lists_other_live_sessions_of_the_same_project_only(member: Agent) -> None:
    first = boot(member, project="api", current_task="one")["session"]
    second = boot(member, project="api", current_task="two")["session"]
    boot(member, project="web")
    ended = boot(member, project="api")["session"]
    member.client.delete(member.url(f"sessions/{ended['id']}/"))

    body = boot(member, project="api")

    others = [s["id"] for s in body["other_sessions"]]
    assert sorted(others) == sorted([first["id"], second["id"]])
    assert body["session"]["id"] not in others
    assert {s["current_task"] for s in body["other_sessions"]} == {"one", "two"}


def test_boot_ends_sessions_that_missed_the_ttl_and_keeps_the_others(member: Agent) -> None:
    stale = boot(member, project="api")["session"]
    fresh = boot(member, project="api")["session"]
    age(stale["id"], 301)
    age(fresh["id"], 200)

    body = boot(member, project="api")

    assert body["expired_sessions"] == 1
    assert [s["id"] for s in body["other_sessions"]] == [fresh["id"]]
    swept = stored(stale["id"])
    assert swept.ended_at is not None and swept.end_reason == "expired"
    assert stored(fresh["id"]).ended_at is None


def test_the_sweep_follows_the_ttl_setting(member: Agent, settings: Any) -> None:
    settings.MEMORYHUB_SESSION_TTL_SECONDS = 60
    session = boot(member)["session"]
    age(session["id"], 90)

    assert boot(member)["expired_sessions"] == 1
    assert stored(session["id"]).end_reason == "expired"


def test_the_sweep_never_touches_another_team(member: Agent, outsider: Agent) -> None:
    theirs = boot(outsider)["session"]
    age(theirs["id"], 10_000)

    assert boot(member)["expired_sessions"] == 0
    assert stored(theirs["id"]).ended_at is None


def test_boot_answers_with_the_injection_block_of_its_project(member: Agent) -> None:
    with team_scope(member.team.id):
        for key, content, project in [
            ("style", "Write short functions.", ""),
            ("api-db", "The api project uses db-2.", "api"),
            ("web-cdn", "The web project uses the CDN.", "web"),
        ]:
            writes.save_memory(team=member.team, key=key, content=content, project=project, updated_by="t")

    injection = boot(member, project="api")["injection"]

    assert "[CONTEXT] [style]: Write short functions." in injection
    assert "[CONTEXT] [api-db]: The api project uses db-2." in injection
    assert "web-cdn" not in injection


def test_boot_still_succeeds_when_the_injection_block_fails(
    member: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(**kwargs: Any) -> Any:
        raise RuntimeError("injection builder is down")

    monkeypatch.setattr("agents.injection.build_injection", broken)

    body = boot(member, project="api")

    assert body["injection"] is None
    assert stored(body["session"]["id"]).project == "api"


@pytest.mark.parametrize(
    "body",
    [
        {"pid": -1},
        {"pid": "42"},
        {"pid": 1.5},
        {"pid": True},
        {"pid": 2**31},
        {"source": 7},
        {"project": None},
        {"project": "p" * 201},
        {"cwd": "/" * 1025},
        {"current_task": ["x"]},
        {"host": "h" * 256},
        {"colour": "blue"},
    ],
)
def test_boot_rejects_badly_typed_or_oversized_input(member: Agent, body: dict[str, Any]) -> None:
    response = member.client.post(member.url("sessions/"), body, format="json")

    assert response.status_code == 400
    assert response.json()["error"] == "invalid"
    assert set(response.json()["fields"]) == set(body)
    with operator_view():
        assert not AgentSession.objects.exists()


def test_a_read_only_token_cannot_boot_but_can_list(member: Agent, readonly_member: Agent) -> None:
    session = boot(member)["session"]

    refused = readonly_member.client.post(readonly_member.url("sessions/"), {}, format="json")
    listed = readonly_member.client.get(readonly_member.url("sessions/"))

    assert refused.status_code == 403
    assert refused.json() == {"error": "forbidden", "detail": "this token lacks the 'write' scope"}
    with operator_view():
        assert [str(pk) for pk in AgentSession.objects.values_list("pk", flat=True)] == [session["id"]]
    assert listed.status_code == 200
    assert [(s["id"], s["agent"]) for s in listed.json()["results"]] == [(session["id"], "writer-bot")]


# --- heartbeat --------------------------------------------------------------


def test_any_request_with_the_session_header_is_a_heartbeat(member: Agent) -> None:
    session = boot(member)["session"]
    age(session["id"], 250)
    before = stored(session["id"]).last_heartbeat_at

    response = member.client.get(member.url("memories/"), **{HEADER: session["id"]})

    assert response.status_code == 200
    after = stored(session["id"]).last_heartbeat_at
    assert after > before and timezone.now() - after < timedelta(seconds=5)


def test_a_heartbeat_keeps_a_session_out_of_the_sweep(member: Agent) -> None:
    session = boot(member)["session"]
    age(session["id"], 299)
    member.client.get(member.url("vault/"), **{HEADER: session["id"]})
    age_now = timezone.now() - stored(session["id"]).last_heartbeat_at
    assert age_now < timedelta(seconds=5)

    assert boot(member)["expired_sessions"] == 0


def test_heartbeats_closer_than_the_resolution_are_not_written(member: Agent) -> None:
    session = boot(member)["session"]
    age(session["id"], HEARTBEAT_RESOLUTION.total_seconds() / 2)
    before = heartbeats()

    response = member.client.get(member.url("memories/"), **{HEADER: session["id"]})

    assert response.status_code == 200 and response.json()["results"] == []
    assert heartbeats() == before


def test_the_header_cannot_refresh_another_teams_session(member: Agent, outsider: Agent) -> None:
    theirs = boot(outsider)["session"]
    ours = boot(member)["session"]
    age(theirs["id"], 250)
    age(ours["id"], 250)
    before = heartbeats()

    response = member.client.get(member.url("memories/"), **{HEADER: theirs["id"]})

    assert response.status_code == 200 and response.json()["results"] == []
    # Neither their session nor any of ours was refreshed.
    assert heartbeats() == before


@pytest.mark.parametrize(
    "value", ["3f1c2b9e-8d4a-4c61-9e2f-5b7a0c8d1e42", "my-own-label", "not a session id!"]
)
def test_unknown_or_non_uuid_session_headers_are_ignored_by_reads(member: Agent, value: str) -> None:
    live = boot(member)["session"]
    age(live["id"], 250)
    before = heartbeats()

    response = member.client.get(member.url("memories/"), **{HEADER: value})

    assert response.status_code == 200 and response.json()["results"] == []
    # Nothing refreshed, and no session made up for the unknown id.
    assert heartbeats() == before


def test_an_ended_session_is_not_revived_by_its_header(member: Agent) -> None:
    session = boot(member)["session"]
    other = boot(member)["session"]
    member.client.delete(member.url(f"sessions/{session['id']}/"))
    age(session["id"], 250)
    age(other["id"], 250)
    before = heartbeats()

    response = member.client.get(member.url("memories/"), **{HEADER: session["id"]})

    assert response.status_code == 200
    assert heartbeats() == before
    row = stored(session["id"])
    assert (row.ended_at is not None, row.end_reason) == (True, "ended")


def test_a_request_that_fails_after_the_scope_check_still_counts_as_a_heartbeat(member: Agent) -> None:
    session = boot(member)["session"]
    age(session["id"], 250)

    response = member.client.get(member.url("memories/no-such-key/"), **{HEADER: session["id"]})

    assert response.status_code == 404 and response.json()["error"] == "not_found"
    assert timezone.now() - stored(session["id"]).last_heartbeat_at < timedelta(seconds=5)


def test_a_request_refused_for_its_scope_is_not_a_heartbeat(member: Agent, readonly_member: Agent) -> None:
    session = boot(member)["session"]
    age(session["id"], 250)
    before = heartbeats()

    response = readonly_member.client.post(
        readonly_member.url("memories/"),
        {"key": "k", "content": "c"},
        format="json",
        **{HEADER: session["id"]},
    )

    assert response.status_code == 403
    assert response.json() == {"error": "forbidden", "detail": "this token lacks the 'write' scope"}
    assert heartbeats() == before
    with operator_view():
        assert not Memory.objects.exists()


def test_the_header_still_names_the_session_in_updated_by(member: Agent) -> None:
    session = boot(member)["session"]

    response = member.client.post(
        member.url("memories/"), {"key": "k", "content": "c"}, format="json", **{HEADER: session["id"]}
    )

    assert response.status_code == 201
    assert response.json()["updated_by"] == f"writer-bot/{session['id']}"
    with operator_view():
        assert Memory.objects.get(team=member.team, key="k").updated_by == f"writer-bot/{session['id']}"


# --- update, end, get, list -------------------------------------------------


def test_patch_changes_the_task_and_project_and_is_a_heartbeat(member: Agent) -> None:
    session = boot(member, project="api", current_task="one")["session"]
    age(session["id"], 250)

    response = member.client.patch(
        member.url(f"sessions/{session['id']}/"), {"current_task": "two", "project": "web"}, format="json"
    )

    assert response.status_code == 200
    assert response.json()["current_task"] == "two" and response.json()["project"] == "web"
    row = stored(session["id"])
    assert (row.current_task, row.project) == ("two", "web")
    assert timezone.now() - row.last_heartbeat_at < timedelta(seconds=5)


def test_patch_with_only_a_task_keeps_the_project(member: Agent) -> None:
    session = boot(member, project="api")["session"]

    response = member.client.patch(
        member.url(f"sessions/{session['id']}/"), {"current_task": "x"}, format="json"
    )

    assert response.status_code == 200
    assert (response.json()["current_task"], response.json()["project"]) == ("x", "api")
    row = stored(session["id"])
    assert (row.current_task, row.project) == ("x", "api")


@pytest.mark.parametrize(
    "body", [{"current_task": 3}, {"pid": 1}, {"project": "p" * 201}, {"current_task": None}]
)
def test_patch_rejects_bad_input(member: Agent, body: dict[str, Any]) -> None:
    session = boot(member, current_task="kept")["session"]

    response = member.client.patch(member.url(f"sessions/{session['id']}/"), body, format="json")

    assert response.status_code == 400
    assert response.json()["error"] == "invalid" and set(response.json()["fields"]) == set(body)
    row = stored(session["id"])
    assert (row.current_task, row.project, row.pid) == ("kept", "", None)


def test_patch_of_an_ended_session_is_a_conflict(member: Agent) -> None:
    session = boot(member)["session"]
    member.client.delete(member.url(f"sessions/{session['id']}/"))

    response = member.client.patch(
        member.url(f"sessions/{session['id']}/"), {"current_task": "x"}, format="json"
    )

    assert response.status_code == 409 and response.json()["error"] == "session_ended"
    assert stored(session["id"]).current_task == ""


def test_delete_ends_the_session_once(member: Agent) -> None:
    session = boot(member)["session"]

    deleted = member.client.delete(member.url(f"sessions/{session['id']}/"))
    assert deleted.status_code == 204 and deleted.content == b""
    first = stored(session["id"])
    assert first.ended_at is not None and first.end_reason == "ended"
    assert member.client.delete(member.url(f"sessions/{session['id']}/")).status_code == 204
    assert stored(session["id"]).ended_at == first.ended_at
    assert member.client.get(member.url("sessions/")).json()["results"] == []
    shown = member.client.get(member.url(f"sessions/{session['id']}/")).json()
    assert shown["status"] == "ended" and shown["end_reason"] == "ended"


def test_list_shows_live_sessions_newest_first_and_filters_by_project(member: Agent) -> None:
    api_one = boot(member, project="api")["session"]
    web = boot(member, project="web")["session"]
    api_two = boot(member, project="api")["session"]
    stale = boot(member, project="api")["session"]
    age(stale["id"], 400)  # not swept yet (no boot since), but not live either

    everything = member.client.get(member.url("sessions/")).json()["results"]
    api = member.client.get(member.url("sessions/"), {"project": "api"}).json()["results"]

    assert [s["id"] for s in everything] == [api_two["id"], web["id"], api_one["id"]]
    assert [s["id"] for s in api] == [api_two["id"], api_one["id"]]
    assert member.client.get(member.url(f"sessions/{stale['id']}/")).json()["status"] == "stale"


def test_list_is_paginated(member: Agent) -> None:
    for _ in range(3):
        boot(member)

    first = member.client.get(member.url("sessions/"), {"limit": 2}).json()
    second = member.client.get(first["next"]).json()

    assert len(first["results"]) == 2 and len(second["results"]) == 1
    assert second["next"] is None
    assert not {s["id"] for s in first["results"]} & {s["id"] for s in second["results"]}


def test_list_reads_in_a_number_of_queries_that_does_not_grow_with_sessions(member: Agent) -> None:
    def queries_for_list() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert member.client.get(member.url("sessions/")).status_code == 200
        return len(captured.captured_queries)

    boot(member)
    with_one = queries_for_list()
    for _ in range(5):
        boot(member)

    assert queries_for_list() == with_one


@pytest.mark.parametrize("method", ["get", "patch", "delete"])
def test_a_malformed_session_id_is_a_400_and_an_unknown_one_a_404(member: Agent, method: str) -> None:
    malformed = getattr(member.client, method)(member.url("sessions/not-a-uuid/"), {}, format="json")
    unknown = getattr(member.client, method)(member.url(f"sessions/{uuid.uuid4()}/"), {}, format="json")

    assert malformed.status_code == 400 and malformed.json()["fields"] == {"id": ["malformed session id"]}
    assert unknown.status_code == 404 and unknown.json() == {
        "error": "not_found",
        "detail": "no such session",
    }


# --- other teams ------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "body"), [("get", None), ("patch", {"current_task": "hijacked"}), ("delete", None)]
)
def test_another_teams_session_id_is_a_404_with_nothing_of_it(
    member: Agent, outsider: Agent, method: str, body: dict[str, Any] | None
) -> None:
    session = boot(member, project="alpha-secret-project", current_task="alpha task", host="alpha-host")[
        "session"
    ]

    for url in (member.url(f"sessions/{session['id']}/"), outsider.url(f"sessions/{session['id']}/")):
        response = getattr(outsider.client, method)(url, body, format="json")
        assert response.status_code == 404
        assert response.json()["error"] == "not_found"
        for marker in (session["id"], "alpha-secret-project", "alpha task", "alpha-host", "writer-bot"):
            assert marker.encode() not in response.content
    row = stored(session["id"])
    assert row.ended_at is None and row.current_task == "alpha task"


def test_another_team_sees_none_of_our_sessions_in_its_list_or_boot(member: Agent, outsider: Agent) -> None:
    ours = boot(member, project="shared-name", current_task="alpha task")["session"]

    listed = outsider.client.get(outsider.url("sessions/"))
    booted = outsider.client.post(outsider.url("sessions/"), {"project": "shared-name"}, format="json")

    assert listed.json()["results"] == []
    assert booted.json()["other_sessions"] == []
    for response in (listed, booted):
        assert ours["id"].encode() not in response.content and b"alpha task" not in response.content


def test_session_rows_are_under_row_level_security(member: Agent, outsider: Agent) -> None:
    boot(member)
    boot(outsider)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relrowsecurity, relforcerowsecurity FROM pg_class WHERE relname = %s",
            ["agents_agentsession"],
        )
        assert cursor.fetchone() == (True, True)
    with team_scope(member.team.id), connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT team_id FROM agents_agentsession")
        assert [row[0] for row in cursor.fetchall()] == [member.team.id]


def test_shutdown_team_deletes_its_sessions_and_counts_them(member: Agent, outsider: Agent) -> None:
    boot(member)
    boot(member)
    theirs = boot(outsider)["session"]

    counts = shutdown_team(team=member.team, actor="test")

    assert counts["sessions"] == 2
    with operator_view():
        assert list(AgentSession.objects.values_list("id", flat=True)) == [uuid.UUID(theirs["id"])]
