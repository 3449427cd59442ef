"""An OpenAI-compatible embedding endpoint that is down, refuses the key or hangs:
search answers keyword-only with a warning, saves still succeed, and once the
endpoint recovers the reconcile job indexes what was left behind.

Saves are indexed as in production, by a real Celery worker process on the test run's
own Redis (tests/worker.py); this process plays the web server. The endpoint is a real
local HTTP server (tests/search/embedding_server.py)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
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
from tests.worker import CeleryProcess, wait_for, wait_for_index_state

pytestmark = pytest.mark.django_db(transaction=True)

BREAKER_RESET_SECONDS = 0.5
HALF_OPEN_SECONDS = 30.0  # a hang detector: the breakers half-open BREAKER_RESET_SECONDS after opening
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


@pytest.fixture
def worker(remote_team: Agent, start_worker: Callable[..., CeleryProcess], tmp_path: Path) -> CeleryProcess:
    """A worker of this test's own: it reads the same profiles, and its circuit breaker
    starts closed."""
    return start_worker(
        MEMORYHUB_EMBEDDING_PROFILES_FILE=str(tmp_path / "profiles.yaml"),
        MEMORYHUB_TEST_EMBEDDINGS_KEY=API_KEY,
        MEMORYHUB_RECONCILE_AFTER_SECONDS="0",
        # Retry a failed entry at the next reconcile run, not after the backoff.
        MEMORYHUB_INDEX_RETRY_BASE_SECONDS="0",
    )


def save(agent: Agent, key: str, content: str, **extra: Any) -> None:
    response = agent.client.post(
        agent.url("memories/"), {"key": key, "content": content, **extra}, format="json"
    )
    assert response.status_code == 201, response.content


def state(agent: Agent, key: str) -> str:
    return agent.client.get(agent.url(f"memories/{key}/")).json()["index_state"]


def recover(agent: Agent) -> None:
    """Once the breakers half-open, have the worker run the periodic reconcile job. This
    process's breaker opened after the worker's (its query came after the worker's
    indexing failed), with the same reset timeout: once a search here reaches the
    endpoint again, the worker's breaker lets its next call through too."""
    wait_for(
        lambda: search(agent, PARAPHRASE)["search_mode"] == "hybrid",
        HALF_OPEN_SECONDS,
        "this process's breaker to let a query through",
    )
    reconcile_index_states.delay()
    wait_for_index_state(agent.team.id, "deploy-friday")


def assert_keyword_fallback(agent: Agent, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="search.run_search"):
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
    remote_team: Agent, worker: CeleryProcess, server: EmbeddingServer, caplog: pytest.LogCaptureFixture
) -> None:
    save(remote_team, "deploy-friday", CONTENT)  # nothing listens on the port yet

    wait_for_index_state(remote_team.team.id, "deploy-friday", "failed")
    assert_keyword_fallback(remote_team, caplog)

    server.start()
    recover(remote_team)
    assert_recovered(remote_team)


def test_rejected_key_falls_back_to_keyword_without_retrying_and_recovers(
    remote_team: Agent, worker: CeleryProcess, server: EmbeddingServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.behaviour = "unauthorized"
    server.start()

    save(remote_team, "deploy-friday", CONTENT)

    wait_for_index_state(remote_team.team.id, "deploy-friday", "failed")
    assert len(server.requests) == 1  # the worker did not retry a 401
    assert "Incorrect API key" in worker.log_since(0) or "401" in worker.log_since(0)
    assert API_KEY not in worker.log_since(0)
    assert_keyword_fallback(remote_team, caplog)
    for request in caplog.records:
        assert API_KEY not in request.getMessage()

    server.behaviour = "ok"  # the operator fixed the key
    recover(remote_team)
    assert_recovered(remote_team)


def test_slow_endpoint_costs_one_timeout_then_the_breaker_answers(
    remote_team: Agent, worker: CeleryProcess, server: EmbeddingServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.behaviour, server.slow_seconds = "slow", 2.0
    server.start()

    save(remote_team, "deploy-friday", CONTENT)
    wait_for_index_state(remote_team.team.id, "deploy-friday", "failed")
    # This process's first query embedding times out as the worker's indexing did...
    assert_keyword_fallback(remote_team, caplog)
    requests_while_closed = len(server.requests)

    assert_keyword_fallback(remote_team, caplog)
    # ...then its breaker is open: no request reaches the endpoint, so no timeout (two
    # attempts of 0.5 s) is waited out.
    assert len(server.requests) == requests_while_closed

    server.behaviour = "ok"
    recover(remote_team)
    assert_recovered(remote_team)


def test_only_text_never_seen_before_goes_to_the_provider(
    remote_team: Agent, worker: CeleryProcess, server: EmbeddingServer
) -> None:
    """The web process's duplicate check and the worker share the embedding cache."""
    server.start()
    team_id = remote_team.team.id

    save(remote_team, "first", CONTENT)
    wait_for_index_state(team_id, "first")
    embedded_after_first = server.inputs_embedded
    save(remote_team, "copy", CONTENT, allow_duplicate=True)
    wait_for_index_state(team_id, "copy")
    save(remote_team, "first", CONTENT, supersede_reason="minor correction")
    wait_for_index_state(team_id, "first")
    save(remote_team, "other", "The staging database runs on db-3.internal.")
    wait_for_index_state(team_id, "other")

    assert embedded_after_first == 1
    assert server.inputs_embedded == 2  # only "other" was new
    with team_scope(team_id):
        assert ChunkEmbedding.objects.filter(team=remote_team.team).count() == 4
        assert EmbeddingCache.objects.filter(model__startswith="fake-minilm").count() == 2
