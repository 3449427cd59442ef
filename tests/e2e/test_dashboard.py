"""The dashboard in a real browser: sign in, create a memory, supersede it with a reason,
see both versions in the timeline, find it in search, see a secret masked, and a
viewer who cannot edit."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import Page, expect

from teams import services as team_services
from teams.models import Membership, Team
from teams.scope import team_scope
from tests.e2e.conftest import PASSWORD, screenshot, sign_in


@dataclass
class Site:
    url: str
    team: Team


@pytest.fixture
def site(live_server: Any) -> Site:
    team = team_services.create_team(slug="alpha", name="Alpha Agents")
    users = get_user_model().objects
    for name, role in [("olivia", "owner"), ("adam", "admin"), ("mia", "member"), ("vera", "viewer")]:
        user = users.create_user(name, f"{name}@example.com", PASSWORD)
        with team_scope(team.id):
            Membership.objects.create(team=team, user=user, role=role)
    return Site(url=live_server.url, team=team)


def team_url(site: Site, path: str = "") -> str:
    return f"{site.url}/teams/{site.team.slug}/{path}"


def test_member_creates_supersedes_and_finds_a_memory(page: Page, site: Site) -> None:
    sign_in(page, site.url, "mia")
    page.get_by_role("link", name="Alpha Agents").click()
    expect(page.get_by_role("heading", name="Overview")).to_be_visible()

    # Create.
    page.get_by_role("link", name="New memory").first.click()
    page.get_by_label("Key").fill("deploy:friday-freeze")
    page.get_by_label("Content").fill("Never deploy to production on Fridays: nobody is around to fix it.")
    page.get_by_label("Type").select_option("lesson")
    page.get_by_role("button", name="Save memory").click()
    expect(page.locator("#memory-content")).to_contain_text("Never deploy to production on Fridays")
    expect(page.get_by_role("status")).to_contain_text("saved")

    # Supersede with a reason.
    page.get_by_role("link", name="Edit").click()
    page.get_by_label("Content").fill(
        "Never deploy to production on Fridays or before a holiday: nobody is around to fix it."
    )
    page.get_by_role("textbox", name="Reason").fill("holidays caused the last outage")
    page.get_by_role("button", name="Save new version").click()

    # Both versions in the timeline, with who, why and the diff.
    timeline = page.locator("#timeline > li")
    expect(timeline).to_have_count(2)
    expect(timeline.nth(0)).to_contain_text("hard")
    expect(timeline.nth(0)).to_contain_text("holidays caused the last outage")
    expect(timeline.nth(0)).to_contain_text("user:mia")
    expect(timeline.nth(0).locator("ins")).to_contain_text("or before a holiday")
    expect(timeline.nth(1)).to_contain_text("created")
    expect(timeline.nth(1)).to_contain_text("superseded")
    screenshot(page, "memory-timeline")

    # Find it in the search playground, with the explain bars.
    page.get_by_role("link", name="Search", exact=True).click()
    page.get_by_label("Query").fill("can we ship to production on a friday?")
    page.get_by_role("button", name="Search").click()
    first = page.locator("article.search-result").first
    expect(first).to_contain_text("deploy:friday-freeze")
    lead = first.locator(".explain").first
    expect(lead).to_contain_text("Meaning")
    expect(lead).to_contain_text("Words")
    expect(lead).to_contain_text("Freshness")
    formula = first.locator("details .explain")
    expect(formula).not_to_be_visible()
    first.get_by_text("How the score is made").click()
    expect(formula).to_contain_text("Vector")
    expect(formula).to_contain_text("Keyword")
    expect(formula).to_contain_text("Decay")
    expect(formula).to_contain_text("MMR")
    screenshot(page, "search-playground")

    # And in the memory browser's search box (htmx swaps the results in place).
    page.get_by_role("link", name="Memories").click()
    page.get_by_label("Search").fill("holiday outage")
    expect(page.locator("#memory-results")).to_contain_text("deploy:friday-freeze", timeout=10_000)
    expect(page.locator("#memory-results")).to_contain_text("search")


def test_invalid_form_shows_the_error_next_to_the_field(page: Page, site: Site) -> None:
    sign_in(page, site.url, "mia")
    page.goto(team_url(site, "memories/+new/"))
    page.get_by_label("Key").fill("not a valid key!")
    page.get_by_label("Content").fill("Something.")
    page.get_by_role("button", name="Save memory").click()

    expect(page.get_by_role("alert")).to_contain_text("There is a problem")
    key = page.get_by_label("Key")
    expect(key).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#id_key_errors")).to_contain_text("A key is 1-200 characters")
    expect(page.get_by_label("Content")).to_have_value("Something.")


def test_secret_is_masked_and_revealed_only_to_admins_with_an_audit_entry(page: Page, site: Site) -> None:
    sign_in(page, site.url, "adam")
    page.goto(team_url(site, "vault/"))
    page.get_by_label("Key").fill("openai-api-key")
    page.get_by_label("Value").fill("sk-test-abcdefghijklmnopqrstuvwxyz0123")
    page.get_by_label("Secret").check()
    page.get_by_role("button", name="Save entry").click()

    row = page.locator("#vault-entries tr", has_text="openai-api-key")
    expect(row).to_contain_text("••••••••")
    expect(page.locator("body")).not_to_contain_text("sk-test-abcdefghijklmnopqrstuvwxyz0123")
    screenshot(page, "vault-masked")

    row.get_by_role("button", name="Reveal").click()
    expect(page.locator("#revealed-value")).to_have_text("sk-test-abcdefghijklmnopqrstuvwxyz0123")
    page.get_by_role("link", name="Hide and go back to the vault").click()
    page.get_by_role("link", name="Audit log", exact=True).click()
    expect(page.locator("table")).to_contain_text("vault.reveal")
    expect(page.locator("table")).to_contain_text("user:adam")


def test_viewer_reads_but_cannot_edit(page: Page, site: Site) -> None:
    with team_scope(site.team.id):
        from memories.writes import save_memory

        save_memory(team=site.team, key="style-guide", content="Use ruff for formatting.", updated_by="agent")
        team_services.set_vault_entry(
            team=site.team, key="db-password", value="s3cret-value-123", is_secret=True, actor="x"
        )

    sign_in(page, site.url, "vera")
    page.goto(team_url(site, "memories/style-guide/"))
    expect(page.locator("#memory-content")).to_contain_text("Use ruff for formatting.")
    expect(page.get_by_role("link", name="Edit")).to_have_count(0)
    expect(page.get_by_role("link", name="Delete")).to_have_count(0)
    expect(page.get_by_role("button", name="Add note")).to_have_count(0)

    page.goto(team_url(site, "vault/"))
    expect(page.locator("#vault-entries")).to_contain_text("••••••••")
    expect(page.get_by_role("button", name="Reveal")).to_have_count(0)
    expect(page.locator("body")).not_to_contain_text("s3cret-value-123")

    response = page.goto(team_url(site, "memories/style-guide/edit/"))
    assert response is not None and response.status == 403
    expect(page.get_by_role("heading", name="Not allowed")).to_be_visible()
    expect(page.locator("main")).to_contain_text("this needs the member role")


def test_another_teams_pages_are_not_found(page: Page, site: Site) -> None:
    other = team_services.create_team(slug="bravo", name="Bravo Secret Project")

    sign_in(page, site.url, "olivia")
    expect(page.locator("main")).not_to_contain_text("Bravo")
    response = page.goto(f"{site.url}/teams/{other.slug}/")
    assert response is not None and response.status == 404
    expect(page.get_by_role("heading", name="Not found")).to_be_visible()
    expect(page.locator("body")).not_to_contain_text("Bravo")
