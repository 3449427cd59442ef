"""An OpenAI-compatible embedding endpoint that is down, refuses the key or hangs:
search answers keyword-only with a warning, saves still succeed, and once the
endpoint recovers the reconcile job indexes what was left behind.

The endpoint is a real local HTTP server (tests/search/embedding_server.py)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

from search.embeddings.profiles import reset_providers
from search.models import ChunkEmbedding, EmbeddingCache
from search.tasks import reconcile_index_states
from teams.scope import team_scope
from tests.conftest import Agent, search
from tests.search.embedding_server import API_KEY, EmbeddingServer

BREAKER_RESET_SECONDS = 0.5
PROFILES = """
profiles:
  remote:
    provider: openai
    base_url: {base_url}
    api_key_env: MEMORYHUB_TEST_EMBEDDINGS_KEY
    model: fake-minilm
    dimensions: 384
    timeout: {{connect: 0.5, read: 0.5}}
    max_attempts: 2
    retry_wait: 0.01
    retry_wait_max: 0.02
    breaker_fail_max: 2
    breaker_reset_timeout: {reset}
"""
CONTENT = "Never deploy to production on Fridays: nobody is around over the weekend to fix what breaks."
PARAPHRASE = "Can we push new code live at the end of the working week?"


@pytest.fixture
def remote_team(
    member: Agent, server: EmbeddingServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Agent]:
    """The member's team, on an embedding profile served by `server`."""
    profiles = tmp_path / "profiles.yaml"
    profiles.write_text(PROFILES.format(base_url=server.base_url, reset=BREAKER_RESET_SECONDS))
    monkeypatch.setenv("MEMORYHUB_TEST_EMBEDDINGS_KEY", API_KEY)
    member.team.embedding_profile = "remote"
    member.team.save()
    with override_settings(
        MEMORYHUB_EMBEDDING_PROFILES_FILE=str(profiles), MEMORYHUB_RECONCILE_AFTER_SECONDS=0
    ):
        reset_providers()
        yield member
    reset_providers()


def state(agent: Agent, key: str) -> str:
    return agent.client.get(agent.url(f"memories/{key}/")).json()["index_state"]


def recover(server: EmbeddingServer, django_capture_on_commit_callbacks: Any) -> None:
    """Let the breaker half-open, then run the periodic reconcile job."""
    time.sleep(BREAKER_RESET_SECONDS + 0.1)
    with django_capture_on_commit_callbacks(execute=True):
        reconcile_index_states.apply()


def assert_keyword_fallback(agent: Agent, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="search.selectors"):
        body = search(agent, "Fridays production deploy")
    assert body["search_mode"] == "keyword"
    assert body["warnings"] and "keyword-only" in body["warnings"][0]
    assert [r["key"] for r in body["results"]] == ["deploy-friday"]
    assert any("keyword-only" in r.getMessage() for r in caplog.records)


def assert_recovered(agent: Agent) -> None:
    assert state(agent, "deploy-friday") == "indexed"
    body = search(agent, PARAPHRASE, explain=True)
    assert body["search_mode"] == "hybrid"
    assert body["results"][0]["key"] == "deploy-friday"
    assert body["results"][0]["explain"]["vector"] > 0.3


def test_dead_endpoint_falls_back_to_keyword_and_recovers(
    remote_team: Agent,
    server: EmbeddingServer,
    save,
    caplog,
    django_capture_on_commit_callbacks,  # type: ignore[no-untyped-def]
) -> None:
    save(remote_team, "deploy-friday", CONTENT)  # nothing listens on the port yet

    assert state(remote_team, "deploy-friday") == "failed"
    assert_keyword_fallback(remote_team, caplog)

    server.start()
    recover(server, django_capture_on_commit_callbacks)
    assert_recovered(remote_team)


def test_rejected_key_falls_back_to_keyword_without_retrying_and_recovers(
    remote_team: Agent,
    server: EmbeddingServer,
    save,
    caplog,
    django_capture_on_commit_callbacks,  # type: ignore[no-untyped-def]
) -> None:
    server.behaviour = "unauthorized"
    server.start()

    save(remote_team, "deploy-friday", CONTENT)

    assert state(remote_team, "deploy-friday") == "failed"
    assert len(server.requests) == 1  # a 401 is not retried
    assert_keyword_fallback(remote_team, caplog)
    for request in caplog.records:
        assert API_KEY not in request.getMessage()

    server.behaviour = "ok"  # the operator fixed the key
    recover(server, django_capture_on_commit_callbacks)
    assert_recovered(remote_team)


def test_slow_endpoint_costs_one_timeout_then_the_breaker_answers(
    remote_team: Agent,
    server: EmbeddingServer,
    save,
    caplog,
    django_capture_on_commit_callbacks,  # type: ignore[no-untyped-def]
) -> None:
    server.behaviour, server.slow_seconds = "slow", 2.0
    server.start()

    save(remote_team, "deploy-friday", CONTENT)
    assert state(remote_team, "deploy-friday") == "failed"
    requests_while_closed = len(server.requests)

    started = time.monotonic()
    assert_keyword_fallback(remote_team, caplog)
    search(remote_team, "weekend")
    # The breaker is open: no request reaches the endpoint, no timeout is waited out.
    assert len(server.requests) == requests_while_closed
    assert time.monotonic() - started < 0.5

    server.behaviour = "ok"
    recover(server, django_capture_on_commit_callbacks)
    assert_recovered(remote_team)


def test_only_text_never_seen_before_goes_to_the_provider(
    remote_team: Agent,
    server: EmbeddingServer,
    save,  # type: ignore[no-untyped-def]
) -> None:
    server.start()

    save(remote_team, "first", CONTENT)
    embedded_after_first = server.inputs_embedded
    save(remote_team, "copy", CONTENT, allow_duplicate=True)
    save(remote_team, "first", CONTENT, supersede_reason="minor correction")
    save(remote_team, "other", "The staging database runs on db-3.internal.")

    assert embedded_after_first == 1
    assert server.inputs_embedded == 2  # only "other" was new
    with team_scope(remote_team.team.id):
        assert ChunkEmbedding.objects.filter(team=remote_team.team).count() == 4
    assert EmbeddingCache.objects.filter(model__startswith="fake-minilm").count() == 2
