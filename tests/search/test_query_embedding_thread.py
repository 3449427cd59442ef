"""A hybrid search embeds its query on a thread of its own while the keyword path reads
(search.run_search.start_query_embedding): the search waits for the longer of the two,
not their sum. Through the REST API with the embedded local model."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test import override_settings

from core import process_thread_pools
from core.request_id import current_request_id
from search import run_search
from search.embeddings.profiles import provider_for, reset_providers
from tests.conftest import Agent, search

FRIDAYS = "Never deploy on Fridays or before holidays."
QUERY = "may we deploy on a friday?"


@pytest.fixture
def fridays_team(member: Agent, save) -> Agent:  # type: ignore[no-untyped-def]
    save(member, "friday-deploys", FRIDAYS)
    save(member, "lunch", "The team orders pizza on Wednesdays from the place on Elm Street.")
    return member


def _noting_keyword_reads(read: threading.Event) -> Callable[..., Any]:
    def wrapper(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        if "search_keywordstat" in sql:
            read.set()
        return execute(sql, params, many, context)

    return wrapper


def test_the_keyword_path_reads_while_the_query_is_embedded(
    fridays_team: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider = provider_for("local")
    assert provider is not None
    keyword_read = threading.Event()
    seen: dict[str, Any] = {}
    embed = provider.embed_query

    def embed_query(text: str) -> list[float]:
        seen["thread"] = threading.current_thread().name
        seen["request id"] = current_request_id.get()
        # A search that embedded before reading keywords would wait here in vain.
        seen["keyword path read first"] = keyword_read.wait(timeout=10)
        return embed(text)

    monkeypatch.setattr(provider, "embed_query", embed_query)
    with connection.execute_wrapper(_noting_keyword_reads(keyword_read)):
        response = fridays_team.client.post(
            fridays_team.url("search/"), {"query": QUERY}, format="json", HTTP_X_REQUEST_ID="overlap-1"
        )

    assert response.status_code == 200, response.content
    body = response.json()
    assert seen["keyword path read first"] is True
    assert seen["thread"].startswith("query-embedding") and seen["thread"] != threading.current_thread().name
    # The caller's context goes with the call: the thread's log lines name the request.
    assert seen["request id"] == "overlap-1"
    assert body["search_mode"] == "hybrid"
    assert body["results"][0]["key"] == "friday-deploys"
    assert "vector" in body["results"][0]["source"]


def test_threaded_and_inline_embedding_give_the_same_answer(
    fridays_team: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    threaded = search(fridays_team, QUERY, explain=True)
    start = run_search.start_query_embedding
    monkeypatch.setattr(
        run_search,
        "start_query_embedding",
        lambda **kwargs: start(**{**kwargs, "on_a_thread": False}),
    )

    inline = search(fridays_team, QUERY, explain=True)

    assert threaded["search_mode"] == inline["search_mode"] == "hybrid"
    assert [(r["key"], r["score"], r["explain"]) for r in threaded["results"]] == [
        (r["key"], r["score"], r["explain"]) for r in inline["results"]
    ]


@pytest.fixture
def broken_local_model(fridays_team: Agent, tmp_path: Path) -> Iterator[Agent]:
    """The team's profile is a local model whose file does not match its checksum:
    it fails on the embedding thread, when it is first loaded."""
    profiles = tmp_path / "profiles.yaml"
    profiles.write_text(
        f"""
profiles:
  tampered:
    provider: local
    model: minilm-tampered
    model_sha256: "{"0" * 64}"
    dimensions: 384
""",
        encoding="utf-8",
    )
    fridays_team.team.embedding_profile = "tampered"
    fridays_team.team.save()
    with override_settings(MEMORYHUB_EMBEDDING_PROFILES_FILE=str(profiles)):
        reset_providers()
        yield fridays_team
    reset_providers()


def test_a_model_failing_on_the_thread_answers_keyword_only_with_the_warning(
    broken_local_model: Agent, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="search.run_search"):
        body = search(broken_local_model, QUERY)

    assert body["search_mode"] == "keyword"
    assert body["warnings"] == [run_search.PROVIDER_UNAVAILABLE_WARNING]
    assert body["results"][0]["key"] == "friday-deploys"
    assert "sha256" not in str(body)
    assert any("sha256" in record.getMessage() for record in caplog.records)


def test_a_process_forked_with_the_pool_starts_a_pool_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    here = run_search._EMBEDDING_THREADS.pool()
    assert run_search._EMBEDDING_THREADS.pool() is here

    monkeypatch.setattr(process_thread_pools.os, "getpid", lambda: -1)
    child = run_search._EMBEDDING_THREADS.pool()

    assert child is not here
    assert child.submit(lambda: "ran").result(timeout=10) == "ran"
