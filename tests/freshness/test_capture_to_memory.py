"""Captures straight to memory (docs/freshness.md, "Captures straight to memory"): POST
drafts/extract/ with `captured` for a team with `capture_to_memory` on saves what would
have been a draft with no conflict as a lesson entry (scrubbed, auto-captured), and a
capture of it from another session confirms that entry; everything else is as before.
The setting itself: validated, audited, on the settings page."""

from __future__ import annotations

from typing import Any

import pytest

from freshness.models import Draft, DraftConflict
from memories.models import Confirmation, Memory
from teams.models import AuditEvent, Team
from teams.scope import team_scope
from teams.team_settings import update_team_settings
from tests.conftest import Agent, operator_view
from tests.freshness.test_drafts_api import extract

TOKEN = "ghp_" + "M1n2B3v4C5x6Z7l8K9j0H1g2F3d4S5a6P7o8"
CAPTURE = (
    "Learning: `python manage.py migrate` failed: django.db.utils.OperationalError: connection to server "
    f'at "localhost" failed / DATABASE_URL=postgres://app:{TOKEN}@localhost/app'
)


WRITER = "writer-bot"  # the member fixture's token


def capture(agent: Agent, session: str, text: str = CAPTURE, team: str | None = None) -> Any:
    return extract(agent, {"transcript": text, "source_session": session, "captured": True}, team=team)


def turn_on(team: Team) -> None:
    with team_scope(team.id):
        update_team_settings(team=team, changes={"capture_to_memory": True}, by="user:adam")


def entries(team: Team) -> list[Memory]:
    with team_scope(team.id):
        return list(Memory.objects.filter(team=team).order_by("created_at"))


def drafts(team: Team) -> list[Draft]:
    with team_scope(team.id):
        return list(Draft.objects.filter(team=team))


def test_with_the_setting_on_a_capture_is_a_scrubbed_lesson_entry_and_repeats_confirm_it(
    member: Agent,
) -> None:
    turn_on(member.team)

    first = capture(member, "s1")
    retry = capture(member, "s1")
    other = capture(member, "s2")
    unnamed = extract(member, {"transcript": CAPTURE, "captured": True})

    assert first.status_code == 201, first.content
    body = first.json()
    assert (body["drafts"], body["corroborated"], body["confirmed"]) == ([], [], [])
    [saved] = body["memories"]
    [entry] = entries(member.team)
    assert saved["id"] == str(entry.id) and saved["key"] == entry.key and saved["is_active"] is True
    assert (entry.type, entry.auto_captured, entry.updated_by) == ("lesson", True, WRITER)
    assert entry.content.startswith("`python manage.py migrate` failed: django.db.utils.OperationalError")
    assert TOKEN not in entry.content and TOKEN.encode() not in first.content
    assert entry.metadata["capture"]["source_session"] == "s1"
    assert entry.metadata["capture"]["fingerprint"]

    assert retry.json() == {
        "drafts": [],
        "corroborated": [],
        "memories": [],
        "confirmed": [],
        "confirmed_facts": [],
        "fact_nudges": [],
        "conversation": None,
    }
    assert [e["id"] for e in other.json()["confirmed"]] == [str(entry.id)]
    assert [e["id"] for e in unnamed.json()["confirmed"]] == [str(entry.id)]
    assert drafts(member.team) == [] and len(entries(member.team)) == 1
    with team_scope(member.team.id):
        entry.refresh_from_db()
        confirmers = sorted(Confirmation.objects.filter(memory=entry).values_list("confirmed_by", flat=True))
    assert entry.confirmed_by_count == 2 and entry.last_confirmed_at is not None
    assert confirmers == [f"{WRITER} (capture)", f"{WRITER} (capture, session s2)"]


def test_with_the_setting_off_a_capture_is_a_pending_draft_as_before(member: Agent) -> None:
    answer = capture(member, "s1").json()
    assert (answer["memories"], answer["confirmed"]) == ([], [])
    [draft] = drafts(member.team)
    assert draft.state == "pending" and draft.type == "lesson"
    assert entries(member.team) == []


def test_a_transcript_that_is_no_capture_stays_drafts_with_the_setting_on(member: Agent) -> None:
    turn_on(member.team)
    answer = extract(member, {"transcript": CAPTURE, "source_session": "s1"}).json()
    assert len(answer["drafts"]) == 1 and answer["memories"] == []
    assert entries(member.team) == []


def test_a_capture_already_pending_as_a_draft_corroborates_the_draft(member: Agent) -> None:
    capture(member, "s1")  # pending as a draft while the setting was off
    turn_on(member.team)
    answer = capture(member, "s2").json()
    assert answer["memories"] == [] and [d["corroborated"] for d in answer["corroborated"]] == [1]
    assert entries(member.team) == []


def test_a_capture_with_a_conflict_stays_a_draft_for_a_person(member: Agent, save: Any) -> None:
    turn_on(member.team)
    text = "`npm publish` failed: you must sign in with npm login before publishing to the registry"
    save(member, "npm-publish", text, type="lesson")

    answer = capture(member, "s1", text=f"Learning: {text}").json()

    assert answer["memories"] == []
    [draft] = answer["drafts"]
    assert draft["conflict"] == DraftConflict.DUPLICATE
    assert [e.key for e in entries(member.team)] == ["npm-publish"]


@pytest.mark.parametrize("value", ["yes", 1, None, [True]])
def test_captured_must_be_a_boolean(member: Agent, value: Any) -> None:
    response = extract(member, {"transcript": CAPTURE, "captured": value})
    assert response.status_code == 400, response.content
    assert response.json()["error"] == "invalid" and "captured" in response.json()["fields"]


def test_another_teams_token_cannot_capture_into_the_team(member: Agent, outsider: Agent) -> None:
    turn_on(member.team)
    response = capture(outsider, "s1", team=member.team.slug)
    assert response.status_code == 404
    assert entries(member.team) == [] and drafts(member.team) == []
    # bravo's own capture is bravo's: its setting is off, so a draft
    answer = capture(outsider, "s1").json()
    assert answer["memories"] == [] and len(answer["drafts"]) == 1


def test_the_setting_is_a_boolean_and_its_change_is_audited(member: Agent) -> None:
    from core.errors import InvalidInput

    with team_scope(member.team.id), pytest.raises(InvalidInput) as refused:
        update_team_settings(team=member.team, changes={"capture_to_memory": "yes"}, by="user:adam")
    assert refused.value.extra["field"] == "capture_to_memory"
    turn_on(member.team)
    with operator_view():
        assert Team.objects.get(pk=member.team.pk).capture_to_memory is True
        [event] = AuditEvent.objects.filter(team=member.team, action="team.settings")
    assert event.target == "capture_to_memory: False → True"
