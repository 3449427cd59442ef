"""Fixtures shared by the search tests."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from search.embeddings.profiles import provider_for
from tests.search.embedding_server import EmbeddingServer


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
