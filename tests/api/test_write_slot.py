"""A token's writes run one at a time across every web process (teams.throttling.write_slot):
two clients sharing a token and saving 64 KiB texts back to back must not take every
core from the other teams (the noisy-neighbour row of `make bench hardening`).

The slot is held here from a connection of the test's own, as another process's
request would hold it."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import psycopg
import pytest
from django.db import connection
from django.test import override_settings

from memories.models import Memory
from teams.models import AgentToken
from teams.throttling import write_slot_name
from tests.conftest import Agent, operator_view


class HeldSlot:
    """The token's write slot, taken by another session."""

    def __init__(self, token_id: int) -> None:
        params = connection.get_connection_params()
        self.conn = psycopg.connect(
            **{k: v for k, v in params.items() if k != "cursor_factory"}, autocommit=True
        )
        self.name = write_slot_name(token_id)
        assert self.conn.execute(
            "SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", [self.name]
        ).fetchone() == (True,)

    def release(self) -> None:
        self.conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", [self.name])

    def close(self) -> None:
        self.conn.close()


def token_id(agent: Agent) -> int:
    with operator_view():
        return AgentToken.objects.get(team=agent.team, name="writer-bot").pk


@pytest.fixture
def held(member: Agent) -> Iterator[HeldSlot]:
    slot = HeldSlot(token_id(member))
    yield slot
    slot.close()


def save(agent: Agent, key: str) -> tuple[int, dict[str, object], str]:
    response = agent.client.post(
        agent.url("memories/"), {"key": key, "content": f"Note {key}."}, format="json"
    )
    return response.status_code, response.json(), response.get("Retry-After", "")


def saved_keys(agent: Agent) -> set[str]:
    with operator_view():
        return set(Memory.objects.filter(team=agent.team).values_list("key", flat=True))


@pytest.mark.django_db(transaction=True)
@override_settings(MEMORYHUB_WRITE_SLOT_WAIT_SECONDS=0.2)
def test_a_write_waits_for_the_tokens_write_in_flight_then_answers_429(
    member: Agent, outsider: Agent, held: HeldSlot
) -> None:
    status, body, retry_after = save(member, "second")

    assert status == 429 and body["error"] == "rate_limited" and retry_after == "1"
    assert "second" not in saved_keys(member)
    # Reads of the same token, and another team's writes, do not wait for the slot.
    assert member.client.get(member.url("memories/")).status_code == 200
    assert save(outsider, "bravo-note")[0] == 201

    held.release()
    assert save(member, "second")[0] == 201


@pytest.mark.django_db(transaction=True)
@override_settings(MEMORYHUB_WRITE_SLOT_WAIT_SECONDS=30)
def test_a_waiting_write_goes_on_once_the_one_before_it_ends(member: Agent, held: HeldSlot) -> None:
    answers: list[int] = []
    waiting = threading.Thread(target=lambda: answers.append(save(member, "queued")[0]))
    waiting.start()
    waiting.join(0.5)
    assert waiting.is_alive() and answers == [], "the write waits while the slot is held"

    held.release()
    waiting.join(30)

    assert answers == [201]
    assert "queued" in saved_keys(member)


@pytest.mark.django_db(transaction=True)
@override_settings(MEMORYHUB_WRITE_SLOT_WAIT_SECONDS=0)
def test_the_slot_is_let_go_after_every_write_even_a_refused_one(member: Agent) -> None:
    assert save(member, "first")[0] == 201
    assert save(member, "first")[0] == 409  # an active entry exists: refused, rolled back
    assert save(member, "third")[0] == 201  # no wait allowed: the slot was free
