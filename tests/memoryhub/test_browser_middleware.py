"""The session, sign-in, messages and htmx middleware serve people's pages only: an API
request goes past them (core.browser_middleware), and a page still has all of them."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from django.utils.functional import empty

from core import browser_middleware
from tests.conftest import Agent

PAGE_ONLY_ATTRIBUTES = ("session", "_messages", "htmx")


def test_an_api_request_sets_up_no_session_messages_or_htmx(member: Agent) -> None:
    response = member.client.get(member.url("memories/"))

    assert response.status_code == 200
    request = response.wsgi_request
    assert [name for name in PAGE_ONLY_ATTRIBUTES if hasattr(request, name)] == []


@pytest.mark.django_db
def test_a_signed_in_persons_cookie_is_no_way_into_the_api(member: Agent) -> None:
    person = get_user_model().objects.create_user(username="ada", password="a long enough password")
    browser = Client()
    browser.force_login(person)

    response = browser.get(member.url("memories/"))

    assert response.status_code == 401
    assert response.json()["error"] == "unauthenticated"
    assert not hasattr(response.wsgi_request, "session")


@pytest.mark.django_db
def test_a_page_still_has_the_session_user_messages_and_htmx() -> None:
    person = get_user_model().objects.create_user(username="ada", password="a long enough password")
    browser = Client()
    browser.force_login(person)

    response = browser.get("/", HTTP_HX_REQUEST="true")

    assert response.status_code == 200
    request = response.wsgi_request
    assert [name for name in PAGE_ONLY_ATTRIBUTES if not hasattr(request, name)] == []
    assert request.user == person
    assert request.htmx  # type: ignore[attr-defined]


@pytest.mark.django_db
def test_a_path_outside_the_admin_never_loads_the_user() -> None:
    response = Client().get("/healthz")

    assert response.status_code == 200
    assert response.wsgi_request.user._wrapped is empty  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "middleware",
    [
        browser_middleware.SessionMiddleware,
        browser_middleware.AuthenticationMiddleware,
        browser_middleware.MessageMiddleware,
        browser_middleware.HtmxMiddleware,
    ],
)
def test_skipping_call_skips_all_the_middleware_does(middleware: type) -> None:
    # Django calls these hooks itself, outside __call__: an API request would still meet them.
    hooks = ("process_view", "process_exception", "process_template_response")
    assert [hook for hook in hooks if hasattr(middleware, hook)] == []


def test_the_admins_checks_find_its_middleware() -> None:
    call_command("check", "--fail-level", "ERROR")
