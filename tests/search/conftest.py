"""Fixtures shared by the search tests."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from core import yield_to_requests
from memories import writes
from memoryhub import embedded_redis as embedded
from search import services as search_services
from search.embeddings.profiles import provider_for
from teams.models import Team
from teams.scope import team_scope
from tests.search.embedding_server import EmbeddingServer

# The foreground notes' budget per wait in these tests (MEMORYHUB_INDEX_YIELD_MAX_MS).
YIELD_BUDGET_MS = 150


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def server() -> Iterator[EmbeddingServer]:
    """An OpenAI-compatible embedding endpoint on a free port, not started yet."""
    local = provider_for("local")
    # Loaded before any timed request: a first request that loads the model would
    # outlast the client's short read timeout and be retried.
    local.embed_documents(["warm up"])  # type: ignore[union-attr]
    embedding_server = EmbeddingServer(local, port=free_port())  # type: ignore[arg-type]
    yield embedding_server
    embedding_server.stop()


@pytest.fixture
def notes(embedded_redis: embedded.EmbeddedRedis, settings: Any) -> Iterator[redis.Redis]:
    """Foreground notes in the run's Redis, with a short per-batch budget."""
    settings.REDIS_URL = embedded_redis.url
    settings.MEMORYHUB_INDEX_YIELD_MAX_MS = YIELD_BUDGET_MS
    settings.MEMORYHUB_FOREGROUND_WINDOW_MS = 100
    client = redis.Redis(unix_socket_path=str(embedded.socket_path(embedded_redis.folder)))
    client.delete(yield_to_requests.KEY)
    yield_to_requests._down_until = 0.0
    yield_to_requests._noted_at.clear()
    yield_to_requests._pending.clear()
    yield client
    client.delete(yield_to_requests.KEY)
    client.close()


@pytest.fixture
def keep_noting() -> Iterator[Any]:
    """note(team_id): a team's requests keep arriving, every 20 ms, until the test ends;
    returns once the first one is noted."""
    stop = threading.Event()
    threads: list[threading.Thread] = []

    def note(team_id: int) -> None:
        noted = threading.Event()

        def run() -> None:
            while not stop.is_set():
                yield_to_requests.note_team_request(team_id)
                noted.set()
                stop.wait(0.02)  # the scenario's pace, not a wait for something

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        threads.append(thread)
        assert noted.wait(10), "the first request was not noted"
        yield_to_requests.send_pending_notes()  # in Redis before the test goes on

    yield note
    stop.set()
    for thread in threads:
        thread.join(5)


@pytest.fixture
def team_with_vectors(team: Team) -> Team:
    """`team` with one indexed entry: a save's near-duplicate check embeds only once the
    team has vectors to compare with."""
    with team_scope(team.id):
        saved = writes.save_memory(
            team=team, key="deploys", content="Deploys happen on Tuesdays.", updated_by="test"
        ).memory
    search_services.index_memory(team_id=team.id, memory_id=saved.id)
    return team
