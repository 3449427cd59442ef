"""The Review page in a real browser: a member opens it from the nav (with its
open count), confirms a due entry with the keyboard (j to move, c to confirm), resolves a
contradiction by archiving the older entry (behind its own disclosure), and sees the
queue empty; and accepts a draft as edited."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from playwright.sync_api import Page, expect

from freshness.models import Draft, Nudge, NudgeKind, NudgeState
from memories import writes
from memories.models import Confirmation, Memory
from teams import services as team_services
from teams.models import Membership, Team
from teams.scope import team_scope
from tests.conftest import operator_view
from tests.e2e.conftest import PASSWORD, screenshot, sign_in


def save(team: Team, key: str, content: str, **extra: Any) -> Memory:
    with team_scope(team.id):
        return writes.save_memory(team=team, key=key, content=content, updated_by="agent", **extra).memory


@pytest.fixture
def team(live_server: Any) -> Team:
    team = team_services.create_team(slug="alpha", name="Alpha Agents")
    user = get_user_model().objects.create_user("mia", "mia@example.com", PASSWORD)
    with team_scope(team.id):
        Membership.objects.create(team=team, user=user, role="member")
    return team


@pytest.fixture
def nudges(team: Team) -> dict[str, Nudge]:
    """One contradiction (newer, older) and one due entry, as the jobs record them. The
    detector may have raised nudges of its own while the entries were indexed: they are
    replaced by these, so the queue is exactly what the test walks."""
    due_entry = save(team, "deploy-day", "We deploy on Tuesdays after the standup.", type_name="decision")
    older = save(team, "billing-old", "We use Stripe for billing.")
    newer = save(team, "billing-new", "We moved billing to Paddle.", allow_duplicate=True)
    with operator_view():
        Nudge.objects.filter(team=team).delete()
        past = timezone.now() - dt.timedelta(days=45)
        Memory.objects.filter(id=due_entry.id).update(created_at=past, last_confirmed_at=past)
        Memory.objects.filter(team=team).update(contradicted_at=None)
    with team_scope(team.id):
        writes.set_freshness_flag(team=team, memory_ids=[older.id], flag="contradicted_at", on=True)
        return {
            "due": Nudge.objects.create(
                team=team,
                kind=NudgeKind.DUE,
                memory=due_entry,
                message="'deploy-day' was last confirmed 45 days ago. Is it still true?",
            ),
            "contradiction": Nudge.objects.create(
                team=team,
                kind=NudgeKind.CONTRADICTION,
                memory=newer,
                other_memory=older,
                message="You previously recorded 'We use Stripe for billing'. Update to 'We moved billing to Paddle'?",
            ),
        }


def nav_link(page: Page) -> Any:
    return page.get_by_role("navigation", name="Team pages").get_by_role("link", name=re.compile(r"^Review"))


def test_member_clears_the_review_queue(
    page: Page, live_server: Any, team: Team, nudges: dict[str, Nudge]
) -> None:
    sign_in(page, live_server.url, "mia")
    page.goto(f"{live_server.url}/teams/{team.slug}/")
    review_link = nav_link(page)
    expect(review_link).to_have_accessible_name("Review 2 open")
    review_link.click()
    expect(page.get_by_role("heading", name="Review")).to_be_visible()
    expect(page.locator("#review-shortcuts")).to_contain_text("Confirm")

    items = page.locator("#review-queue > li")
    expect(items).to_have_count(2)
    # Contradictions come first; the first item is selected on arrival.
    expect(items.nth(0)).to_contain_text("Update to 'We moved billing to Paddle'?")
    expect(items.nth(0)).to_have_class("nudge contradiction selected")
    expect(items.nth(1)).to_contain_text("deploy-day")
    screenshot(page, "review-queue")

    # j moves to the due entry, c confirms it.
    page.keyboard.press("j")
    expect(items.nth(1)).to_have_class("nudge due selected")
    page.keyboard.press("c")
    expect(page.get_by_role("status")).to_contain_text("Confirmed: deploy-day.")
    expect(items).to_have_count(1)
    expect(nav_link(page)).to_have_accessible_name("Review 1 open")

    # The contradiction, settled for the newer entry: archiving is a second, explicit choice.
    expect(items.nth(0).get_by_role("button", name="Archive the older entry")).to_be_hidden()
    items.nth(0).locator("details.archive-choice summary").click()
    items.nth(0).get_by_role("button", name="Archive the older entry").click()
    expect(page.get_by_role("status")).to_contain_text("Kept the newer entry and archived the older")
    expect(page.locator("#review-empty")).to_be_visible()
    expect(page.locator("#review-queue")).to_have_count(0)
    expect(nav_link(page)).to_have_text("Review")

    with operator_view():
        assert not Nudge.objects.filter(team=team, state=NudgeState.OPEN).exists()
        confirmed = Confirmation.objects.get(memory_id=nudges["due"].memory_id)
        older = Memory.objects.get(id=nudges["contradiction"].other_memory_id)
        newer = Memory.objects.get(id=nudges["contradiction"].memory_id)
    assert confirmed.confirmed_by == "user:mia"
    assert older.archived_at is not None and older.archived_by == "user:mia"
    assert newer.is_active and newer.contradicted_at is None

    # The overview's freshness panel agrees: nothing due or contradicted any more.
    page.get_by_role("link", name="Overview").click()
    panel = page.locator("#freshness-panel")
    expect(panel.locator('[data-state="due"]')).to_have_text("0")
    expect(panel.locator('[data-state="contradicted"]')).to_have_text("0")
    expect(panel.locator('[data-state="fresh"]')).to_have_text("2")


def test_member_accepts_an_edited_draft(page: Page, live_server: Any, team: Team) -> None:
    with team_scope(team.id):
        draft = Draft.objects.create(
            team=team,
            type="lesson",
            key="ci-redis-flake",
            content="Turns out the CI Redis starts after the tests do.",
            why="lesson",
            extractor="rules",
            source_session="sess-7",
            source_excerpt="Turns out the CI Redis starts after the tests do.",
        )
    sign_in(page, live_server.url, "mia")
    page.goto(f"{live_server.url}/teams/{team.slug}/review/")
    expect(nav_link(page)).to_have_accessible_name("Review 1 open")

    item = page.locator(f"#draft-{draft.id}")
    expect(item).to_contain_text("Proposed lesson")
    expect(item).to_contain_text("sess-7")
    item.get_by_label("Key", exact=True).fill("ci-redis-start-order")
    item.get_by_label("Content", exact=True).fill("CI: wait for Redis to answer before the tests start.")
    item.get_by_label("Type", exact=True).select_option("decision")
    screenshot(page, "review-draft-edited")
    item.get_by_role("button", name="Accept").click()

    expect(page.get_by_role("status")).to_contain_text("Accepted: ci-redis-start-order.")
    expect(page.locator("#review-empty")).to_be_visible()
    with operator_view():
        stored = Draft.objects.select_related("memory").get(id=draft.id)
    assert stored.state == "accepted" and stored.reviewed_by == "user:mia"
    assert stored.memory is not None and stored.memory.is_active
    assert (stored.memory.key, stored.memory.type) == ("ci-redis-start-order", "decision")
    assert stored.memory.content == "CI: wait for Redis to answer before the tests start."
    assert stored.memory.metadata["draft"]["source_session"] == "sess-7"
