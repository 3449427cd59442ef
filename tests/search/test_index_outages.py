"""Broker and provider outages.

- A broker that refuses connections costs a save one connection attempt, not a retry
  loop of ~6 s inside the request: the save answers 201, the refusal is logged, and the
  entry stays `pending` with no lease, for the reconcile job to enqueue later.
- The reconcile job leaves alone an entry queued less than a lease ago, retries failed
  entries after an exponential backoff, gives up after MEMORYHUB_INDEX_MAX_ATTEMPTS
  failures (the dashboard shows those), and never lets them starve newer entries.
- Indexing holds no database transaction while the embedding provider answers.

The broker is a real local socket; the provider a real local HTTP server
(tests/search/embedding_server.py) or a port where nothing listens."""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone

from memories import writes
from memories.models import Memory
from search.embeddings.profiles import provider_for, reset_providers
from search.models import EmbeddingCache
from search.reindexing import reindex_team
from search.services import claim_stuck_memories, index_memory, request_reindex
from search.tasks import reconcile_index_states
from teams.models import Membership, Team
from teams.scope import team_scope
from tests.conftest import Agent, operator_view
from tests.search.embedding_server import API_KEY, EmbeddingServer
from tests.worker import TaskRoute

PROFILES = """
profiles:
  remote:
    provider: openai
    base_url: {base_url}
    api_key_env: MEMORYHUB_TEST_EMBEDDINGS_KEY
    model: fake-minilm
    dimensions: 384
    max_attempts: 1
    breaker_fail_max: 1000
    timeout: {{connect: 0.5, read: 5}}
"""


class ResettingBroker:
    """A local TCP port that accepts each connection and closes it at once: a broker
    that is down, which counts how often it is tried."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.attempts = 0
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.sock.getsockname()[1]}/0"

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            self.attempts += 1
            client.close()

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def broken_broker() -> Iterator[tuple[TaskRoute, ResettingBroker]]:
    """This process's tasks go to a broker that is down (not run in-process)."""
    broker = ResettingBroker()
    route = TaskRoute()
    route.to(broker.url, "memoryhub-test-outage")
    yield route, broker
    route.restore()
    broker.close()


@pytest.fixture
def remote(
    server: EmbeddingServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, team: Team
) -> Iterator[EmbeddingServer]:
    """The team on an embedding profile served by `server` (started by the test, or not)."""
    path = tmp_path / "profiles.yaml"
    path.write_text(PROFILES.format(base_url=server.base_url))
    monkeypatch.setenv("MEMORYHUB_TEST_EMBEDDINGS_KEY", API_KEY)
    with operator_view():
        Team.objects.filter(id=team.id).update(embedding_profile="remote")
    team.refresh_from_db()
    with override_settings(MEMORYHUB_EMBEDDING_PROFILES_FILE=str(path)):
        reset_providers()
        yield server
    reset_providers()


def row(team: Team, key: str) -> Memory:
    with operator_view():
        return Memory.objects.filter(team=team, key=key).latest("created_at")


def save(agent: Agent, key: str, content: str, capture: Any) -> Any:
    with capture(execute=True):
        return agent.client.post(agent.url("memories/"), {"key": key, "content": content}, format="json")


# --------------------------------------------------------------------------- broker down


def test_a_save_while_the_broker_is_down_tries_it_once_and_leaves_the_entry_pending(
    broken_broker: tuple[TaskRoute, ResettingBroker],
    member: Agent,
    django_capture_on_commit_callbacks: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    route, broker = broken_broker
    with caplog.at_level(logging.WARNING, logger="search.tasks"):
        response = save(
            member, "deploy-friday", "Never deploy on Fridays.", django_capture_on_commit_callbacks
        )

    assert response.status_code == 201
    assert response.json()["index_state"] == "pending"
    # One connection attempt, not the retry loop that cost a save ~6 s; nothing was published.
    assert broker.attempts == 1
    assert route.published == []
    assert any("could not enqueue" in r.getMessage() for r in caplog.records)
    memory = row(member.team, "deploy-friday")
    assert memory.index_state == "pending"
    assert memory.index_queued_at is None  # no lease: the reconcile job may take it at once


# --------------------------------------------------------------------------- lease


@override_settings(MEMORYHUB_INDEX_LEASE_SECONDS=600)
def test_the_reconcile_job_does_not_queue_again_what_was_queued_less_than_a_lease_ago(
    member: Agent, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=False):  # queued, never run
        member.client.post(member.url("memories/"), {"key": "k", "content": "Queued."}, format="json")
    memory = row(member.team, "k")
    assert memory.index_state == "pending" and memory.index_queued_at is not None

    assert claim_stuck_memories(older_than_seconds=0, limit=10) == []

    with operator_view():  # the lease ran out (the task was lost with its worker)
        Memory.objects.filter(id=memory.id).update(index_queued_at=timezone.now() - timedelta(seconds=601))
    assert claim_stuck_memories(older_than_seconds=0, limit=10) == [(member.team.id, memory.id)]
    # Claimed: its lease starts again, so the next run leaves it alone.
    assert claim_stuck_memories(older_than_seconds=0, limit=10) == []
    assert row(member.team, "k").index_queued_at > timezone.now() - timedelta(seconds=60)


# --------------------------------------------------------------------------- backoff and give up


@override_settings(
    MEMORYHUB_INDEX_MAX_ATTEMPTS=3, MEMORYHUB_INDEX_RETRY_BASE_SECONDS=0, MEMORYHUB_RECONCILE_AFTER_SECONDS=0
)
def test_an_entry_that_keeps_failing_stops_after_max_attempts_and_the_dashboard_shows_it(
    remote: EmbeddingServer, member: Agent, django_capture_on_commit_callbacks: Any, django_user_model: Any
) -> None:
    # The provider's port has nothing listening: every attempt fails.
    save(member, "doomed", "This entry can never be embedded.", django_capture_on_commit_callbacks)
    first = row(member.team, "doomed")
    assert (first.index_state, first.index_attempts) == ("failed", 1)

    runs = [reconcile_index_states() for _ in range(4)]

    memory = row(member.team, "doomed")
    assert runs == [1, 1, 0, 0]  # attempts 2 and 3, then given up
    assert (memory.index_state, memory.index_attempts) == ("failed", 3)
    assert memory.index_last_error == "EmbeddingUnavailable"

    admin = django_user_model.objects.create_user("adam")
    with team_scope(member.team.id):
        Membership.objects.create(team=member.team, user=admin, role=Membership.Role.ADMIN)
    client = Client()
    client.force_login(admin)
    page = client.get(reverse("dashboard:overview", args=[member.team.slug])).content.decode()
    assert "doomed" in page and "EmbeddingUnavailable" in page and "given up" in page
    assert remote.base_url not in page and "127.0.0.1" not in page
    detail = client.get(reverse("dashboard:memory", args=[member.team.slug, "doomed"])).content.decode()
    assert "3 attempts, last error EmbeddingUnavailable" in detail

    # A person asks for a retry: full attempts again, and this time the provider is up.
    remote.start()
    with django_capture_on_commit_callbacks(execute=True), team_scope(member.team.id):
        assert request_reindex(team=member.team, actor="test", scope="stuck") == 1
    memory = row(member.team, "doomed")
    assert (memory.index_state, memory.index_attempts, memory.index_last_error) == ("indexed", 0, "")


@override_settings(MEMORYHUB_INDEX_RETRY_BASE_SECONDS=60)
def test_failing_entries_wait_their_backoff_and_do_not_starve_newer_ones(
    remote: EmbeddingServer, member: Agent, django_capture_on_commit_callbacks: Any
) -> None:
    save(member, "doomed", "This entry can never be embedded.", django_capture_on_commit_callbacks)
    doomed = row(member.team, "doomed")
    assert doomed.index_state == "failed"
    # Backing off: the first retry is due a minute after the failure, not before.
    assert timedelta(seconds=50) < doomed.index_next_attempt_at - timezone.now() <= timedelta(seconds=60)
    with django_capture_on_commit_callbacks(execute=False):
        response = member.client.post(
            member.url("memories/"), {"key": "fresh", "content": "Newer."}, format="json"
        )
    assert response.status_code == 201, response.content
    with operator_view():  # both due: the lease of the newer one ran out, the backoff too
        Memory.objects.filter(team=member.team).update(index_queued_at=None)
        Memory.objects.filter(id=doomed.id).update(
            index_next_attempt_at=timezone.now() - timedelta(seconds=1)
        )

    # One per run: the never-failed entry comes first.
    with operator_view():
        state = list(
            Memory.objects.filter(team=member.team).values_list(
                "key",
                "index_state",
                "index_attempts",
                "index_next_attempt_at",
                "index_queued_at",
                "updated_at",
            )
        )
    assert claim_stuck_memories(older_than_seconds=0, limit=1) == [
        (member.team.id, row(member.team, "fresh").id)
    ], state
    assert claim_stuck_memories(older_than_seconds=0, limit=1) == [(member.team.id, doomed.id)]

    # A second failure doubles the wait.
    index_memory(team_id=member.team.id, memory_id=doomed.id)
    doomed = row(member.team, "doomed")
    assert doomed.index_attempts == 2
    assert timedelta(seconds=110) < doomed.index_next_attempt_at - timezone.now() <= timedelta(seconds=120)


# --------------------------------------------------------------------------- no transaction held


@pytest.mark.django_db(transaction=True)
def test_indexing_and_reindexing_hold_no_database_transaction_while_the_provider_answers(
    remote: EmbeddingServer, member: Agent
) -> None:
    """A guard for the worker's paths: indexing stores vectors under a lock of the team's
    row, and must still embed before taking it. (The API's provider calls:
    tests/api/test_provider_outside_transaction.py.)"""
    remote.start()
    provider = provider_for("remote")
    assert provider is not None
    seen: list[tuple[str, bool]] = []
    original = provider.embed_documents

    def observed(texts: list[str]) -> list[list[float]]:
        seen.append((texts[0][:20], connection.in_atomic_block))
        return original(texts)

    provider.embed_documents = observed  # type: ignore[method-assign]
    with team_scope(member.team.id):
        memory = writes.save_memory(
            team=member.team, key="a", content="Never deploy on Fridays.", updated_by="t"
        ).memory  # indexed at its commit, in-process
    assert row(member.team, "a").index_state == "indexed"
    with operator_view():
        Team.objects.filter(id=member.team.id).update(embedding_profile="local")
        EmbeddingCache.objects.filter(team=member.team).delete()  # so the re-index embeds
    reindex_team(team_id=member.team.id, profile="remote", batch_size=1)
    assert index_memory(team_id=member.team.id, memory_id=memory.id) == "indexed"

    assert len(seen) == 2, seen  # indexing, then the re-index
    assert [text for text, in_transaction in seen if in_transaction] == []
