"""Per-team quotas on active memories and live agent sessions
(MEMORYHUB_QUOTA_*): the next new one answers 409 quota_exceeded, changes still work."""

from __future__ import annotations

from typing import Any

import pytest

from agents.sessions import boot_session
from memories.models import Memory
from teams.models import Team
from teams.scope import team_scope
from teams.services import QuotaExceeded
from tests.conftest import Agent, operator_view


def test_a_new_key_past_the_memory_quota_is_409(member: Agent, outsider: Agent, settings: Any) -> None:
    settings.MEMORYHUB_QUOTA_MEMORIES = 2
    for key in ("a", "b"):
        response = member.client.post(
            member.url("memories/"), {"key": key, "content": f"text {key}"}, format="json"
        )
        assert response.status_code == 201

    refused = member.client.post(member.url("memories/"), {"key": "c", "content": "text c"}, format="json")
    superseded = member.client.post(
        member.url("memories/"), {"key": "a", "content": "text a2", "supersede_reason": "r"}, format="json"
    )
    elsewhere = outsider.client.post(
        outsider.url("memories/"), {"key": "c", "content": "text c"}, format="json"
    )

    assert refused.status_code == 409
    assert refused.json()["error"] == "quota_exceeded"
    assert refused.json()["quota"] == "memories" and refused.json()["limit"] == 2
    assert superseded.status_code == 201  # a new version is not one more memory
    assert elsewhere.status_code == 201  # the quota is per team
    with operator_view():
        assert not Memory.objects.filter(team=member.team, key="c").exists()


def test_deleting_a_memory_frees_its_place(member: Agent, settings: Any) -> None:
    settings.MEMORYHUB_QUOTA_MEMORIES = 1
    member.client.post(member.url("memories/"), {"key": "a", "content": "text a"}, format="json")
    assert member.client.delete(member.url("memories/a/")).status_code == 204

    response = member.client.post(member.url("memories/"), {"key": "b", "content": "text b"}, format="json")

    assert response.status_code == 201


def test_a_session_past_the_session_quota_is_refused(team: Team, settings: Any) -> None:
    settings.MEMORYHUB_QUOTA_SESSIONS = 2
    with team_scope(team.id):
        for n in range(2):
            boot_session(team=team, token=None, agent=f"agent-{n}")
        with pytest.raises(QuotaExceeded) as refused:
            boot_session(team=team, token=None, agent="one-too-many")

    assert refused.value.status == 409 and refused.value.extra["quota"] == "sessions"
