"""Browser tests: pytest-playwright driving Debian's chromium against pytest-django's
live server (a real HTTP server on a transactional test database).

- Playwright never downloads a browser: it launches /usr/bin/chromium (or
  MEMORYHUB_CHROMIUM), headless. Without it the tests are skipped on a developer
  machine and FAIL under CI=true, so a CI image that lost chromium cannot go green.
- Playwright's sync API runs an event loop in the test thread, so Django's guard
  against database calls from async contexts must be lifted for the test code's own
  fixtures (DJANGO_ALLOW_ASYNC_UNSAFE); the server runs in its own thread as usual.
- Every test leaves a screenshot in test-artifacts/ (git-ignored), taken at the end of
  the test, failed or not.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")

CHROMIUM = os.environ.get("MEMORYHUB_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
PASSWORD = "correct horse battery staple"
# Generous waits: a save indexes in-process (the first one loads the embedding model),
# and CI machines are slow; a passing run never waits this long.
TIMEOUT_MS = 20_000
expect.set_options(timeout=TIMEOUT_MS)


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    if not os.access(CHROMIUM, os.X_OK):
        message = f"the browser tests need chromium at {CHROMIUM} (make browser-deps)"
        if _in_ci():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return {
        **browser_type_launch_args,
        "executable_path": CHROMIUM,
        "headless": True,
        # Containers often run as root without a user namespace sandbox.
        "args": ["--no-sandbox", "--disable-dev-shm-usage"],
    }


@pytest.fixture
def browser_context_args(browser_context_args: dict[str, Any]) -> dict[str, Any]:
    return {**browser_context_args, "viewport": {"width": 1280, "height": 900}}


@pytest.fixture(autouse=True)
def _screenshot_at_the_end(request: pytest.FixtureRequest, page: Any) -> Iterator[None]:
    # Depends on `page`, so it is torn down (and shoots) before the page closes.
    page.set_default_timeout(TIMEOUT_MS)
    yield
    ARTIFACTS.mkdir(exist_ok=True)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def screenshot(page: Any, name: str) -> Path:
    """A named screenshot in the middle of a test."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def sign_in(page: Any, base_url: str, username: str, password: str = PASSWORD) -> None:
    page.goto(f"{base_url}/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{base_url}/")
