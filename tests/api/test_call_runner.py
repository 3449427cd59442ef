"""The per-call stack both front doors share (teams.calls.AgentCall), driven through
each door: REST (APIClient) and MCP in-process, on the server's own path
(tests.mcp.conftest.call_in_process).

- Refusals come in one order: no token 401, another team 404, the scope 403, the budget
  429; and a refused call has no effect: no heartbeat of its session, nothing written.
- The write slot is held until the call's transaction has ended, and let go after.
- Answers and error bodies leave with the team's vault secrets redacted."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from django.core.cache import cache
from django.db import connection, transaction
from django.utils import timezone

from agents import sessions
from agents.models import AgentSession
from memories.models import Memory
from memories.writes import save_memory
from teams import hooks
from teams.models import AgentToken, Team
from teams.scope import team_scope
from teams.services import set_vault_entry
from teams.throttling import write_slot_name
from tests.conftest import Agent, operator_view
from tests.mcp.conftest import call_in_process


@pytest.fixture(autouse=True)
def fresh_counts() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


def rest_save(
    agent: Agent, key: str, *, team: str | None = None, **headers: str
) -> tuple[int, dict[str, Any]]:
    response = agent.client.post(
        agent.url("memories/", team=team), {"key": key, "content": f"Note {key}."}, format="json", **headers
    )
    return response.status_code, response.json()


def token_row(team: Team, name: str) -> AgentToken:
    with operator_view():
        return AgentToken.objects.select_related("team").get(team=team, name=name)


def session_of(agent: Agent, name: str) -> AgentSession:
    """A live session of the agent whose last heartbeat is a minute old (older than the
    heartbeat's resolution, so the next one shows)."""
    with team_scope(agent.team.id):
        session = sessions.boot_session(
            team=agent.team, token=token_row(agent.team, name), agent=name
        ).session
    with operator_view():
        AgentSession.objects.filter(id=session.id).update(
            last_heartbeat_at=timezone.now() - dt.timedelta(minutes=1)
        )
    return session


def last_heartbeat(session: AgentSession) -> Any:
    with operator_view():
        return AgentSession.objects.get(id=session.id).last_heartbeat_at


def keys(team: Team) -> set[str]:
    with operator_view():
        return set(Memory.objects.filter(team=team).values_list("key", flat=True))


@pytest.mark.django_db(transaction=True)
def test_refusals_come_in_one_order_and_a_refused_call_does_nothing(
    member: Agent, readonly_member: Agent, outsider: Agent, settings: Any
) -> None:
    settings.MEMORYHUB_THROTTLE_WRITE = "0/min"  # every write is over budget
    session = session_of(member, "writer-bot")
    before = last_heartbeat(session)
    heartbeat = {"HTTP_X_MEMORYHUB_SESSION": str(session.id)}

    # REST: 401 before anything; another team's token 404 whatever its scope and budget;
    # a token without the scope 403 whatever its budget; then the budget 429.
    member.client.credentials()
    assert rest_save(member, "a")[0] == 401
    assert rest_save(outsider, "a", team=member.team.slug)[0] == 404
    assert rest_save(readonly_member, "a")[1]["error"] == "forbidden"
    member.client.credentials(HTTP_AUTHORIZATION=f"Bearer {member.token}")
    status, body = rest_save(member, "a", **heartbeat)
    assert (status, body["error"]) == (429, "rate_limited")

    # MCP: the same order (the token's team is the call's: no URL to name another).
    assert call_in_process(None, "memory_save", {"key": "b", "content": "b"})[0] == 401
    assert (
        call_in_process(readonly_member.token, "memory_save", {"key": "b", "content": "b"})[1]["error"]
        == "forbidden"
    )
    assert call_in_process(member.token, "memory_save", {"key": "b", "content": "b"}, **heartbeat)[1][
        "error"
    ] == ("rate_limited")

    # Refused before the call was bound to its team: no heartbeat, nothing written.
    assert last_heartbeat(session) == before
    assert keys(member.team) == set()
    # Reads have their own budget, and a call let in is the session's heartbeat.
    assert call_in_process(member.token, "memory_list", {}, **heartbeat)[0] == 200
    assert last_heartbeat(session) > before


class SlotWatch:
    """Whether the token's write slot is held, asked from a connection of its own (as
    another process would), at the commit of each admitted call's transaction."""

    def __init__(self, token_id: int) -> None:
        params = connection.get_connection_params()
        self.conn = psycopg.connect(
            **{k: v for k, v in params.items() if k != "cursor_factory"}, autocommit=True
        )
        self.name = write_slot_name(token_id)
        self.at_commit: list[bool] = []

    def held(self) -> bool:
        taken = self.conn.execute(
            "SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", [self.name]
        ).fetchone()
        if taken == (True,):
            self.conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", [self.name])
            return False
        return True

    def receiver(self, **_: Any) -> None:
        transaction.on_commit(lambda: self.at_commit.append(self.held()))


@pytest.fixture
def slot_watch(member: Agent, monkeypatch: pytest.MonkeyPatch) -> Iterator[SlotWatch]:
    watch = SlotWatch(token_row(member.team, "writer-bot").pk)
    monkeypatch.setattr(hooks.agent_request, "_receivers", [*hooks.agent_request.receivers, watch.receiver])
    yield watch
    watch.conn.close()


@pytest.mark.django_db(transaction=True)
def test_the_write_slot_is_let_go_only_after_the_transaction_has_ended(
    member: Agent, slot_watch: SlotWatch
) -> None:
    assert rest_save(member, "by-rest")[0] == 201
    assert not slot_watch.held()
    assert (
        "id"
        in call_in_process(member.token, "memory_save", {"key": "by-mcp", "content": "Saved over MCP."})[1]
    )
    assert not slot_watch.held()
    # A read takes no slot.
    assert member.client.get(member.url("memories/")).status_code == 200

    assert slot_watch.at_commit == [True, True, False]
    assert keys(member.team) == {"by-rest", "by-mcp"}


@pytest.mark.django_db(transaction=True)
def test_answers_and_errors_leave_without_the_teams_secrets(member: Agent) -> None:
    secret = "s3cr3t-v4lue-xyz"
    with team_scope(member.team.id):
        # Saved before the value became a vault secret: stored as written.
        save_memory(
            team=member.team, key="leaky", content=f"the canary sings {secret} at dawn", updated_by="t"
        )
        set_vault_entry(team=member.team, key="deploy-token", value=secret, is_secret=True, actor="test",
                        may_change_secrets=True)  # fmt: skip
    with operator_view():
        assert secret in Memory.objects.get(team=member.team, key="leaky").content

    rest = member.client.get(member.url("memories/leaky/"))
    _, mcp = call_in_process(member.token, "memory_get", {"key": "leaky"})
    assert rest.status_code == 200 and rest.json()["content"].startswith("the canary sings [REDACTED")
    assert mcp["content"] == rest.json()["content"]
    assert secret not in rest.content.decode() and secret not in json.dumps(mcp)

    # Errors quoting the input: the team's secrets and any credential shape are scrubbed.
    for quoted_type in (secret, "password is hunter2hunter2"):
        quoted = {"key": "k", "content": "x", "type": quoted_type}
        rest_error = member.client.post(member.url("memories/"), quoted, format="json")
        _, mcp_error = call_in_process(member.token, "memory_save", quoted)
        assert rest_error.json()["error"] == mcp_error["error"] == "unknown_type"
        assert rest_error.json() == mcp_error and "[REDACTED" in mcp_error["detail"]
        assert quoted_type.split()[-1] not in json.dumps(mcp_error)
