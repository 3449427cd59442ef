"""The embedding cache is per team, so a save's speed says nothing
about what other teams hold.

Team B saving a text must not spare team A the provider's round trip when A saves the
same text: A's save of "a text B holds" and of "a text nobody holds" send the provider
exactly the same requests. Counted at a real local embedding endpoint
(tests/search/embedding_server.py), not timed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

from search.chunking import content_hash
from search.embeddings.profiles import reset_providers
from search.models import EmbeddingCache
from search.services import delete_team_index
from teams.models import Team
from teams.scope import team_scope
from tests.conftest import Agent, operator_view
from tests.search.embedding_server import API_KEY, EmbeddingServer

PROFILES = """
profiles:
  remote:
    provider: openai
    base_url: {base_url}
    api_key_env: MEMORYHUB_TEST_EMBEDDINGS_KEY
    model: fake-minilm
    dimensions: 384
    max_attempts: 1
    timeout: {{connect: 0.5, read: 5}}
"""
SEED = "The team orders pizza on Wednesdays."
HELD_BY_B = "The staging database runs on db-3.internal, port 5433."
NEW_TEXT = "Release notes are written by whoever merges the last pull request."


@pytest.fixture
def remote(
    server: EmbeddingServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, team: Team, other_team: Team
) -> Iterator[EmbeddingServer]:
    """Both teams on one embedding profile served by `server`."""
    path = tmp_path / "profiles.yaml"
    path.write_text(PROFILES.format(base_url=server.base_url))
    monkeypatch.setenv("MEMORYHUB_TEST_EMBEDDINGS_KEY", API_KEY)
    with operator_view():
        Team.objects.filter(id__in=[team.id, other_team.id]).update(embedding_profile="remote")
    team.refresh_from_db()
    other_team.refresh_from_db()
    with override_settings(MEMORYHUB_EMBEDDING_PROFILES_FILE=str(path)):
        reset_providers()
        yield server.start()
    reset_providers()


def save_indexed(agent: Agent, key: str, content: str, capture: Any) -> None:
    """POST memories/ and run its indexing (after commit, in-process)."""
    with capture(execute=True):
        response = agent.client.post(agent.url("memories/"), {"key": key, "content": content}, format="json")
    assert response.status_code == 201, response.content


def texts_sent_during_save(agent: Agent, key: str, content: str, server: EmbeddingServer) -> list[str]:
    """The texts the save request itself (the duplicate check) sent to the provider;
    indexing after commit is not run."""
    before = len(server.requests)
    response = agent.client.post(agent.url("memories/"), {"key": key, "content": content}, format="json")
    assert response.status_code == 201, response.content
    return [text for request in server.requests[before:] for text in request["input"]]


def test_a_text_another_team_holds_costs_a_save_the_same_as_a_new_text(
    remote: EmbeddingServer,
    member: Agent,
    outsider: Agent,
    django_capture_on_commit_callbacks: Any,
) -> None:
    # Team A has indexed vectors, so its saves run the similarity check, which embeds.
    save_indexed(member, "lunch", SEED, django_capture_on_commit_callbacks)
    # Team B holds HELD_BY_B, embedded and cached by B's indexing.
    save_indexed(outsider, "staging-db", HELD_BY_B, django_capture_on_commit_callbacks)
    with team_scope(outsider.team.id):
        assert EmbeddingCache.objects.filter(content_hash=content_hash(HELD_BY_B)).count() == 1

    held_by_b = texts_sent_during_save(member, "staging-db", HELD_BY_B, remote)
    new_text = texts_sent_during_save(member, "release-notes", NEW_TEXT, remote)

    # The same provider round trip either way: B's cache entry does not serve A.
    assert held_by_b == [HELD_BY_B]
    assert new_text == [NEW_TEXT]
    with operator_view():
        owners = EmbeddingCache.objects.filter(content_hash=content_hash(HELD_BY_B)).values_list(
            "team_id", flat=True
        )
        assert sorted(owners) == sorted([member.team.id, outsider.team.id])


def test_a_teams_cache_is_its_own_and_goes_with_the_team(
    remote: EmbeddingServer, member: Agent, outsider: Agent, django_capture_on_commit_callbacks: Any
) -> None:
    save_indexed(member, "staging-db", HELD_BY_B, django_capture_on_commit_callbacks)
    save_indexed(outsider, "staging-db", HELD_BY_B, django_capture_on_commit_callbacks)

    # Row-level security: inside A's scope, only A's cache rows exist.
    with team_scope(member.team.id):
        assert set(EmbeddingCache.objects.values_list("team_id", flat=True)) == {member.team.id}
        counts = delete_team_index(team=member.team)
    assert counts["cached_embeddings"] == 1
    with operator_view():
        assert set(EmbeddingCache.objects.values_list("team_id", flat=True)) == {outsider.team.id}
