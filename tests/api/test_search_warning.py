"""When the embedding provider fails, a search tells the agent only
that it fell back to keywords; the provider's address and error go to the log."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.test import override_settings

from search.embeddings.profiles import reset_providers
from tests.conftest import Agent, search

INTERNAL_PATH = "internal-embedder-7f3a"


def _closed_port() -> int:
    """A local port nothing listens on: connecting to it is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.fixture
def dead_provider_team(member: Agent, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Agent]:
    profiles = tmp_path / "profiles.yaml"
    profiles.write_text(
        f"""
profiles:
  remote:
    provider: openai
    base_url: http://127.0.0.1:{_closed_port()}/{INTERNAL_PATH}/v1
    api_key_env: MEMORYHUB_TEST_EMBEDDINGS_KEY
    model: fake-minilm
    dimensions: 384
    timeout: {{connect: 0.5, read: 0.5}}
    max_attempts: 1
    retry_wait: 0.01
""",
        encoding="utf-8",
    )
    monkeypatch.setenv("MEMORYHUB_TEST_EMBEDDINGS_KEY", "test-key")
    member.team.embedding_profile = "remote"
    member.team.save()
    with override_settings(MEMORYHUB_EMBEDDING_PROFILES_FILE=str(profiles)):
        reset_providers()
        yield member
    reset_providers()


def test_provider_failure_warns_without_the_providers_address(
    dead_provider_team: Agent, readonly_member: Agent, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="search.run_search"):
        body = search(readonly_member, "deploy on fridays")

    assert body["search_mode"] == "keyword"
    assert body["warnings"] == ["embedding provider unavailable: answering keyword-only"]
    for detail in (INTERNAL_PATH, "127.0.0.1", "ConnectError", "refused", "remote"):
        assert detail not in str(body)
    # ...the operator still gets the detail.
    assert any("ConnectError" in record.getMessage() for record in caplog.records)
