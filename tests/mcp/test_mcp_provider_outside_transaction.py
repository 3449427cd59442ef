"""A tool call holds no database transaction while the embedding provider answers, as
a REST request does not (core.request_transaction): neither memory_save's duplicate
check nor memory_search's query. In-process, to watch the provider: the call path is the
server's own (agents.mcp.http.authenticate, then agents.mcp.server.run_tool)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import connection
from django.test import RequestFactory

from agents.mcp.http import admit
from agents.mcp.server import REQUEST_ENVIRON_KEY, run_tool
from agents.mcp.tools import TOOLS
from search.embeddings.profiles import provider_for
from tests.conftest import Agent

NEW_TEXT = "The billing service pages the on-call engineer after three failed renewals."


@pytest.fixture
def provider_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, bool]]]:
    """(first text, whether a transaction was open) of every call to the team's provider."""
    provider = provider_for("local")
    assert provider is not None
    # As a remote endpoint: the model in this process keeps the search's transaction.
    monkeypatch.setattr(provider, "waits_on_network", True)
    calls: list[tuple[str, bool]] = []
    original = provider.embed_documents

    def observed(texts: list[str]) -> list[list[float]]:
        calls.append((texts[0], connection.in_atomic_block))
        return original(texts)

    monkeypatch.setattr(provider, "embed_documents", observed)
    yield calls


def call(agent: Agent, tool: str, arguments: dict[str, object]) -> tuple[dict[str, object], bool]:
    environ = RequestFactory().post("/mcp/", HTTP_AUTHORIZATION=f"Bearer {agent.token}").environ
    assert admit(environ) is None
    return run_tool(TOOLS[tool], environ[REQUEST_ENVIRON_KEY], arguments)


@pytest.mark.django_db(transaction=True)
def test_save_and_search_embed_with_no_transaction_open(
    member: Agent, provider_calls: list[tuple[str, bool]]
) -> None:
    first, is_error = call(
        member, "memory_save", {"key": "deploys", "content": "Deploys happen on Tuesdays."}
    )
    assert not is_error, first
    provider_calls.clear()

    saved, save_failed = call(member, "memory_save", {"key": "billing", "content": NEW_TEXT})
    found, search_failed = call(member, "memory_search", {"query": "who gets paged about renewals"})

    assert not save_failed and saved["key"] == "billing"
    assert not search_failed and found["search_mode"] == "hybrid"
    texts = [text for text, _ in provider_calls]
    assert NEW_TEXT in texts, "the duplicate check embedded the new text"
    assert "who gets paged about renewals" in texts, "the search embedded its query"
    assert [
        open_ for text, open_ in provider_calls if text in (NEW_TEXT, "who gets paged about renewals")
    ] == [
        False,
        False,
    ]
