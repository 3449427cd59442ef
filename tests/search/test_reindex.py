"""`manage.py reindex --model PROFILE`: a team moves to another embedding model, even
of other dimensions, with a progress bar, and loses nothing on the way. The command does
the work in its own process; a re-index requested from the dashboard or the admin is a
task, which the last test runs on a real worker process (tests/worker.py)."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import override_settings

from memories.models import Memory
from search.embeddings.profiles import reset_providers
from search.models import Chunk, ChunkEmbedding
from search.services import request_reindex
from search.vector_index import index_name
from teams.models import Team
from teams.scope import team_scope
from tests.conftest import Agent, operator_view
from tests.search.embedding_server import API_KEY, EmbeddingServer
from tests.worker import CeleryProcess, wait_for, wait_for_index_state

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
    timeout: {{connect: 0.5, read: 5}}
"""


NOTES = {
    "deploy-friday": "Never deploy to production on Fridays: nobody is around over the weekend.",
    "db-host": "The staging database runs on db-3.internal, port 5433.",
    "lunch": "The team orders pizza on Wednesdays.",
}


@pytest.fixture
def profiles(server: EmbeddingServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path / "profiles.yaml"
    path.write_text(PROFILES.format(base_url=server.base_url))
    monkeypatch.setenv("MEMORYHUB_TEST_EMBEDDINGS_KEY", API_KEY)
    with override_settings(MEMORYHUB_EMBEDDING_PROFILES_FILE=str(path)):
        reset_providers()
        yield path
    reset_providers()


@pytest.fixture
def indexed(member: Agent, django_capture_on_commit_callbacks: Any) -> None:
    for key, content in NOTES.items():
        with django_capture_on_commit_callbacks(execute=True):
            member.client.post(member.url("memories/"), {"key": key, "content": content}, format="json")
    with django_capture_on_commit_callbacks(execute=True):
        member.client.post(
            member.url("memories/"),
            {
                "key": "lunch",
                "content": "The team orders sushi on Wednesdays.",
                "supersede_reason": "new place",
            },
            format="json",
        )


def vectors_by_model(team: Team) -> dict[str, int]:
    with team_scope(team.id):
        counts: dict[str, int] = {}
        for model in ChunkEmbedding.objects.filter(team=team).values_list("model", flat=True):
            counts[model] = counts.get(model, 0) + 1
    return counts


def test_reindex_moves_a_team_to_a_model_of_other_dimensions(
    indexed: None, profiles: None, member: Agent, other_team: Team, server: EmbeddingServer
) -> None:
    with team_scope(member.team.id):
        chunk_count = Chunk.objects.filter(team=member.team).count()
        memories_before = sorted(Memory.objects.filter(team=member.team).values_list("id", "content"))
    assert vectors_by_model(member.team) == {"all-MiniLM-L6-v2-onnx-int8": chunk_count}
    server.start()
    out, err = io.StringIO(), io.StringIO()

    call_command("reindex", "--model", "small", "--team", "alpha", stdout=out, stderr=err)

    member.team.refresh_from_db()
    assert member.team.embedding_profile == "small"
    assert vectors_by_model(member.team) == {"fake-minilm@128": chunk_count}
    assert server.inputs_embedded == chunk_count
    with team_scope(member.team.id):
        assert sorted(Memory.objects.filter(team=member.team).values_list("id", "content")) == memories_before
    assert "alpha: 4 memories, 4 chunks embedded with fake-minilm@128" in out.getvalue()
    assert "100%" in err.getvalue() and "4/4" in err.getvalue()  # the progress bar
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = %s", [index_name("fake-minilm@128")]
        )
        assert "vector(128)" in cursor.fetchone()[0]

    body = member.client.post(
        member.url("search/"),
        {"query": "production deploys before the weekend", "explain": True},
        format="json",
    ).json()
    assert body["search_mode"] == "hybrid"
    assert body["results"][0]["key"] == "deploy-friday"
    assert body["results"][0]["explain"]["vector"] > 0


def test_reindex_that_fails_leaves_the_team_on_its_old_model(
    indexed: None, profiles: None, member: Agent, server: EmbeddingServer
) -> None:
    before = vectors_by_model(member.team)
    server.behaviour = "unauthorized"
    server.start()

    with pytest.raises(CommandError, match="left on its old model"):
        call_command("reindex", "--model", "small", "--team", "alpha", "--no-progress", stdout=io.StringIO())

    member.team.refresh_from_db()
    assert member.team.embedding_profile == "local"
    assert vectors_by_model(member.team) == before
    body = member.client.post(member.url("search/"), {"query": "weekend deploys"}, format="json").json()
    assert body["search_mode"] == "hybrid"


def test_reindex_refuses_unknown_profiles_and_teams(db: None) -> None:
    with pytest.raises(CommandError, match="unknown embedding profile"):
        call_command("reindex", "--model", "nope")
    with pytest.raises(CommandError, match="no such team"):
        call_command("reindex", "--model", "local", "--team", "ghost")
    with pytest.raises(CommandError, match="not a valid team slug"):
        call_command("reindex", "--model", "local", "--team", "Bad Slug")


def test_reindex_of_every_team_touches_each_only_in_its_own_scope(
    indexed: None, outsider: Agent, member: Agent, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        outsider.client.post(
            outsider.url("memories/"), {"key": "b", "content": "Bravo's note."}, format="json"
        )

    call_command("reindex", "--model", "none", "--no-progress", stdout=io.StringIO())

    with operator_view():
        assert not ChunkEmbedding.objects.exists()
        assert set(Team.objects.values_list("embedding_profile", flat=True)) == {"none"}
    body = member.client.post(
        member.url("search/"), {"query": "pizza sushi", "include_superseded": True}, format="json"
    ).json()
    assert body["search_mode"] == "keyword"
    assert [(r["key"], r["superseded"]) for r in body["results"]] == [("lunch", False), ("lunch", True)]


@pytest.mark.django_db(transaction=True)
def test_a_requested_reindex_runs_on_the_worker_and_moves_the_team_to_its_profile(
    profiles: Path, member: Agent, server: EmbeddingServer, start_worker: Callable[..., CeleryProcess]
) -> None:
    server.start()
    worker = start_worker(
        MEMORYHUB_EMBEDDING_PROFILES_FILE=str(profiles), MEMORYHUB_TEST_EMBEDDINGS_KEY=API_KEY
    )
    for key, content in NOTES.items():
        response = member.client.post(
            member.url("memories/"), {"key": key, "content": content}, format="json"
        )
        assert response.status_code == 201
        wait_for_index_state(member.team.id, key)
    with team_scope(member.team.id):
        chunk_count = Chunk.objects.filter(team=member.team).count()
    assert vectors_by_model(member.team) == {"all-MiniLM-L6-v2-onnx-int8": chunk_count}
    with operator_view():
        Team.objects.filter(id=member.team.id).update(embedding_profile="small")
    log_start = worker.log_position()

    with team_scope(member.team.id):
        assert request_reindex(team=member.team, actor="test", scope="all") == len(NOTES)

    wait_for(lambda: vectors_by_model(member.team) == {"fake-minilm@128": chunk_count}, 60, "the re-index")
    assert server.inputs_embedded == chunk_count
    assert "Task search.reindex_team[" in worker.log_since(log_start)
    body = member.client.post(
        member.url("search/"),
        {"query": "production deploys before the weekend", "explain": True},
        format="json",
    ).json()
    assert body["search_mode"] == "hybrid"
    assert body["results"][0]["key"] == "deploy-friday"
