"""The noisy neighbour: indexing one team's entries waits while other teams'
requests are being served (core.yield_to_requests), so a team flooding the service with saves
does not have the worker compete with another team's reads.

Against the run's own Redis (tests.worker's embedded_redis): an API request notes its
team; the indexing of team A's long entry looks before every batch of chunks, waits
while team B is noted, never longer than the budget per batch, and does not wait for
A's own requests; with Redis gone, nothing waits."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import redis
from django.conf import settings

from core import yield_to_requests
from memories import writes
from search import batch_indexing
from search import services as search_services
from search.chunking import chunk_text
from teams.models import Team
from teams.scope import team_scope
from tests.conftest import Agent
from tests.search.conftest import YIELD_BUDGET_MS as BUDGET_MS

pytestmark = pytest.mark.django_db

LONG_TEXT = "\n\n".join(
    f"Runbook part {n}: the {word} service pages its owner, keeps its alert rules in the "
    f"repository and is reviewed every quarter by the {word} team. " * 14
    for n, word in enumerate(["billing", "search", "auth", "storage", "mail", "queue", "cache", "maps"])
)


def test_an_api_request_notes_its_team(notes: redis.Redis, member: Agent, other_team: Team) -> None:
    before = time.time() * 1000
    assert member.client.get(member.url("memories/")).status_code == 200
    noted = _sent_score(notes, member.team.id)
    assert noted is not None and noted >= before - 1
    assert notes.zscore(yield_to_requests.KEY, str(other_team.id)) is None
    # One member per team, not one per request.
    member.client.get(member.url("memories/"))
    yield_to_requests.send_pending_notes()
    assert notes.zcard(yield_to_requests.KEY) == 1


def _sent_score(notes: redis.Redis, team_id: int) -> float | None:
    """The team's note once the process's sender thread has sent it (within a second)."""
    deadline = time.monotonic() + 1.0
    while (
        score := notes.zscore(yield_to_requests.KEY, str(team_id))
    ) is None and time.monotonic() < deadline:
        time.sleep(0.005)
    return score


def test_the_request_only_hands_its_note_to_the_sender_thread(
    notes: redis.Redis, team: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No round trip to Redis on the request's thread: the ZADD is the sender's."""
    sending_threads: list[str] = []
    zadd = redis.Redis.zadd

    def recorded_zadd(self: redis.Redis, *args: Any, **kwargs: Any) -> Any:
        sending_threads.append(threading.current_thread().name)
        return zadd(self, *args, **kwargs)

    monkeypatch.setattr(redis.Redis, "zadd", recorded_zadd)
    yield_to_requests.note_team_request(team.id)
    assert _sent_score(notes, team.id) is not None
    assert sending_threads and threading.current_thread().name not in sending_threads


def test_a_process_notes_a_team_again_only_after_a_fifth_of_the_window(
    notes: redis.Redis, team: Team, other_team: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = {"now": yield_to_requests._now_ms()}
    monkeypatch.setattr(yield_to_requests, "_now_ms", lambda: clock["now"])
    interval = settings.MEMORYHUB_FOREGROUND_WINDOW_MS // yield_to_requests.NOTE_SHARE_OF_WINDOW
    first = clock["now"]
    yield_to_requests.note_team_request(team.id)
    clock["now"] = first + interval - 1
    yield_to_requests.note_team_request(team.id)  # sends nothing: the first note stands
    yield_to_requests.note_team_request(other_team.id)  # another team is its own
    yield_to_requests.send_pending_notes()
    assert notes.zscore(yield_to_requests.KEY, str(team.id)) == first
    assert notes.zscore(yield_to_requests.KEY, str(other_team.id)) == first + interval - 1
    clock["now"] = first + interval
    yield_to_requests.note_team_request(team.id)
    yield_to_requests.send_pending_notes()
    assert notes.zscore(yield_to_requests.KEY, str(team.id)) == first + interval
    # A clock set back is not read as "just noted".
    clock["now"] = first - 10_000
    yield_to_requests.note_team_request(team.id)
    yield_to_requests.send_pending_notes()
    assert notes.zscore(yield_to_requests.KEY, str(team.id)) == first - 10_000


def test_only_other_teams_requests_count_and_only_within_the_window(
    notes: redis.Redis, team: Team, other_team: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    noted_at = yield_to_requests._now_ms()
    monkeypatch.setattr(yield_to_requests, "_now_ms", lambda: noted_at)
    yield_to_requests.note_team_request(team.id)
    yield_to_requests.send_pending_notes()
    assert not yield_to_requests.other_teams_active(team.id)
    assert yield_to_requests.other_teams_active(other_team.id)
    # The notes' clock moved on rather than waited out: the window's last millisecond...
    window = settings.MEMORYHUB_FOREGROUND_WINDOW_MS
    monkeypatch.setattr(yield_to_requests, "_now_ms", lambda: noted_at + window)
    assert yield_to_requests.other_teams_active(other_team.id)
    # ...and the next one.
    monkeypatch.setattr(yield_to_requests, "_now_ms", lambda: noted_at + window + 1)
    assert not yield_to_requests.other_teams_active(other_team.id)
    # Looking drops what is older than the window: the set stays as small as the
    # number of teams served within it.
    assert notes.zcard(yield_to_requests.KEY) == 0


def _record_steps(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, float]]:
    """Each wait and each batch embedded by search.services, in order, from now on."""
    steps: list[tuple[str, float]] = []
    wait, embed = search_services.yield_to_other_teams, search_services.cached_embeddings

    def recorded_wait(team_id: int) -> float:
        waited = wait(team_id)
        steps.append(("wait", waited))
        return waited

    def recorded_embed(provider: Any, items: Any, *, team_id: int) -> dict[str, list[float]]:
        items = list(items)
        steps.append(("embed", len(items)))
        return embed(provider, items, team_id=team_id)

    monkeypatch.setattr(search_services, "yield_to_other_teams", recorded_wait)
    monkeypatch.setattr(search_services, "cached_embeddings", recorded_embed)
    return steps


def _save(team: Team, key: str, content: str) -> str:
    with team_scope(team.id):
        return str(
            writes.save_memory(
                team=team, key=key, content=content, updated_by="test", allow_duplicate=True
            ).memory.id
        )


def _index_long_entry(team: Team, monkeypatch: pytest.MonkeyPatch) -> tuple[list[tuple[str, float]], str]:
    """Index a long entry of `team`, recording each wait and each batch embedded, in order."""
    memory_id = _save(team, "runbooks", LONG_TEXT)
    steps = _record_steps(monkeypatch)
    outcome = search_services.index_memory(team_id=team.id, memory_id=memory_id)
    return steps, outcome


def test_indexing_waits_before_every_batch_while_another_team_is_served(
    notes: redis.Redis, team: Team, other_team: Team, keep_noting: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    chunks = len(chunk_text(LONG_TEXT))
    provider = search_services.team_provider(team)
    assert provider is not None and chunks > provider.batch_size  # two batches at least
    keep_noting(other_team.id)

    steps, outcome = _index_long_entry(team, monkeypatch)

    assert outcome == search_services.IndexOutcome.INDEXED
    assert [kind for kind, _ in steps] == ["wait", "embed"] * (len(steps) // 2)
    assert sum(size for kind, size in steps if kind == "embed") == chunks
    waits = [seconds for kind, seconds in steps if kind == "wait"]
    # The other team never stopped: every batch waited out its whole budget, and no more
    # than that (a hang detector's margin, not a speed target).
    assert all(BUDGET_MS / 1000 <= seconds < BUDGET_MS / 1000 + 2.0 for seconds in waits)


def test_a_batchs_chunks_wait_before_every_provider_batch_too(
    notes: redis.Redis, team: Team, other_team: Team, keep_noting: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batch path (memories/batch, imports: search.batch_indexing.index_batch) embeds a
    whole message's chunks the cache lacks in provider batches, each after the same look."""
    ids = [_save(team, f"runbook-{n}", f"{n}: {LONG_TEXT}") for n in range(2)]
    keep_noting(other_team.id)
    provider = search_services.team_provider(team)
    assert provider is not None
    steps: list[tuple[str, float]] = []
    wait, embed = batch_indexing.yield_to_other_teams, provider.embed_documents

    def recorded_wait(team_id: int) -> float:
        waited = wait(team_id)
        steps.append(("wait", waited))
        return waited

    def recorded_embed(texts: list[str]) -> list[list[float]]:
        steps.append(("embed", len(texts)))
        return embed(texts)

    monkeypatch.setattr(batch_indexing, "yield_to_other_teams", recorded_wait)
    monkeypatch.setattr(provider, "embed_documents", recorded_embed)

    outcomes = batch_indexing.index_batch(team_id=team.id, memory_ids=ids)

    assert set(outcomes.values()) == {search_services.IndexOutcome.INDEXED}
    distinct = {p.content_hash for n in range(2) for p in chunk_text(f"{n}: {LONG_TEXT}")}
    assert [kind for kind, _ in steps] == ["wait", "embed"] * (len(steps) // 2)
    # Each distinct chunk embedded once (the two entries share most of theirs).
    assert len(steps) // 2 == -(-len(distinct) // provider.batch_size) >= 2
    assert sum(size for kind, size in steps if kind == "embed") == len(distinct)
    assert all(seconds >= BUDGET_MS / 1000 for kind, seconds in steps if kind == "wait")


def test_a_teams_own_requests_never_pause_its_indexing(
    notes: redis.Redis, team: Team, keep_noting: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    keep_noting(team.id)

    steps, outcome = _index_long_entry(team, monkeypatch)

    assert outcome == search_services.IndexOutcome.INDEXED
    waits = [seconds for kind, seconds in steps if kind == "wait"]
    assert len(waits) >= 2
    assert all(seconds < BUDGET_MS / 1000 for seconds in waits)


def test_without_redis_nothing_is_noted_and_nothing_waits(
    settings: Any, team: Team, other_team: Team, tmp_path: Any
) -> None:
    settings.REDIS_URL = f"unix://{tmp_path / 'no-redis.sock'}"
    settings.MEMORYHUB_INDEX_YIELD_MAX_MS = BUDGET_MS
    yield_to_requests._down_until = 0.0
    yield_to_requests.note_team_request(other_team.id)
    yield_to_requests.send_pending_notes()
    # The failure is remembered: the next calls do not try Redis again for a while.
    assert yield_to_requests._down_until > time.monotonic()
    assert yield_to_requests.yield_to_other_teams(team.id) == 0.0
    assert not yield_to_requests.other_teams_active(team.id)
    yield_to_requests._down_until = 0.0
