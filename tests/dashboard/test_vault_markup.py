"""A vault secret never breaks the team's pages: the page redaction touches the text the
page shows and the attribute values that carry user content, never the markup (tag and
attribute names, the CSRF inputs, htmx's attributes); and a secret that would match the
pages' own markup is refused when saved."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from typing import Any

import pytest
from django.contrib.auth.models import AbstractUser
from django.test import Client
from django.urls import reverse

from teams import vault_crypto
from teams.models import Team, VaultEntry
from teams.scope import team_scope
from teams.services import set_vault_entry
from tests.conftest import Agent, operator_view
from tests.dashboard.conftest import Cast, save

MARKUP_PAYLOADS = ['name="csrfmiddlewaretoken"', "hx-headers", "CSRFMIDDLEWARETOKEN\u200b"]
CHROME_WORD = "Memories"  # the tab every team page shows
PAGES = [
    "overview",
    "search",
    "injection",
    "sessions",
    "review",
    "memories",
    "memory_create",
    "vault",
    "tokens",
    "members",
    "audit_log",
    "team_settings",
    "shutdown",
]


def url(name: str, **kwargs: Any) -> str:
    return reverse(f"dashboard:{name}", kwargs={"slug": "alpha", **kwargs})


def csrf_client(user: AbstractUser) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return client


def store_secret_as_before(team: Team, key: str, value: str) -> None:
    """A secret written before the save-time check existed (straight to the table)."""
    with team_scope(team.id):
        VaultEntry.objects.create(team=team, key=key, is_secret=True, ciphertext=vault_crypto.encrypt(value))


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def tags(page: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = _Tags()
    parser.feed(page)
    parser.close()
    return parser.tags


def assert_markup_intact(page: str) -> str:
    """Every CSRF input and htmx's CSRF header are whole; returns the CSRF token."""
    found = tags(page)
    for _, attrs in found:
        assert not any("REDACTED" in name for name in attrs), attrs
    (body,) = [attrs for tag, attrs in found if tag == "body"]
    token = json.loads(body["hx-headers"] or "")["X-CSRFToken"]
    inputs = [
        a for t, a in found if t == "input" and a.get("type") == "hidden" and "csrf" in (a.get("name") or "")
    ]
    assert inputs, "every team page has the sign-out form"
    for attrs in inputs:
        assert attrs["name"] == "csrfmiddlewaretoken" and attrs["value"] and "REDACTED" not in attrs["value"]
    return token


def form_token(page: str) -> str:
    return hidden(page, "csrfmiddlewaretoken")


def hidden(page: str, name: str) -> str:
    (value,) = {a["value"] for t, a in tags(page) if t == "input" and a.get("name") == name}
    assert value is not None
    return value


@pytest.mark.parametrize("secret", MARKUP_PAYLOADS)
def test_a_secret_that_matches_page_markup_is_refused_with_a_400(admin_member: Agent, secret: str) -> None:
    response = admin_member.client.put(
        admin_member.url("vault/s1/"), {"value": secret, "is_secret": True}, format="json"
    )

    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "invalid" and "markup" in body["fields"]["value"][0]
    with operator_view():
        assert not VaultEntry.objects.exists()


def test_the_same_value_is_fine_as_a_plain_entry(admin_member: Agent) -> None:
    response = admin_member.client.put(
        admin_member.url("vault/s1/"),
        {"value": 'name="csrfmiddlewaretoken"', "is_secret": False},
        format="json",
    )

    assert response.status_code == 201


@pytest.mark.parametrize("secret", [*MARKUP_PAYLOADS, CHROME_WORD])
def test_a_stored_secret_leaves_every_team_page_and_its_forms_working(
    cast: Cast, team: Team, secret: str
) -> None:
    save(team, "deploy-notes", "Deploy on Tuesdays after the freeze.")
    store_secret_as_before(team, "s1", secret)
    owner = csrf_client(cast.owner)

    pages = [url(name) for name in PAGES] + [
        url("memory", key="deploy-notes"),
        url("memory_edit", key="deploy-notes"),
        url("memory_delete", key="deploy-notes"),
        url("vault_rotate", key="s1"),
        url("vault_delete", key="s1"),
    ]
    for page in pages:
        response = owner.get(page)
        assert response.status_code == 200, page
        assert_markup_intact(response.content.decode())

    edit = owner.get(url("memory_edit", key="deploy-notes")).content.decode()
    saved = owner.post(
        url("memory_edit", key="deploy-notes"),
        {"csrfmiddlewaretoken": form_token(edit), "content": "Deploy on Wednesdays now.", "type": "context",
         "kind": "hard", "reason": "moved", "base_version": hidden(edit, "base_version")},
    )  # fmt: skip
    assert saved.status_code == 302, saved.content.decode()[:2000]

    confirm = owner.get(url("vault_delete", key="s1")).content.decode()
    removed = owner.post(url("vault_delete", key="s1"), {"csrfmiddlewaretoken": form_token(confirm)})
    assert removed.status_code == 302
    with operator_view():
        assert not VaultEntry.objects.filter(team=team, key="s1").exists()


def test_a_post_without_the_token_still_fails_csrf(cast: Cast, team: Team) -> None:
    store_secret_as_before(team, "s1", "hx-headers")

    response = csrf_client(cast.owner).post(url("vault_delete", key="s1"), {})

    assert response.status_code == 403


SECRET = "Zq8-vault-secret-77"


@pytest.fixture
def secret_in_content(team: Team) -> None:
    # Written before the value entered the vault, so the save did not redact it.
    save(team, "staging-db", f"The staging database answers to {SECRET} until Friday.")
    with team_scope(team.id):
        set_vault_entry(team=team, key="staging-db-password", value=SECRET, is_secret=True, actor="t")


@pytest.mark.usefixtures("secret_in_content")
@pytest.mark.parametrize(
    "page",
    [
        url("memory", key="staging-db"),
        url("memory_edit", key="staging-db"),
        url("memories"),
        url("search") + f"?q={SECRET}",
    ],
)
def test_a_secret_in_user_content_is_still_redacted(cast: Cast, page: str) -> None:
    response = csrf_client(cast.owner).get(page)

    body = response.content.decode()
    assert response.status_code == 200
    assert SECRET not in body
    assert_markup_intact(body)


@pytest.mark.usefixtures("secret_in_content")
def test_the_redaction_marker_replaces_the_secret_in_text_and_in_attribute_values(cast: Cast) -> None:
    owner = csrf_client(cast.owner)

    detail = owner.get(url("memory", key="staging-db")).content.decode()
    search = owner.get(url("search") + f"?q={SECRET}").content.decode()

    assert "[REDACTED:vault_secret]" in detail
    (query,) = [a for t, a in tags(search) if t == "input" and a.get("name") == "q"]
    assert query["value"] == "[REDACTED:vault_secret]"
