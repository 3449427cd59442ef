"""The detail page's supersede timeline comes a page at a time: a key with many long
versions must not load and diff all of them on every view."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.urls import reverse

from dashboard.selectors import TIMELINE_PAGE_SIZE
from memories.models import Memory
from teams.models import Team
from tests.dashboard.conftest import Cast, save

VERSIONS = 2 * TIMELINE_PAGE_SIZE + 5


def url(**query: Any) -> str:
    path = reverse("dashboard:memory", kwargs={"slug": "alpha", "key": "runbook"})
    return path + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")


@pytest.fixture
def versions(team: Team) -> list[Memory]:
    """VERSIONS versions of one key, oldest first, each superseding the one before."""
    saved = [save(team, "runbook", "Runbook, step 0.")]
    for n in range(1, VERSIONS):
        saved.append(save(team, "runbook", f"Runbook, step {n}.", reason=f"step {n} added"))
    return saved


def test_the_timeline_pages_through_every_version_once_newest_first(
    cast: Cast, versions: list[Memory]
) -> None:
    client = cast.client("member")
    seen: list[uuid.UUID] = []
    pages = 0
    response = client.get(url())
    while True:
        assert response.status_code == 200
        story = response.context["story"]
        assert len(story.timeline) <= TIMELINE_PAGE_SIZE
        seen += [entry.event.memory.id for entry in story.timeline]
        pages += 1
        if story.next_older_than is None:
            assert "Older versions" not in response.content.decode()
            break
        assert f"older_than={story.next_older_than}" in response.content.decode()
        response = client.get(url(older_than=story.next_older_than))

    assert pages == 3
    assert seen == [m.id for m in reversed(versions)]


def test_the_oldest_version_of_a_page_is_diffed_against_the_one_on_the_next_page(
    cast: Cast, versions: list[Memory]
) -> None:
    story = cast.client("member").get(url()).context["story"]
    last_on_page = story.timeline[-1]

    assert last_on_page.previous is not None
    assert last_on_page.previous.id == versions[VERSIONS - TIMELINE_PAGE_SIZE - 1].id
    assert last_on_page.added_words == 1 and last_on_page.removed_words == 1


def test_a_cursor_of_another_key_or_another_team_is_not_found(
    cast: Cast, versions: list[Memory], other_team: Team
) -> None:
    client = cast.client("member")
    other_key = save(versions[0].team, "elsewhere", "Another key of the same team.")
    foreign = save(other_team, "runbook", "Bravo's own runbook, which alpha must never see.")

    for cursor in (other_key.id, foreign.id):
        response = client.get(url(older_than=cursor))
        assert response.status_code == 404
        assert b"Bravo" not in response.content
    response = client.get(url(version=foreign.id))
    assert response.status_code == 404
    assert b"Bravo" not in response.content
