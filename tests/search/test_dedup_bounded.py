"""The near-duplicate check runs inside the save request, so its embedding work is
bounded: however long the new text, only its first MEMORYHUB_DEDUP_MAX_CHUNKS chunks
are embedded there (one team's 64 KiB saves must not hold the server)."""

from __future__ import annotations

import pytest
from django.conf import settings

from memories import writes
from search import duplicates_on_save
from search import services as search_services
from search.chunking import TextChunk, chunk_text
from search.models import EmbeddingCache
from teams.models import Team
from teams.scope import team_scope
from tests.conftest import operator_view

LONG_TEXT = "\n\n".join(
    f"Section {n}: the {word} service keeps its own runbook, owner and alert rules, "
    f"reviewed every quarter by the {word} team. " * 12
    for n, word in enumerate(["billing", "search", "auth", "storage", "mail", "queue", "cache", "maps"])
)


@pytest.mark.django_db
def test_only_the_opening_of_a_long_text_is_chunked_and_embedded_on_save(
    team_with_vectors: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    team = team_with_vectors
    assert len(chunk_text(LONG_TEXT)) > settings.MEMORYHUB_DEDUP_MAX_CHUNKS + 2
    chunked: list[int] = []

    def observed_chunk_text(text: str) -> list[TextChunk]:
        chunked.append(len(text))
        return chunk_text(text)

    monkeypatch.setattr(duplicates_on_save, "chunk_text", observed_chunk_text)
    with operator_view():
        cached_before = EmbeddingCache.objects.filter(team=team).count()

    with team_scope(team.id):
        assert duplicates_on_save.find_duplicate(team=team, text=LONG_TEXT, key="a-key") is None

    with operator_view():
        assert EmbeddingCache.objects.filter(team=team).count() - cached_before == (
            settings.MEMORYHUB_DEDUP_MAX_CHUNKS
        )
    assert chunked == [settings.MEMORYHUB_DEDUP_MAX_CHUNKS * duplicates_on_save.CHARACTERS_PER_CHUNK]
    assert chunked[0] < len(LONG_TEXT)


@pytest.mark.django_db
def test_a_long_text_whose_opening_repeats_an_entry_is_still_a_duplicate(team: Team) -> None:
    opening = chunk_text(LONG_TEXT)[0].text
    with team_scope(team.id):
        saved = writes.save_memory(team=team, key="opening", content=opening, updated_by="test").memory
    search_services.index_memory(team_id=team.id, memory_id=saved.id)

    with team_scope(team.id):
        match = duplicates_on_save.find_duplicate(team=team, text=LONG_TEXT, key="a-key")

    assert match is not None and match.memory.id == saved.id and match.matched_by == "embedding"
