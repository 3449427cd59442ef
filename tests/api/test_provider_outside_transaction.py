"""An API request holds no database transaction while the
embedding provider answers, neither for the save's duplicate check nor for a search's
query; and it goes on bound to its team afterwards (core.request_transaction)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import connection, connections

from search.embeddings.profiles import provider_for
from tests.conftest import Agent

NEW_TEXT = "The billing service pages the on-call engineer after three failed renewals."


@pytest.fixture
def provider_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, bool]]]:
    """(first text, whether a transaction was open) of every call to the team's provider,
    which says it waits on the network as a remote endpoint does."""
    provider = provider_for("local")
    assert provider is not None
    monkeypatch.setattr(provider, "waits_on_network", True)
    calls: list[tuple[str, bool]] = []
    original = provider.embed_documents

    def observed(texts: list[str]) -> list[list[float]]:
        calls.append((texts[0], connection.in_atomic_block))
        return original(texts)

    monkeypatch.setattr(provider, "embed_documents", observed)
    yield calls


@pytest.mark.django_db(transaction=True)
def test_the_duplicate_check_and_the_query_embed_with_no_transaction_open(
    member: Agent, outsider: Agent, provider_calls: list[tuple[str, bool]]
) -> None:
    first = member.client.post(
        member.url("memories/"), {"key": "deploys", "content": "Deploys happen on Tuesdays."}, format="json"
    )
    assert first.status_code == 201  # indexed in-process at its commit: the team has vectors
    outsider.client.post(
        outsider.url("memories/"),
        {"key": "billing", "content": NEW_TEXT + " Bravo only."},
        format="json",
    )
    provider_calls.clear()

    saved = member.client.post(
        member.url("memories/"), {"key": "billing", "content": NEW_TEXT}, format="json"
    )
    searched = member.client.post(
        member.url("search/"), {"query": "who gets paged about renewals", "mode": "hybrid"}, format="json"
    )

    assert saved.status_code == 201, saved.content
    assert searched.status_code == 200, searched.content
    texts = [text for text, _ in provider_calls]
    assert NEW_TEXT in texts, "the duplicate check embedded the new text"
    assert "who gets paged about renewals" in texts, "the search embedded its query"
    assert [text for text, in_transaction in provider_calls if in_transaction] == []
    # Back in a transaction bound to the team: the save was written, the search sees
    # only this team's entries.
    assert [r["key"] for r in searched.json()["results"]][:1] == ["billing"]
    assert b"Bravo only" not in searched.content


@pytest.mark.django_db(transaction=True)
def test_a_query_to_the_model_in_this_process_keeps_the_transaction(
    member: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stepping out costs a COMMIT, a BEGIN and the binding: more than the model's few
    milliseconds. The save's duplicate check still steps out (it yields to other teams'
    requests, which may take longer)."""
    provider = provider_for("local")
    assert provider is not None and provider.waits_on_network is False
    calls: list[tuple[str, bool]] = []
    original = provider.embed_documents
    # The query is embedded on a thread of its own (search.run_search): what counts is
    # the request's connection, this thread's, still in its transaction meanwhile.
    request_connection = connections["default"]

    def observed(texts: list[str]) -> list[list[float]]:
        calls.append((texts[0], request_connection.in_atomic_block))
        return original(texts)

    monkeypatch.setattr(provider, "embed_documents", observed)
    saved = member.client.post(
        member.url("memories/"), {"key": "billing", "content": NEW_TEXT}, format="json"
    )
    assert saved.status_code == 201, saved.content
    calls.clear()
    searched = member.client.post(
        member.url("search/"), {"query": "who gets paged about renewals", "mode": "hybrid"}, format="json"
    )
    assert searched.status_code == 200, searched.content
    assert calls == [("who gets paged about renewals", True)]
    assert [r["key"] for r in searched.json()["results"]][:1] == ["billing"]
