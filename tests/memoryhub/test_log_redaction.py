"""Sign-in link tokens (password reset, invite, the links of `bootstrap` and
`password_link`: one route) never reach a log: not gunicorn's access or error log, not
Django's request logging (docs/operations.md, "Logs")."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from memoryhub.log_redaction import SECRET_ROUTE_PARAMETERS, TokenLinkFilter, redact_token_links
from teams.accounts import password_link_for
from tests.web_server import WebServer, server_env
from tests.worker import database_url

SAMPLE_TOKEN = "d1qhuj-e896f0c1d2e3f4a5b6c7d8e9f0a1b2c3"  # a made-up one


def routes(resolver: URLResolver | None = None, prefix: str = "") -> list[tuple[str, URLPattern]]:
    found: list[tuple[str, URLPattern]] = []
    for entry in (resolver or get_resolver()).url_patterns:
        if isinstance(entry, URLResolver):
            found += routes(entry, prefix + str(entry.pattern))
        else:
            found.append((prefix + str(entry.pattern), entry))
    return found


def test_every_route_with_a_token_in_its_path_is_redacted() -> None:
    """A new route carrying a token (a parameter named in SECRET_ROUTE_PARAMETERS) is
    covered, or this fails."""
    with_tokens = [
        (route, entry)
        for route, entry in routes()
        if SECRET_ROUTE_PARAMETERS & set(entry.pattern.converters) and entry.name
    ]
    assert with_tokens, "the password-reset link route is expected here"
    for route, entry in with_tokens:
        namespace = "dashboard:" if route.startswith("password-reset") else ""
        kwargs = {
            name: SAMPLE_TOKEN if name in SECRET_ROUTE_PARAMETERS else "MQ"
            for name in entry.pattern.converters
        }
        path = reverse(namespace + str(entry.name), kwargs=kwargs)
        line = f'127.0.0.1 - - "GET {path}?next=/ HTTP/1.1" 200 "http://host{path}"'
        redacted = redact_token_links(line)
        assert SAMPLE_TOKEN not in redacted, route
        assert "<redacted>" in redacted


def test_the_shape_of_the_path_stays_readable() -> None:
    assert redact_token_links(f"GET /password-reset/MQ/{SAMPLE_TOKEN}/ HTTP/1.1") == (
        "GET /password-reset/MQ/<redacted>/ HTTP/1.1"
    )
    # Pages without a token are left alone, and so is the form the link leads to.
    for path in ("/password-reset/", "/password-reset/sent/", "/password-reset/MQ/set-password/"):
        assert redact_token_links(f"GET {path} HTTP/1.1") == f"GET {path} HTTP/1.1"


def test_the_filter_redacts_the_formatted_message() -> None:
    record = logging.LogRecord(
        "django.request",
        logging.WARNING,
        __file__,
        1,
        "Not Found: %s",
        (f"/password-reset/MQ/{SAMPLE_TOKEN}/x",),
        None,
    )
    assert TokenLinkFilter().filter(record)
    assert record.getMessage() == "Not Found: /password-reset/MQ/<redacted>/x"


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_sign_in_link_leaves_no_token_in_any_log_of_the_server(
    tmp_path: Path, django_db_blocker: Any
) -> None:
    get_user_model().objects.create_user(username="ada", email="ada@example.com")
    link = password_link_for(username="ada")
    path = "/" + link.split("/", 3)[3]
    token = path.rstrip("/").rsplit("/", 1)[1]
    assert len(token) > 20
    log = tmp_path / "gunicorn.log"
    # LOG_LEVEL=DEBUG: every line Django and gunicorn write goes to the captured log.
    server = WebServer(server_env(database_url(), LOG_LEVEL="DEBUG"), log, "--log-level", "debug").start()
    try:
        with httpx.Client(base_url=server.base, timeout=30) as client:
            assert client.get(path).status_code == 302  # to the form, the token kept in the session
            assert client.get(path + "extra/").status_code == 404  # logged by django.request
    finally:
        server.stop()
    text = server.log_text()
    assert token not in text
    assert "/password-reset/" in text and "<redacted>" in text
    assert f"GET {path.rsplit('/', 2)[0]}/<redacted>/ HTTP/1.1" in text
