"""A transcript sent for drafts is kept as a conversation too (one code path): scrubbed,
its turns as lines; the drafts name the conversation and the lines they came from, and an
accepted draft's provenance carries them. Notes sent with keep_conversation false are not
kept; a team at its conversation quota still gets its drafts."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

from memories.conversations.models import Conversation, ConversationLine
from memories.conversations.services import lines_from_transcript
from memories.models import Memory
from teams.scope import team_scope
from teams.services import set_vault_entry
from tests.conftest import Agent, operator_view

pytestmark = pytest.mark.django_db

TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
VAULT_SECRET = "hunter2-vault-zq81x"
TRANSCRIPT = f"""user: Our CI token is {TOKEN} and the password is {VAULT_SECRET}, keep it safe.
assistant: Noted.

user: We decided to use Paddle for the EU storefront after the long review.

assistant: Lesson learned: the cache must be warmed before the deploy, or latency spikes for an hour.
"""


def extract(agent: Agent, **body: Any) -> Any:
    return agent.client.post(agent.url("drafts/extract/"), {"transcript": TRANSCRIPT, **body}, format="json")


def test_the_transcript_is_kept_as_a_scrubbed_conversation_the_drafts_point_into(member: Agent) -> None:
    with team_scope(member.team.id):
        set_vault_entry(team=member.team, key="pw", value=VAULT_SECRET, is_secret=True, actor="t")
    response = extract(member, source_session="sess-9", source="hook")
    assert response.status_code == 201, response.content
    body = response.json()
    conversation_id = body["conversation"]
    assert conversation_id
    with operator_view():
        conversation = Conversation.objects.get(id=conversation_id)
        lines = list(ConversationLine.objects.filter(conversation=conversation).order_by("number"))
    assert (conversation.session, conversation.source, conversation.created_by) == (
        "sess-9",
        "hook",
        "writer-bot",
    )
    assert [line.role for line in lines] == ["user", "assistant", "user", "assistant"]
    stored = " ".join(line.text for line in lines)
    assert TOKEN not in stored and VAULT_SECRET not in stored
    paddle = next(d for d in body["drafts"] if "Paddle" in d["content"])
    assert paddle["source_conversation"] == {"id": conversation_id, "first_line": 3, "last_line": 3}
    accepted = member.client.post(member.url(f"drafts/{paddle['id']}/accept/"), {}, format="json")
    assert accepted.status_code == 200, accepted.content
    with operator_view():
        memory = Memory.objects.get(team=member.team, key=accepted.json()["key"], is_active=True)
    assert memory.metadata["draft"]["conversation"] == conversation_id
    assert (memory.metadata["draft"]["first_line"], memory.metadata["draft"]["last_line"]) == (3, 3)


def test_notes_sent_without_keep_conversation_are_not_kept(member: Agent) -> None:
    response = extract(member, keep_conversation=False)
    assert response.status_code == 201
    assert response.json()["conversation"] is None
    assert all(d["source_conversation"] is None for d in response.json()["drafts"])
    with operator_view():
        assert Conversation.objects.count() == 0


def test_a_team_at_its_conversation_quota_still_gets_its_drafts(member: Agent) -> None:
    with override_settings(MEMORYHUB_QUOTA_CONVERSATIONS=0):
        response = extract(member)
    assert response.status_code == 201 and response.json()["drafts"]
    assert response.json()["conversation"] is None


def test_bad_keep_conversation_and_source_are_400(member: Agent) -> None:
    assert extract(member, keep_conversation="yes").status_code == 400
    assert extract(member, source="mail").status_code == 400


def test_a_transcript_becomes_turns_with_notes_before_the_first() -> None:
    lines = lines_from_transcript("Heading\n\nuser: hi\nsecond line\n\nassistant: hello\n\ntool: ran\n")
    assert [(line.role, line.text) for line in lines] == [
        ("note", "Heading"),
        ("user", "hi\nsecond line"),
        ("assistant", "hello"),
        ("tool", "ran"),
    ]
