"""The daily log: what the team's memory went through on one day (UTC), and which
sessions did it; nothing of another team (the dashboard page: tests/dashboard)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agents import daily_log
from memories.models import Memory
from tests.conftest import Agent, operator_view

HEADER = "HTTP_X_MEMORYHUB_SESSION"


def boot(agent: Agent, **body: Any) -> str:
    response = agent.client.post(agent.url("sessions/"), body, format="json")
    assert response.status_code == 201, response.content
    return str(response.json()["session"]["id"])


def save(agent: Agent, session: str | None = None, **body: Any) -> None:
    headers = {HEADER: session} if session else {}
    response = agent.client.post(agent.url("memories/"), body, format="json", **headers)
    assert response.status_code in (200, 201), response.content


def log(agent: Agent, **params: str) -> dict[str, Any]:
    response = agent.client.get(agent.url("log/"), params)
    assert response.status_code == 200, response.content
    return response.json()


def a_busy_day(member: Agent) -> str:
    session = boot(member, project="api", current_task="tidy the deploy rules")
    save(member, session, key="deploy-friday", content="Never deploy on Fridays.", type="decision")
    save(
        member,
        session,
        key="deploy-friday",
        content="Never deploy on Fridays or before holidays.",
        supersede_reason="holidays too",
    )
    save(member, key="style", content="Write short functions.")  # no session
    confirmed = member.client.post(
        member.url("memories/style/confirm/"), {"note": "still true"}, format="json", **{HEADER: session}
    )
    assert confirmed.status_code == 200, confirmed.content
    extracted = member.client.post(
        member.url("drafts/extract/"),
        {"transcript": "We decided to use Paddle for payments from now on."},
        format="json",
        **{HEADER: session},
    )
    assert extracted.status_code in (200, 201), extracted.content
    return session


def test_the_day_counts_each_kind_and_names_the_session(member: Agent) -> None:
    session = a_busy_day(member)

    body = log(member)

    assert body["date"] == datetime.now(UTC).date().isoformat()
    assert body["counts"]["saved"] == 2 and body["counts"]["superseded"] == 1
    assert body["counts"]["confirmed"] == 1 and body["counts"]["captured"] >= 1
    kinds = [(e["kind"], e["key"]) for e in body["events"]]
    assert kinds[:4] == [
        ("saved", "deploy-friday"),
        ("superseded", "deploy-friday"),
        ("saved", "style"),
        ("confirmed", "style"),
    ]
    assert [e["at"] for e in body["events"]] == sorted(e["at"] for e in body["events"])
    superseded = body["events"][1]
    assert superseded["session"] == session and superseded["detail"] == "holidays too"
    assert superseded["by"] == f"writer-bot/{session}"
    assert body["events"][2]["session"] is None and body["events"][2]["by"] == "writer-bot"
    [listed] = body["sessions"]
    assert listed["id"] == session and listed["current_task"] == "tidy the deploy rules"
    assert listed["events"] == sum(1 for e in body["events"] if e["session"] == session) >= 4
    assert body["truncated"] is False


def test_one_kind_at_a_time_keeps_every_count(member: Agent) -> None:
    a_busy_day(member)

    body = log(member, kind="superseded")

    assert [e["kind"] for e in body["events"]] == ["superseded"]
    assert body["counts"]["saved"] == 2 and body["counts"]["confirmed"] == 1


def test_another_day_holds_only_its_own_events(member: Agent) -> None:
    save(member, key="old", content="Yesterday's rule.")
    save(member, key="new", content="Today's rule.")
    yesterday = datetime.now(UTC) - timedelta(days=1)
    with operator_view():
        Memory.objects.filter(key="old").update(created_at=yesterday)

    assert [e["key"] for e in log(member)["events"]] == ["new"]
    assert [e["key"] for e in log(member, date=yesterday.date().isoformat())["events"]] == ["old"]


def test_past_the_cap_the_events_are_truncated_and_the_counts_exact(
    member: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(daily_log, "MAX_EVENTS", 3)
    for n in range(5):
        save(member, key=f"k{n}", content=f"Rule number {n} about the build.")

    body = log(member)

    assert [e["key"] for e in body["events"]] == ["k0", "k1", "k2"]
    assert body["truncated"] is True and body["counts"]["saved"] == 5


@pytest.mark.parametrize(
    "params",
    [
        {"date": "yesterday"},
        {"date": "2026-13-01"},
        {"date": (datetime.now(UTC) + timedelta(days=2)).date().isoformat()},
        {"date": "1999-01-01"},
        {"kind": "deleted"},
        {"colour": "blue"},
        {"date": "2026-01-01\x00"},
    ],
)
def test_bad_parameters_are_a_400_in_the_one_error_shape(member: Agent, params: dict[str, str]) -> None:
    response = member.client.get(member.url("log/"), params)

    assert response.status_code == 400, response.content
    assert response.json()["error"] == "invalid"


def test_another_team_sees_nothing_of_ours(member: Agent, outsider: Agent) -> None:
    a_busy_day(member)

    theirs = log(outsider)
    foreign = outsider.client.get(outsider.url("log/", team=member.team.slug))

    assert theirs["events"] == [] and theirs["sessions"] == []
    assert set(theirs["counts"].values()) == {0}
    assert foreign.status_code == 404
    assert b"deploy-friday" not in foreign.content and b"tidy the deploy" not in foreign.content


def test_a_session_id_of_another_team_links_nothing(member: Agent, outsider: Agent) -> None:
    theirs = boot(outsider, current_task="bravo-task-31")

    save(member, theirs, key="k", content="Saved under a foreign session id.")
    [event] = log(member)["events"]

    assert event["session"] is None and log(member)["sessions"] == []


def test_a_read_token_may_read_the_log(member: Agent, readonly_member: Agent) -> None:
    a_busy_day(member)

    assert log(readonly_member)["counts"]["saved"] == 2
