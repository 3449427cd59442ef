"""Setting a password in the dashboard: the one-time links, "Forgot your password?" by
e-mail when an e-mail server is configured, and inviting people on the Members page."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.test import Client

from teams.models import Membership, Team
from tests.conftest import operator_view
from tests.dashboard.conftest import Cast

NEW_PASSWORD = "a long and unusual passphrase 42"
LINK = re.compile(r"https?://[^\s<\"]+/password-reset/[^/\s]+/[^/\s]+/")


def path_of(link: str) -> str:
    return "/" + link.split("/", 3)[3]


def set_password_with(link: str) -> int:
    client = Client()
    form_url = client.get(path_of(link))["Location"]
    return client.post(form_url, {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD}).status_code


def signs_in(username: str) -> bool:
    response = Client().post("/login/", {"username": username, "password": NEW_PASSWORD})
    return response.status_code == 302


@pytest.mark.parametrize("enabled", [True, False])
def test_forgot_password_is_offered_only_with_an_email_server(db: None, settings, enabled: bool) -> None:
    settings.MEMORYHUB_EMAIL_ENABLED = enabled

    login = Client().get("/login/").content.decode()
    reset = Client().get("/password-reset/")

    assert ("Forgot your password?" in login) is enabled
    assert reset.status_code == (200 if enabled else 404)
    if not enabled:
        assert "manage.py password_link USERNAME" in reset.content.decode()


def test_reset_by_email_answers_alike_for_known_and_unknown_addresses(cast: Cast, settings) -> None:
    settings.MEMORYHUB_EMAIL_ENABLED = True

    known = Client().post("/password-reset/", {"email": "olivia@example.com"})
    unknown = Client().post("/password-reset/", {"email": "nobody@example.com"})

    assert (known.status_code, known["Location"]) == (unknown.status_code, unknown["Location"])
    assert known["Location"] == "/password-reset/sent/"
    assert [m.to for m in mail.outbox] == [["olivia@example.com"]]
    link = LINK.search(mail.outbox[0].body).group(0)
    assert set_password_with(link) == 302
    assert signs_in("olivia")


def test_a_spent_or_forged_link_says_so(db: None) -> None:
    body = Client().get("/password-reset/MQ/forged-token/", follow=True).content.decode()
    assert "This link has been used or has expired." in body


def test_invite_by_email_creates_the_account_and_shows_a_one_time_link(
    cast: Cast, team: Team, settings, django_capture_on_commit_callbacks
) -> None:
    settings.MEMORYHUB_EMAIL_ENABLED = True
    with django_capture_on_commit_callbacks(execute=True):
        response = cast.client("admin").post(
            f"/teams/{team.slug}/members/",
            {"username": "nia@example.com", "role": "member", "create_account": "on"},
        )

    assert response.status_code == 201
    body = response.content.decode()
    link = LINK.search(body).group(0)
    assert response["Cache-Control"].startswith("max-age=0")
    user = get_user_model().objects.get(username="nia@example.com")
    assert user.email == "nia@example.com" and not user.has_usable_password()
    with operator_view():
        assert Membership.objects.get(team=team, user=user).role == "member"
    assert [m.to for m in mail.outbox] == [["nia@example.com"]] and link in mail.outbox[0].body
    assert set_password_with(link) == 302
    assert signs_in("nia@example.com")


def test_invite_of_an_unknown_address_without_create_reveals_nothing(cast: Cast, team: Team) -> None:
    client = cast.client("admin")
    url = f"/teams/{team.slug}/members/"

    unknown = client.post(url, {"username": "ghost@example.com", "role": "member"}, follow=True)
    known = client.post(url, {"username": "bob@example.com", "role": "member"}, follow=True)

    assert unknown.status_code == known.status_code == 200
    assert (
        "If an account named" in unknown.content.decode() and "If an account named" in known.content.decode()
    )
    assert not LINK.search(known.content.decode())
    assert not get_user_model().objects.filter(email="ghost@example.com").exists()
    with operator_view():
        # An existing address is added by its account, and never gets a link.
        assert Membership.objects.get(team=team, user=cast.outsider).role == "member"


def test_invite_with_create_of_an_existing_address_adds_it_without_a_link(cast: Cast, team: Team) -> None:
    response = cast.client("admin").post(
        f"/teams/{team.slug}/members/",
        {"username": "bob@example.com", "role": "viewer", "create_account": "on"},
        follow=True,
    )

    assert not LINK.search(response.content.decode())
    assert get_user_model().objects.filter(email="bob@example.com").count() == 1
    with operator_view():
        assert Membership.objects.get(team=team, user=cast.outsider).role == "viewer"
