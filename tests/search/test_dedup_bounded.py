"""The near-duplicate check runs inside the save request, so its embedding work is
bounded: however long the new text, only its first MEMORYHUB_DEDUP_MAX_CHUNKS chunks
are embedded there (issue 10: one team's 64 KiB saves must not hold the server)."""

from __future__ import annotations

import pytest
from django.conf import settings

from memories import services
from search import dedup
from search import services as search_services
from search.chunking import chunk_text
from search.models import EmbeddingCache
from teams.models import Team
from teams.scope import team_scope
from tests.conftest import operator_view

LONG_TEXT = "\n\n".join(
    f"Section {n}: the {word} service keeps its own runbook, owner and alert rules, "
    f"reviewed every quarter by the {word} team. " * 12
    for n, word in enumerate(["billing", "search", "auth", "storage", "mail", "queue", "cache", "maps"])
)


def embedded_hashes(hashes: list[str]) -> set[str]:
    with operator_view():
        return set(
            EmbeddingCache.objects.filter(content_hash__in=hashes).values_list("content_hash", flat=True)
        )


@pytest.mark.django_db
def test_only_the_first_chunks_of_a_long_text_are_embedded_on_save(team: Team) -> None:
    with team_scope(team.id):
        saved = services.save_memory(
            team=team, key="short", content="Deploys happen on Tuesdays.", updated_by="test"
        ).memory
    search_services.index_memory(team_id=team.id, memory_id=saved.id)  # the team has vectors now
    pieces = chunk_text(LONG_TEXT)
    assert len(pieces) > settings.MEMORYHUB_DEDUP_MAX_CHUNKS + 2

    with team_scope(team.id):
        assert dedup.find_duplicate(team=team, text=LONG_TEXT) is None

    hashes = [p.content_hash for p in pieces]
    assert embedded_hashes(hashes) == set(hashes[: settings.MEMORYHUB_DEDUP_MAX_CHUNKS])


@pytest.mark.django_db
def test_a_long_text_whose_opening_repeats_an_entry_is_still_a_duplicate(team: Team) -> None:
    opening = chunk_text(LONG_TEXT)[0].text
    with team_scope(team.id):
        saved = services.save_memory(team=team, key="opening", content=opening, updated_by="test").memory
    search_services.index_memory(team_id=team.id, memory_id=saved.id)

    with team_scope(team.id):
        match = dedup.find_duplicate(team=team, text=LONG_TEXT)

    assert match is not None and match.memory.id == saved.id and match.matched_by == "embedding"
