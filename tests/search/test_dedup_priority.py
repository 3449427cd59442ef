"""The noisy neighbour: a save's near-duplicate embedding runs on a thread at
the workers' niceness (core.low_priority_threads), so one team's long saves take the CPU that
serving other teams' requests leaves over; the request's own thread keeps its priority.

Nice values are per thread on Linux; this reads them with getpriority(2) on the thread
that runs the model."""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest
from django.conf import settings

from core.low_priority_threads import run_at_background_priority
from memories import writes
from search import services as search_services
from search.embeddings.local import LocalOnnxProvider
from teams.models import Team
from teams.scope import team_scope
from tests.search.conftest import YIELD_BUDGET_MS


def thread_niceness() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def test_the_function_runs_lowered_and_the_caller_keeps_its_priority() -> None:
    assert settings.MEMORYHUB_WORKER_NICENESS > 0
    before = thread_niceness()

    ran_at = run_at_background_priority(thread_niceness)

    assert ran_at == min(19, before + settings.MEMORYHUB_WORKER_NICENESS)
    assert thread_niceness() == before
    assert run_at_background_priority(threading.get_native_id) != threading.get_native_id()


def test_the_functions_exception_reaches_the_caller() -> None:
    def fails() -> None:
        raise ValueError("provider said no")

    with pytest.raises(ValueError, match="provider said no"):
        run_at_background_priority(fails)


@pytest.mark.django_db
def test_a_saves_near_duplicate_embedding_runs_at_background_priority(
    team_with_vectors: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    team = team_with_vectors
    request_niceness = thread_niceness()
    embedded_at: list[int] = []
    original = LocalOnnxProvider.embed_documents

    def observed(self: LocalOnnxProvider, texts: list[str]) -> Any:
        embedded_at.append(thread_niceness())
        return original(self, texts)

    monkeypatch.setattr(LocalOnnxProvider, "embed_documents", observed)

    with team_scope(team.id):
        writes.save_memory(team=team, key="backups", content="Backups run nightly at two.", updated_by="test")

    assert embedded_at == [min(19, request_niceness + settings.MEMORYHUB_WORKER_NICENESS)]
    assert thread_niceness() == request_niceness


def _record_waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    waits: list[float] = []
    wait = search_services.yield_to_other_teams

    def recorded(team_id: int) -> float:
        waits.append(wait(team_id))
        return waits[-1]

    monkeypatch.setattr(search_services, "yield_to_other_teams", recorded)
    return waits


@pytest.mark.django_db
def test_a_saves_near_duplicate_embedding_waits_while_another_team_is_served(
    notes: Any, team_with_vectors: Team, other_team: Team, keep_noting: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As indexing does (tests/search/test_index_yields.py): one wait of at most the
    budget before the save's embedding, and only for other teams' requests."""
    team = team_with_vectors
    waits = _record_waits(monkeypatch)

    keep_noting(team.id)  # the team's own requests do not hold back its saves
    with team_scope(team.id):
        writes.save_memory(team=team, key="backups", content="Backups run nightly.", updated_by="test")
    keep_noting(other_team.id)
    with team_scope(team.id):
        writes.save_memory(team=team, key="alerts", content="Alerts page the owner.", updated_by="test")

    assert len(waits) == 2
    assert waits[0] < YIELD_BUDGET_MS / 1000
    assert YIELD_BUDGET_MS / 1000 <= waits[1] < YIELD_BUDGET_MS / 1000 + 2.0
