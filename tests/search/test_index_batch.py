"""Indexing a batch (search.tasks.index_memories → search.batch_indexing.index_batch): a few
set-based statements per batch, not several transactions per entry; the same outcome
as indexing the entries one after the other (the near-duplicate check included); one
entry's bad data never stops the others.

Entries are saved the way memories/batch saves them (memories.writes.save_batch: the
near check pending), their indexing captured after commit and run here."""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memories import writes
from memories.models import IndexState, Memory
from memories.writes.batch import BatchEntry
from search import batch_indexing, services, tasks
from search.chunking import chunk_text
from teams.models import Team
from teams.scope import team_scope
from tests.conftest import operator_view
from tests.search.test_dedup import ON_CALL, ON_CALL_SAME_LENGTH

SUBJECTS = [
    "the billing export", "the nightly backup", "the search cluster", "the mobile release",
    "the payroll run", "the staging database", "the audit log", "the CDN cache",
    "the onboarding flow", "the metrics pipeline", "the VPN gateway", "the invoice mailer",
    "the feature flags", "the build cache", "the SSO login", "the data warehouse",
    "the on-call rota", "the load balancer", "the status page", "the error budget",
    "the backup restore drill", "the image resizer", "the DNS records", "the rate limiter",
]  # fmt: skip
ACTIONS = [
    "moved to a new host", "needs a review every Friday", "was rewritten in Go",
    "fails when the disk is full", "is owned by the platform team", "runs at 02:00 UTC",
    "was retired last spring", "doubles its traffic in December",
]  # fmt: skip


def texts(count: int, offset: int = 0) -> list[str]:
    """Distinct short texts, none a near duplicate of another."""
    return [
        f"Note {offset + n}: {SUBJECTS[(offset + n) % len(SUBJECTS)]} "
        f"{ACTIONS[(offset + n) // len(SUBJECTS) % len(ACTIONS)]} (ticket OPS-{1000 + offset + n})."
        for n in range(count)
    ]


@pytest.fixture
def batch_save(django_capture_on_commit_callbacks: Any) -> Callable[..., list[str]]:
    """Save `contents` as memories/batch does (near check pending); their indexing is
    captured, not run. Returns the ids in the batch's order."""

    def batch_save(team: Team, contents: list[str], prefix: str) -> list[str]:
        entries = [
            BatchEntry(index=n, key=f"{prefix}-{n:03d}", content=content)
            for n, content in enumerate(contents)
        ]
        with django_capture_on_commit_callbacks(execute=False), team_scope(team.id):
            outcomes = writes.save_batch(team=team, entries=entries, updated_by="test")
        assert [outcome.status for outcome in outcomes] == ["created"] * len(contents)
        return [str(outcome.result.memory.id) for outcome in outcomes]  # type: ignore[union-attr]

    return batch_save


@pytest.fixture
def announced(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """What index_memories hands to announce_indexed (not run here)."""
    handed: list[list[str]] = []
    monkeypatch.setattr(tasks, "enqueue_announce", lambda team_id, ids: handed.append(list(ids)))
    return handed


def rows(ids: list[str]) -> dict[str, Memory]:
    with operator_view():
        return {str(m.id): m for m in Memory.objects.filter(id__in=ids)}


def warm_cache(team: Team, contents: list[str]) -> None:
    provider = services.team_provider(team)
    assert provider is not None
    pieces = [piece for content in contents for piece in chunk_text(content)]
    services.cached_embeddings(provider, [(p.content_hash, p.text) for p in pieces], team_id=team.id)


def statements_to_index(team: Team, ids: list[str]) -> int:
    with CaptureQueriesContext(connection) as queries:
        outcome = tasks.index_memories(team.id, ids)
    assert outcome == {services.IndexOutcome.INDEXED: len(ids)}
    return len(queries)


def test_statements_per_batch_do_not_grow_with_its_entries(
    team: Team, batch_save: Any, announced: list[list[str]]
) -> None:
    """With the team's cache holding the vectors (the batch save's case after a
    re-delivery, or an import of texts seen before), a batch of 40 entries takes as many
    statements as a batch of 4: chunks, cache, vectors, success marks and near checks
    are each a statement or two per batch."""
    tasks.index_memories(team.id, batch_save(team, texts(3, offset=900), "seed"))  # the team has vectors
    small, large = texts(4), texts(40, offset=4)
    warm_cache(team, small + large)
    small_ids, large_ids = batch_save(team, small, "small"), batch_save(team, large, "large")

    assert statements_to_index(team, large_ids) == statements_to_index(team, small_ids)
    settled = rows(small_ids + large_ids)
    assert {m.index_state for m in settled.values()} == {IndexState.INDEXED}
    assert not any(m.near_check_pending for m in settled.values())
    assert all(m.is_active for m in settled.values())
    assert announced[-2:] == [large_ids, small_ids]


def test_without_cached_vectors_only_the_provider_batches_add_statements(
    team: Team, batch_save: Any, announced: list[list[str]]
) -> None:
    """What the cache lacks is embedded one provider batch at a time (each after the
    look at other teams' requests), each with its cache read and write: statements grow
    with the provider batches (a cache write each), never with the entries."""
    tasks.index_memories(team.id, batch_save(team, texts(3, offset=900), "seed"))
    contents = texts(30)
    warm_cache(team, contents[:1])  # a warm run's fixed cost is measured on one entry
    one = statements_to_index(team, batch_save(team, contents[:1], "one"))
    ids = batch_save(team, contents[1:], "cold")
    provider = services.team_provider(team)
    assert provider is not None
    provider_batches = math.ceil(sum(len(chunk_text(c)) for c in contents[1:]) / provider.batch_size)

    cold = statements_to_index(team, ids)

    # Each: the team scope's settings around one cache write.
    assert cold <= one + 5 * provider_batches, (cold, one, provider_batches)
    assert {m.index_state for m in rows(ids).values()} == {IndexState.INDEXED}


def test_the_provider_gets_chunks_of_about_one_length_per_batch(
    team: Team, batch_save: Any, announced: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A provider batch is padded to its longest chunk: entries short and long in turn
    are embedded shortest first, so no batch of short chunks carries a long one, and
    every chunk is embedded once, with the vector it gets alone."""
    tasks.index_memories(team.id, batch_save(team, texts(3, offset=900), "seed"))
    short = texts(12, offset=100)
    long = [
        f"{text} " + " ".join(f"Step {n}: check {text.lower()}" for n in range(12)) for text in texts(12, 200)
    ]
    contents = [text for pair in zip(short, long, strict=True) for text in pair]
    ids = batch_save(team, contents, "mixed")
    provider = services.team_provider(team)
    assert provider is not None
    sent: list[list[str]] = []
    embed = provider.embed_documents

    def recording(chunk_texts: list[str]) -> list[list[float]]:
        sent.append(list(chunk_texts))
        return embed(chunk_texts)

    monkeypatch.setattr(provider, "embed_documents", recording)

    assert tasks.index_memories(team.id, ids) == {services.IndexOutcome.INDEXED: len(ids)}

    lengths = [len(text) for batch in sent for text in batch]
    assert lengths == sorted(lengths)
    assert max(len(text) for text in sent[0]) < min(len(text) for text in sent[-1])
    expected = sorted(piece.text for content in contents for piece in chunk_text(content))
    assert sorted(text for batch in sent for text in batch) == expected
    monkeypatch.undo()
    [piece] = chunk_text(short[0])
    with team_scope(team.id):  # the vector stored, read back from the team's cache
        stored = services.cached_embeddings(provider, [(piece.content_hash, piece.text)], team_id=team.id)
    assert stored[piece.content_hash] == pytest.approx(embed([piece.text])[0], abs=1e-5)


@pytest.mark.parametrize("first", [ON_CALL, ON_CALL_SAME_LENGTH])
def test_near_duplicates_within_one_batch_merge_as_when_indexed_one_by_one(
    team: Team, batch_save: Any, announced: list[list[str]], first: str
) -> None:
    """Two texts of the same length, near each other, in one batch: the later one is
    checked against the earlier one (the earlier one's check never sees the later one,
    whose vectors did not exist when entries were checked one by one), and, not longer,
    is the one superseded."""
    second = ON_CALL_SAME_LENGTH if first == ON_CALL else ON_CALL
    assert len(first) == len(second)
    ids = batch_save(team, [first, second, *texts(3)], "entry")

    tasks.index_memories(team.id, ids)

    settled = rows(ids)
    assert settled[ids[0]].is_active and settled[ids[0]].content == first
    assert str(settled[ids[0]].supersedes_id) == ids[1] and settled[ids[0]].supersede_kind == "soft"
    assert not settled[ids[1]].is_active
    assert all(settled[i].is_active for i in ids[2:])
    assert not any(m.near_check_pending for m in settled.values())


def test_one_entrys_bad_data_does_not_stop_the_others(
    team: Team, batch_save: Any, announced: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An entry whose indexing raises (here its chunking) fails the set-based pass; the
    batch is then indexed entry by entry: the others are indexed and checked, the bad
    one is `failed` with its attempt counted and its error class, for the retry."""
    contents = [*texts(3), "POISON: this entry cannot be chunked", *texts(2, offset=3)]
    ids = batch_save(team, contents, "entry")
    chunk = services.chunk_text

    def chunk_or_raise(text: str) -> Any:
        if text.startswith("POISON"):
            raise ValueError("bad data")
        return chunk(text)

    # The batch's pass and the one-by-one indexing after it both meet the bad entry.
    monkeypatch.setattr(batch_indexing, "chunk_text", chunk_or_raise)
    monkeypatch.setattr(services, "chunk_text", chunk_or_raise)

    outcome = tasks.index_memories(team.id, ids)

    assert outcome == {services.IndexOutcome.INDEXED: 5, services.IndexOutcome.FAILED: 1}
    settled = rows(ids)
    bad = settled.pop(ids[3])
    assert bad.index_state == IndexState.FAILED and bad.index_attempts == 1
    assert bad.index_last_error == "ValueError" and bad.index_next_attempt_at is not None
    assert bad.near_check_pending  # the retry that indexes it checks it
    assert {m.index_state for m in settled.values()} == {IndexState.INDEXED}
    assert not any(m.near_check_pending for m in settled.values())
    assert announced == [[i for i in ids if i != ids[3]]]


def test_a_deleted_or_missing_entry_is_gone_and_the_others_indexed(
    team: Team, batch_save: Any, announced: list[list[str]]
) -> None:
    ids = batch_save(team, texts(4), "entry")
    with operator_view():
        deleted = Memory.objects.get(id=ids[1])
    with team_scope(team.id):
        writes.delete_memory(team=team, key=deleted.key, deleted_by="test")
    missing = str(uuid.uuid4())

    outcome = tasks.index_memories(team.id, [*ids, missing])

    assert outcome == {services.IndexOutcome.INDEXED: 3, services.IndexOutcome.GONE: 2}
    settled = rows(ids)
    assert not settled[ids[1]].near_check_pending
    assert {settled[i].index_state for i in (ids[0], ids[2], ids[3])} == {IndexState.INDEXED}
    assert announced == [[ids[0], ids[2], ids[3]]]


def test_a_second_delivery_of_the_batch_changes_nothing(
    team: Team, batch_save: Any, announced: list[list[str]]
) -> None:
    ids = batch_save(team, [ON_CALL, ON_CALL_SAME_LENGTH, *texts(3)], "entry")
    tasks.index_memories(team.id, ids)
    before = {i: (m.is_active, m.supersedes_id, m.index_state) for i, m in rows(ids).items()}

    outcome = tasks.index_memories(team.id, ids)

    assert outcome == {services.IndexOutcome.INDEXED: 5}
    assert {i: (m.is_active, m.supersedes_id, m.index_state) for i, m in rows(ids).items()} == before
