"""A re-index racing with indexing loses nothing.

A team is moved to another embedding model while entries are saved and indexed with
the old one. The switch deletes the old model's vectors; an entry indexed with the old
model after the re-index read its list of chunks used to keep its `indexed` state with
no vector of the new model, and vanished from vector search for good. Now the switch
holds the team's row (indexing stores vectors under a share lock of it, after checking
the model) and queues again every live entry the new model does not cover.

The first test forces the interleaving: the fake provider (a real local HTTP server,
tests/search/embedding_server.py) saves and indexes an entry, as a concurrent worker
would, while it answers the re-index's first request. The third forces the re-index's
chunking of a never-chunked entry to meet the entry's index task chunking it (that
re-index used to fail, leaving the whole team on the old model). The last test runs
saves and a re-index on two real worker processes (tests/worker.py), and prints every
entry's state when it gives up."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.db import connection
from django.test import override_settings

from memories import writes
from memories.models import Memory
from search.chunking import chunk_text
from search.embeddings.local import LocalOnnxProvider
from search.embeddings.profiles import reset_providers
from search.models import Chunk, ChunkEmbedding
from search.reindexing import reindex_team
from search.services import replace_chunks
from search.tasks import reindex_team as reindex_task
from teams.models import Team
from teams.scope import team_scope
from tests.conftest import Agent, operator_view
from tests.factories import MemoryFactory
from tests.search.embedding_server import API_KEY, EmbeddingServer
from tests.worker import CeleryProcess, wait_for, wait_for_index_state

pytestmark = pytest.mark.django_db(transaction=True)

NEW_MODEL = "fake-minilm@128"
WAIT_SECONDS = 30.0  # a hang detector
PROFILES = """
profiles:
  small:
    provider: openai
    base_url: {base_url}
    api_key_env: MEMORYHUB_TEST_EMBEDDINGS_KEY
    model: fake-minilm
    dimensions: 128
    send_dimensions: true
    max_attempts: 1
    timeout: {{connect: 0.5, read: 20}}
  big:
    provider: openai
    base_url: {base_url}
    api_key_env: MEMORYHUB_TEST_EMBEDDINGS_KEY
    model: fake-minilm
    dimensions: 256
    send_dimensions: true
    max_attempts: 1
    timeout: {{connect: 0.5, read: 20}}
"""
NOTES = {
    "deploy-friday": "Never deploy to production on Fridays: nobody is around over the weekend.",
    "db-host": "The staging database runs on db-3.internal, port 5433.",
    "lunch": "The team orders pizza on Wednesdays.",
}
LATE_KEY = "on-call"
LATE_CONTENT = "The on-call engineer this week is Ada Lovelace; page her through the rota tool."


@pytest.fixture
def profiles(server: EmbeddingServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path / "profiles.yaml"
    path.write_text(PROFILES.format(base_url=server.base_url))
    monkeypatch.setenv("MEMORYHUB_TEST_EMBEDDINGS_KEY", API_KEY)
    with override_settings(MEMORYHUB_EMBEDDING_PROFILES_FILE=str(path)):
        reset_providers()
        yield path
    reset_providers()


class ProviderWithHook:
    """Stands in for the fake server's model: runs `hook` once, on the first request,
    before answering it (what the server answers is unchanged)."""

    def __init__(self, local: LocalOnnxProvider, hook: Callable[[], None]) -> None:
        self.local, self.hook, self.fired = local, hook, threading.Event()
        self.errors: list[BaseException] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if not self.fired.is_set():
            self.fired.set()
            try:
                self.hook()
            except BaseException as error:  # reported by the test, not lost in the server thread
                self.errors.append(error)
            finally:
                connection.close()  # this server thread's own database connection
        return self.local.embed_documents(texts)


def blocked_by(pid: int) -> bool:
    """Whether a session of this database waits for a lock that backend `pid` holds."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND %s = ANY(pg_blocking_pids(pid))",
            [pid],
        )
        return bool(cursor.fetchone()[0])


def coverage(team: Team) -> dict[str, tuple[str, int, int]]:
    """key → (index_state, chunks, chunks with a vector of the new model), live entries."""
    with team_scope(team.id):
        return {
            memory.key: (
                memory.index_state,
                Chunk.objects.filter(memory=memory).count(),
                ChunkEmbedding.objects.filter(chunk__memory=memory, model=NEW_MODEL).count(),
            )
            for memory in Memory.objects.filter(team=team, deleted_at__isnull=True)
        }


def describe_coverage(team: Team) -> str:
    """Per live entry: index_state, when it was queued, its chunks and the models of its
    vectors: what a test that gives up waiting prints."""
    lines = []
    with team_scope(team.id):
        for memory in Memory.objects.filter(team=team, deleted_at__isnull=True).order_by("created_at"):
            models = sorted(
                set(ChunkEmbedding.objects.filter(chunk__memory=memory).values_list("model", flat=True))
            )
            chunks = Chunk.objects.filter(memory=memory).count()
            lines.append(
                f"{memory.key}: {memory.index_state}, queued {memory.index_queued_at}, "
                f"attempts {memory.index_attempts} {memory.index_last_error}, {chunks} chunks, models {models}"
            )
        profile = Team.objects.get(id=team.id).embedding_profile
    return f"team profile {profile!r}\n" + "\n".join(lines)


def assert_every_entry_is_searchable_with_the_new_model(team: Team) -> None:
    entries = coverage(team)
    assert entries, "no entries: the check proves nothing"
    for key, (state, chunks, vectors) in entries.items():
        assert (state, vectors) == ("indexed", chunks) and chunks > 0, f"{key}: {state}, {vectors}/{chunks}"
    with team_scope(team.id):
        assert set(ChunkEmbedding.objects.filter(team=team).values_list("model", flat=True)) == {NEW_MODEL}


def test_an_entry_indexed_with_the_old_model_during_a_reindex_is_indexed_again_with_the_new(
    profiles: Path, member: Agent, server: EmbeddingServer
) -> None:
    for key, content in NOTES.items():  # indexed at once (in-process, after commit)
        response = member.client.post(
            member.url("memories/"), {"key": key, "content": content}, format="json"
        )
        assert response.status_code == 201
    assert {state for state, _, _ in coverage(member.team).values()} == {"indexed"}

    def save_and_index_with_the_old_model() -> None:
        # A concurrent save, indexed at its commit (with the team's current model, the
        # old one) while the re-index is embedding the chunks it listed before.
        with team_scope(member.team.id):
            writes.save_memory(team=member.team, key=LATE_KEY, content=LATE_CONTENT, updated_by="t")
        with team_scope(member.team.id):
            late = Memory.objects.get(team=member.team, key=LATE_KEY)
            assert late.index_state == "indexed"
            assert not ChunkEmbedding.objects.filter(chunk__memory=late, model=NEW_MODEL).exists()

    hooked = ProviderWithHook(server.local, save_and_index_with_the_old_model)
    server.local = hooked  # type: ignore[assignment]
    server.start()

    report = reindex_team(team_id=member.team.id, profile="small")

    assert hooked.fired.is_set() and not hooked.errors, hooked.errors
    assert report.model == NEW_MODEL
    member.team.refresh_from_db()
    assert member.team.embedding_profile == "small"
    assert_every_entry_is_searchable_with_the_new_model(member.team)


def test_indexing_that_embedded_with_the_old_model_embeds_again_when_the_switch_came_first(
    profiles: Path, member: Agent, server: EmbeddingServer
) -> None:
    """The other order: indexing embeds with the old model, the re-index switches the
    team, then indexing stores. It must not store (and call indexed) the old model's
    vectors; it embeds again with the team's new model."""
    with operator_view():
        Team.objects.filter(id=member.team.id).update(embedding_profile="big")

    def switch_to_the_new_model() -> None:
        # What reindex_team's switch does, for a team whose other entries are covered.
        with operator_view():
            Team.objects.filter(id=member.team.id).update(embedding_profile="small")
            ChunkEmbedding.objects.filter(team_id=member.team.id).exclude(model=NEW_MODEL).delete()

    hooked = ProviderWithHook(server.local, switch_to_the_new_model)
    server.local = hooked  # type: ignore[assignment]
    server.start()

    # Indexed at its commit: the first request to the provider is this entry's, with "big".
    response = member.client.post(
        member.url("memories/"), {"key": LATE_KEY, "content": LATE_CONTENT}, format="json"
    )

    assert response.status_code == 201
    assert hooked.fired.is_set() and not hooked.errors, hooked.errors
    assert server.requests[0]["dimensions"] == 256
    assert_every_entry_is_searchable_with_the_new_model(member.team)


def test_a_reindex_that_meets_an_indexing_chunking_the_same_entry_waits_for_it_and_completes(
    profiles: Path, member: Agent, server: EmbeddingServer
) -> None:
    """The re-index chunks the entries saved but never chunked; the index task of such an
    entry chunks it at the same moment. Forced here: the task's first step (chunking, in
    its own transaction) has inserted the chunks and not committed when the re-index
    lists the entry as unchunked and inserts the same chunks. It must wait, keep the
    task's chunks and go on; it used to fail on the unique (memory, chunk_index), which
    left the whole team on the old model."""
    server.start()
    team_id = member.team.id
    memory = MemoryFactory(team=member.team, key=LATE_KEY, content=LATE_CONTENT)  # saved, its task not run
    chunked, commit = threading.Event(), threading.Event()
    holder: list[int] = []
    errors: list[BaseException] = []

    def index_task_chunking() -> None:
        try:
            with team_scope(team_id):  # index_memory's first step
                replace_chunks(memory, chunk_text(memory.content))
                holder.append(connection.connection.info.backend_pid)
                chunked.set()
                assert commit.wait(WAIT_SECONDS), "never told to commit"
        except BaseException as error:
            errors.append(error)
        finally:
            connection.close()

    def reindex() -> None:
        try:
            reindex_team(team_id=team_id, profile="small")
        except BaseException as error:
            errors.append(error)
        finally:
            connection.close()

    indexing = threading.Thread(target=index_task_chunking)
    indexing.start()
    try:
        assert chunked.wait(WAIT_SECONDS) and not errors, errors
        reindexing = threading.Thread(target=reindex)
        reindexing.start()
        wait_for(lambda: blocked_by(holder[0]), WAIT_SECONDS, "the re-index to wait for the task's chunks")
    finally:
        commit.set()
        indexing.join(WAIT_SECONDS)
    reindexing.join(WAIT_SECONDS)

    assert not reindexing.is_alive() and not errors, errors
    assert_every_entry_is_searchable_with_the_new_model(member.team)
    with team_scope(team_id):  # the task's chunks, once
        assert Chunk.objects.filter(memory=memory).count() == len(chunk_text(LATE_CONTENT))


def test_saves_during_a_reindex_on_real_workers_all_end_with_the_new_models_vectors(
    profiles: Path, member: Agent, server: EmbeddingServer, start_worker: Callable[..., CeleryProcess]
) -> None:
    server.start()
    env = {"MEMORYHUB_EMBEDDING_PROFILES_FILE": str(profiles), "MEMORYHUB_TEST_EMBEDDINGS_KEY": API_KEY}
    first = start_worker(**env)
    workers = [first, start_worker(queue=first.env["MEMORYHUB_QUEUE"], **env)]  # a second process, same queue
    for key, content in NOTES.items():
        response = member.client.post(
            member.url("memories/"), {"key": key, "content": content}, format="json"
        )
        assert response.status_code == 201
        wait_for_index_state(member.team.id, key)
    # The re-index task to the new model, while saves go on (indexed with the old model
    # until the switch) on the other worker process.
    reindex_task.apply_async((member.team.id, "small"))
    late = {f"late-{n}": f"Late note number {n}: the {n}th rule of the release train." for n in range(8)}
    for key, content in late.items():
        response = member.client.post(  # alike on purpose: not refused as near-duplicates
            member.url("memories/"), {"key": key, "content": content, "allow_duplicate": True}, format="json"
        )
        assert response.status_code == 201

    def settled() -> bool:
        entries = coverage(member.team)
        return len(entries) == len(NOTES) + len(late) and all(
            state == "indexed" and vectors == chunks for state, chunks, vectors in entries.values()
        )

    try:
        wait_for(settled, 120, "every entry to be indexed with the new model")
    except AssertionError as gave_up:
        logs = "\n".join(f"--- {w.log.name}\n{w.log_since(0)[-4000:]}" for w in workers)
        raise AssertionError(f"{gave_up}\n{describe_coverage(member.team)}\n{logs}") from None
    assert_every_entry_is_searchable_with_the_new_model(member.team)
