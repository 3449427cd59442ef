"""The first run in a browser: a fresh database, `manage.py bootstrap`, the
printed one-time link to set the owner's password, signing in, a team setting changed,
a token made on the Tokens page, and an agent's first save appearing on the overview."""

from __future__ import annotations

import re
from io import StringIO
from typing import Any

import httpx
from django.core.management import call_command
from playwright.sync_api import Page, expect

from teams.models import Team
from tests.e2e.conftest import PASSWORD, screenshot, sign_in


def test_first_run_from_bootstrap_to_an_agents_first_save(
    page: Page, live_server: Any, settings: Any
) -> None:
    assert not Team.objects.exists()
    settings.MEMORYHUB_BASE_URL = f"{live_server.url}/"
    out = StringIO()
    call_command("bootstrap", "--team", "first", "--username", "ada", stdout=out)
    printed = out.getvalue()
    assert f"Open the dashboard: {live_server.url}/" in printed
    link = re.search(r"(http://\S+/password-reset/\S+/)", printed).group(1)

    page.goto(link)
    expect(page.get_by_role("heading", name="Set your password")).to_be_visible()
    page.locator("#id_new_password1").fill(PASSWORD)
    page.locator("#id_new_password2").fill(PASSWORD)
    page.get_by_role("button", name="Set password").click()
    expect(page.get_by_role("heading", name="Password set")).to_be_visible()
    sign_in(page, live_server.url, "ada")

    team_url = f"{live_server.url}/teams/first/"
    page.goto(team_url + "settings/")
    page.get_by_label("Injection: most entries").fill("25")
    page.get_by_role("button", name="Save settings").click()
    expect(page.get_by_label("Injection: most entries")).to_have_value("25")
    assert Team.objects.get(slug="first").injection_max_entries == 25

    page.goto(team_url + "tokens/")
    page.get_by_label("Name").fill("laptop-agent")
    page.get_by_role("button", name="Create token").click()
    token = page.locator("#new-token").inner_text().strip()
    assert token.startswith("mh_")

    saved = httpx.post(
        f"{team_url.replace('/teams/', '/api/v1/teams/')}memories/",
        json={"key": "hello:first-save", "content": "Our agents remember now.", "type": "context"},
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
    )
    assert saved.status_code == 201, saved.text

    page.goto(team_url)
    expect(page.get_by_role("link", name="hello:first-save").first).to_be_visible()
    screenshot(page, "first-run-overview")
