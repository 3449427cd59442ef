"""Who may do what over MCP, through the real server: a request without a valid token is
refused with 401 before MCP; a token's scopes apply to the tools as to REST; and another
team's token gets nothing of the team, from any tool (the table below must name every
registered tool, so a new one cannot be left out)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import httpx
import pytest
from django.utils import timezone

from agents.mcp.tools import TOOLS
from freshness.models import Draft, DraftState, Nudge, NudgeKind, NudgeState
from memories.facts.models import Fact
from memories.facts.services import set_fact
from memories.models import Memory
from memories.writes import save_memory
from teams.models import AgentToken, Team, VaultEntry
from teams.scope import team_scope
from teams.services import revoke_token, set_vault_entry
from tests.conftest import make_agent, operator_view
from tests.mcp.conftest import Server, mcp_client, run_async, structured

pytestmark = pytest.mark.django_db(transaction=True)

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
JSON_POST = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def post_initialize(server: Server, authorization: str | None) -> httpx.Response:
    headers = dict(JSON_POST)
    if authorization is not None:
        headers["Authorization"] = authorization
    return httpx.post(server.mcp_url, json=INITIALIZE, headers=headers, timeout=30)


def test_the_endpoint_answers_an_initialize_with_a_valid_token(mcp_server: Server, team: Team) -> None:
    token = make_agent(team, "reader", ["read"]).token
    response = post_initialize(mcp_server, f"Bearer {token}")
    assert response.status_code == 200, response.text
    assert response.headers["Content-Type"].startswith("application/json")  # no stream held open
    assert response.json()["result"]["serverInfo"]["name"] == "memoryhub"


def test_requests_without_a_valid_token_get_401_before_mcp(mcp_server: Server, team: Team) -> None:
    revoked = make_agent(team, "revoked-bot", ["read"]).token
    revoke_token(team=team, name="revoked-bot", actor="test")
    expired = make_agent(team, "expired-bot", ["read"]).token
    with operator_view():
        AgentToken.objects.filter(name="expired-bot").update(
            expires_at=timezone.now() - dt.timedelta(minutes=1)
        )

    cases = {
        None: "send 'Authorization: Bearer <token>'",
        "Bearer mh_not-a-real-token": "invalid token",
        f"Bearer {revoked}": "this token has been revoked",
        f"Bearer {expired}": "this token has expired",
        "Basic dXNlcjpwYXNz": "use 'Authorization: Bearer <token>'",
    }
    for authorization, detail in cases.items():
        response = post_initialize(mcp_server, authorization)
        assert response.status_code == 401, (authorization, response.text)
        assert response.json() == {"error": "unauthenticated", "detail": detail}
        assert response.headers["WWW-Authenticate"] == 'Bearer realm="memoryhub"'


def test_the_sdk_client_cannot_connect_with_a_bad_token(mcp_server: Server) -> None:
    async def connect() -> None:
        async with mcp_client(mcp_server, "mh_not-a-real-token") as client:
            await client.list_tools()

    # The SDK reports the refused handshake as its own error (wrapped by its task groups).
    with pytest.raises(Exception):  # noqa: B017
        run_async(connect())


def call_all(
    server: Server, token: str, calls: list[tuple[str, dict[str, Any]]]
) -> list[tuple[bool, dict[str, Any]]]:
    """Each call's (is_error, body), in order."""
    answers: list[tuple[bool, dict[str, Any]]] = []

    async def main() -> None:
        async with mcp_client(server, token, surface="full") as client:
            for name, arguments in calls:
                result = await client.call_tool(name, arguments)
                answers.append((result.is_error, structured(result)))

    run_async(main())
    return answers


WRITE_CALLS = [
    ("memory_save", {"key": "k", "content": "A reader's attempt."}),
    ("memory_delete", {"key": "k"}),
    ("memory_unsupersede", {"key": "k", "reason": "r"}),
    ("memory_rate", {"key": "k", "direction": "up"}),
    ("memory_annotate", {"key": "k", "note": "n"}),
    ("learning_record", {"topic": "t", "claim": "c", "confidence": "low"}),
    ("session_boot", {}),
    ("session_heartbeat", {"session_id": "00000000-0000-4000-8000-000000000003"}),
    ("session_end", {"session_id": "00000000-0000-4000-8000-000000000003"}),
    ("memory_confirm", {"key": "k"}),
    ("nudge_resolve", {"nudge_id": "00000000-0000-4000-8000-000000000004", "action": "dismiss"}),
    ("drafts_extract", {"transcript": "We decided to use Paddle."}),
    ("draft_review", {"draft_id": "00000000-0000-4000-8000-000000000005", "action": "reject"}),
    ("fact_set", {"entity": "e", "key": "k", "value": "v"}),
]


def test_a_read_token_cannot_write_and_only_admin_sets_the_vault(mcp_server: Server, team: Team) -> None:
    reader = make_agent(team, "reader", ["read"]).token
    writer = make_agent(team, "writer", ["read", "write"]).token

    for is_error, body in call_all(
        mcp_server, reader, [*WRITE_CALLS, ("vault_set", {"key": "v", "value": "x"})]
    ):
        assert is_error
        assert body["error"] == "forbidden" and body["detail"].startswith("this token lacks the '")
    [(is_error, body)] = call_all(mcp_server, writer, [("vault_set", {"key": "v", "value": "x"})])
    assert is_error and body == {"error": "forbidden", "detail": "this token lacks the 'admin' scope"}
    # Reads work with a read token.
    [(is_error, body)] = call_all(mcp_server, reader, [("memory_list", {})])
    assert not is_error and body["results"] == []
    with operator_view():
        assert not Memory.objects.exists() and not VaultEntry.objects.exists()


# What only bravo's rows hold (alpha names bravo's keys itself, and may see them echoed
# in its own entries): the content, the vault value, the session's task and agent.
BRAVO_MARKERS = [
    "zebra-quartz-1729", "bravo-vault-value-77", "bravo-task-31", "bravo-runner-55", "bravo-fact-value-42",
]  # fmt: skip

# Every tool, called by alpha's token with bravo's keys, ids and names ({version} and
# {session} are bravo's real ids): nothing of bravo may come back.
CROSS_TEAM_CALLS: dict[str, dict[str, Any]] = {
    "memory_save": {"key": "bravo-plan-9", "content": "alpha's own text", "supersede_reason": "take over"},
    "memory_save_batch": {
        "entries": [{"key": "bravo-plan-9", "content": "alpha's batch text", "supersede_reason": "take over"}]
    },
    "memory_search": {"query": "zebra-quartz-1729 bravo-plan-9", "explain": True, "include_superseded": True},
    "memory_get": {"version_id": "{version}"},
    "memory_list": {"limit": 200},
    "memory_history": {"key": "bravo-plan-9"},
    "memory_delete": {"key": "bravo-plan-9"},
    "memory_context": {"query": "zebra-quartz-1729", "format": "json"},
    "session_boot": {"project": "bravo"},
    "session_heartbeat": {"session_id": "{session}", "current_task": "hijack"},
    "session_end": {"session_id": "{session}"},
    "session_list": {},
    "memory_unsupersede": {"key": "bravo-plan-9", "reason": "take it back"},
    "memory_rate": {"key": "bravo-plan-9", "direction": "down"},
    "memory_annotate": {"key": "bravo-plan-9", "note": "outsider note"},
    "learning_record": {"topic": "bravo", "claim": "The launch code word is known.", "confidence": "low"},
    "skill_get": {"name": "bravo-skill-4"},
    "vault_set": {"key": "bravo-vault-2", "value": "overwritten"},
    "memory_confirm": {"key": "bravo-plan-9", "note": "outsider says yes"},
    "memory_nudges": {"state": "all"},
    "nudge_resolve": {"nudge_id": "{nudge}", "action": "dismiss"},
    "drafts_extract": {"transcript": "We decided to use zebra tooling.", "source_session": "bravo-session"},
    "drafts_list": {"state": "all"},
    "draft_review": {"draft_id": "{draft}", "action": "accept"},
    "fact_set": {"entity": "bravo-entity", "key": "provider", "value": "alpha's own", "reason": "take over"},
    "fact_get": {"entity": "bravo-entity", "key": "provider"},
}
MUST_NOT_FIND = {
    "memory_get",
    "memory_history",
    "memory_delete",
    "session_heartbeat",
    "session_end",
    "memory_unsupersede",
    "memory_rate",
    "memory_annotate",
    "skill_get",
    "memory_confirm",
    "nudge_resolve",
    "draft_review",
    "fact_get",
}


def test_the_cross_team_table_covers_every_registered_tool() -> None:
    assert set(CROSS_TEAM_CALLS) == set(TOOLS)
    assert set(MUST_NOT_FIND) <= set(TOOLS)


def test_another_teams_token_gets_nothing_of_the_team_from_any_tool(
    mcp_server: Server, team: Team, other_team: Team
) -> None:
    from agents.sessions import boot_session

    with team_scope(other_team.id):
        saved = save_memory(
            team=other_team,
            key="bravo-plan-9",
            content="The launch code word is zebra-quartz-1729.",
            type_name="identity",
            skill_trigger={"name": "bravo-skill-4", "keywords": ["launch"], "always_on": True},
            updated_by="bravo",
        )
        session = boot_session(
            team=other_team,
            token=None,
            agent="bravo-runner-55",
            project="bravo",
            current_task="bravo-task-31",
        ).session
        set_vault_entry(team=other_team, key="bravo-vault-2", value="bravo-vault-value-77", is_secret=False,
                        actor="bravo")  # fmt: skip
        nudge = Nudge.objects.create(team=other_team, kind=NudgeKind.DUE, memory=saved.memory,
                                     message="Is zebra-quartz-1729 still true?")  # fmt: skip
        draft = Draft.objects.create(team=other_team, type="decision", key="mem:bravo-draft",
                                     content="We decided zebra-quartz-1729 is the code word.",
                                     extractor="rules", source_session="bravo-task-31")  # fmt: skip
        set_fact(
            team=other_team, entity="bravo-entity", key="provider", value="bravo-fact-value-42", actor="bravo"
        )
    alpha = make_agent(team, "alpha-admin", ["read", "write", "admin"]).token
    ids = {"{version}": str(saved.memory.id), "{session}": str(session.id), "{nudge}": str(nudge.id),
           "{draft}": str(draft.id)}  # fmt: skip
    # memory_save, memory_save_batch and fact_set last: they create alpha's own entry under
    # bravo's key, which alpha's other calls would then find.
    order = sorted(
        CROSS_TEAM_CALLS, key=lambda name: name in ("memory_save", "memory_save_batch", "fact_set")
    )
    calls = [
        (name, {k: ids.get(v, v) if isinstance(v, str) else v for k, v in CROSS_TEAM_CALLS[name].items()})
        for name in order
    ]

    answers = call_all(mcp_server, alpha, calls)

    for (name, _), (is_error, body) in zip(calls, answers, strict=True):
        received = json.dumps(body)
        for marker in BRAVO_MARKERS:
            assert marker not in received, (name, marker, received)
        if name in MUST_NOT_FIND:
            assert is_error and body["error"] == "not_found", (name, body)
    with operator_view():
        bravo = Memory.objects.get(team=other_team, key="bravo-plan-9")
        assert bravo.is_active and bravo.content == "The launch code word is zebra-quartz-1729."
        assert (bravo.upvotes, bravo.downvotes) == (0, 0) and not bravo.annotations.exists()
        assert VaultEntry.objects.get(team=other_team, key="bravo-vault-2").value == "bravo-vault-value-77"
        session.refresh_from_db()
        assert session.ended_at is None and session.current_task == "bravo-task-31"
        nudge.refresh_from_db()
        assert nudge.state == NudgeState.OPEN
        draft.refresh_from_db()
        assert draft.state == DraftState.PENDING
        assert not Draft.objects.filter(team=team, content__contains="zebra-quartz").exists()
        assert bravo.last_confirmed_at == bravo.created_at
        assert Fact.objects.get(team=other_team, is_active=True).value == "bravo-fact-value-42"


def test_a_body_over_the_limit_is_refused_in_the_error_shape(mcp_server: Server, team: Team) -> None:
    token = make_agent(team, "big-bot", ["read", "write"]).token
    limit = 1024 * 1024  # MEMORYHUB_MAX_BODY_BYTES's default
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "memory_save", "arguments": {"content": "x" * limit}}}  # fmt: skip
    response = httpx.post(
        mcp_server.mcp_url,
        json=message,
        headers={**JSON_POST, "Authorization": f"Bearer {token}"},
        timeout=60,
    )
    assert response.status_code == 413
    assert response.json() == {
        "error": "body_too_large",
        "detail": f"request body is larger than {limit} bytes",
    }


@pytest.mark.django_db
def test_plain_http_is_redirected_to_https_where_the_site_is_https_only(settings: Any) -> None:
    from django.test import RequestFactory

    from agents.mcp.http import admit

    settings.SECURE_SSL_REDIRECT = True
    environ = RequestFactory().post("/mcp/?x=1", HTTP_AUTHORIZATION="Bearer mh_anything").environ
    status, body, headers = admit(environ) or (0, {}, [])
    assert status == 308 and body["error"] == "https_required"
    assert headers == [("Location", "https://testserver/mcp/?x=1")]


def test_fact_tools_set_and_read_and_hide_high_facts_from_read_only_tokens(
    mcp_server: Server, team: Team
) -> None:
    writer = make_agent(team, "fact-writer", ["read", "write"]).token
    reader = make_agent(team, "fact-reader", ["read"]).token
    [(error, created), (_, high), (refused_error, refused), (_, entity)] = call_all(
        mcp_server,
        writer,
        [
            ("fact_set", {"entity": "acme", "key": "provider", "value": "Paddle", "domains": ["payments"]}),
            ("fact_set", {"entity": "acme", "key": "iban", "value": "DE89-3704", "sensitivity": "high"}),
            ("fact_set", {"entity": "acme", "key": "provider", "value": "Stripe"}),
            ("fact_get", {"entity": "acme"}),
        ],
    )
    assert not error and created["outcome"] == "created" and high["sensitivity"] == "high"
    assert refused_error and refused["error"] == "conflict" and refused["current"]["value"] == "Paddle"
    assert [f["key"] for f in entity["facts"]] == ["iban", "provider"]
    [(_, one), (hidden_error, hidden), (_, listed)] = call_all(
        mcp_server,
        reader,
        [
            ("fact_get", {"entity": "acme", "key": "provider"}),
            ("fact_get", {"entity": "acme", "key": "iban"}),
            ("fact_get", {"entity": "acme"}),
        ],
    )
    assert one["value"] == "Paddle"
    assert hidden_error and hidden["error"] == "not_found" and "DE89" not in json.dumps(hidden)
    assert [f["key"] for f in listed["facts"]] == ["provider"]
