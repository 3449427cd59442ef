"""Every way text leaves the service uses the one scrubber: drafts made from a
session-end transcript, the team export, log records and error bodies (REST and MCP)."""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

import pytest

from freshness.models import Draft
from teams.scrubber import CredentialScrubbingFilter
from tests.conftest import Agent, operator_view
from tests.transfer.helpers import export_body

PROSE_PASSWORD = "hunter2hunter2"
TRANSCRIPT = f"""user: Decision: the staging database password is {PROSE_PASSWORD} until the audit.

assistant: Noted, I will remember that we deploy on Tuesdays.

user: We decided to keep PASSWORD=abc12 in the old runner for now.
"""
# The shapes that came back raw from a save, each with the value that must be gone.
SAVED_SHAPES = {
    "api-token": ("API_TOKEN=Zt8yQ2mW4kR7pL1vX9cB3nF6", "Zt8yQ2mW4kR7pL1vX9cB3nF6"),
    "curl": ("curl -u admin:Hunter2Hunter2 https://ci.internal/", "Hunter2Hunter2"),
    "prose": (f"the staging database password is {PROSE_PASSWORD}", PROSE_PASSWORD),
    "short": ("PASSWORD=abc12", "abc12"),
    "json": ('{"password": "abc"}', '"abc"'),
}


def test_a_session_end_transcript_yields_no_draft_carrying_the_password(member: Agent) -> None:
    response = member.client.post(
        member.url("drafts/extract/"), {"transcript": TRANSCRIPT, "source_session": "end"}, format="json"
    )

    assert response.status_code == 201, response.content
    assert PROSE_PASSWORD.encode() not in response.content and b"abc12" not in response.content
    with operator_view():
        drafts = list(Draft.objects.filter(team=member.team))
    assert drafts, "the transcript's decisions should still be drafted"
    for draft in drafts:
        for text in (draft.content, draft.why, draft.source_excerpt, draft.key):
            assert PROSE_PASSWORD not in text and "abc12" not in text


def test_an_export_of_the_team_holds_none_of_the_saved_values(member: Agent, admin_member: Agent) -> None:
    for key, (content, _) in SAVED_SHAPES.items():
        saved = member.client.post(member.url("memories/"), {"key": key, "content": content}, format="json")
        assert saved.status_code == 201, saved.content

    body = export_body(admin_member)

    assert b'"record": "memory"' in body or b'"record":"memory"' in body
    for _, secret in SAVED_SHAPES.values():
        assert secret.encode() not in body, secret


def _printed(message: str, *args: Any, exc: BaseException | None = None) -> str:
    record = logging.LogRecord("memoryhub", logging.ERROR, __file__, 1, message, args or None, None)
    if exc is not None:
        try:
            raise exc
        except type(exc):
            record.exc_info = sys.exc_info()
    CredentialScrubbingFilter().filter(record)
    return logging.Formatter().format(record)


@pytest.mark.parametrize("content", [content for content, _ in SAVED_SHAPES.values()])
def test_a_log_record_and_its_traceback_lose_the_value(content: str) -> None:
    secret = next(s for c, s in SAVED_SHAPES.values() if c == content)

    printed = _printed("saving %s failed", content, exc=ValueError(f"refused {content}"))

    assert secret.strip('"') not in printed


def test_a_rest_error_body_does_not_echo_a_credential(member: Agent) -> None:
    response = member.client.post(
        member.url("memories/"),
        {"key": "deploy-notes", "content": "x", "type": f"password is {PROSE_PASSWORD}"},
        format="json",
    )

    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "unknown_type", body
    assert PROSE_PASSWORD not in json.dumps(body)
    assert "[REDACTED:" in body["detail"]
