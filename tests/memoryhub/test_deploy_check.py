"""A production start passes Django's deployment checklist with no warning at all:
`manage.py check --deploy --fail-level WARNING` with DEBUG off, a strong key, real host
names and this run's database. And the check can fail: HSTS switched off fails it."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from tests.worker import database_url, operator_database_url

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.django_db, pytest.mark.slow]  # manage.py in a process of its own


def production_env(tmp_path: Path, **overrides: str) -> dict[str, str]:
    # Whatever the developer's shell says about these is not what production says.
    dropped = {
        "DEBUG",
        "REDIS_URL",
        "MEMORYHUB_PLAIN_HTTP",
        "MEMORYHUB_SSL_REDIRECT",
        "MEMORYHUB_HSTS_SECONDS",
        # Set for the whole test session by tests/e2e (Playwright's event loop); never
        # in a deployment.
        "DJANGO_ALLOW_ASYNC_UNSAFE",
    }
    env = {name: value for name, value in os.environ.items() if name not in dropped}
    env.update(
        DJANGO_SETTINGS_MODULE="memoryhub.settings",
        DEBUG="false",
        SECRET_KEY=secrets.token_urlsafe(50),
        MEMORYHUB_VAULT_KEY=Fernet.generate_key().decode(),
        ALLOWED_HOSTS="memory.example.com",
        CSRF_TRUSTED_ORIGINS="https://memory.example.com",
        DATABASE_URL=database_url(),
        OPERATOR_DATABASE_URL=operator_database_url(),
        MEMORYHUB_DATA_DIR=str(tmp_path / "data"),
        MEMORYHUB_BEHIND_PROXY="true",
    )
    env.update(overrides)
    return env


def deploy_check(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_production_start_passes_the_deployment_checklist_without_warnings(tmp_path: Path) -> None:
    result = deploy_check(production_env(tmp_path))

    assert result.returncode == 0, result.stdout + result.stderr
    # Only the two HSTS checks silenced on purpose (settings.py), nothing else to say.
    assert "System check identified no issues (2 silenced)." in result.stdout, result.stdout + result.stderr


def test_the_deployment_check_fails_when_hsts_is_switched_off(tmp_path: Path) -> None:
    result = deploy_check(production_env(tmp_path, MEMORYHUB_HSTS_SECONDS="0"))

    assert result.returncode != 0
    assert "security.W004" in result.stdout + result.stderr


def web_settings(env: dict[str, str]) -> list[str]:
    script = (
        "from django.conf import settings as s; "
        "print(s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_SSL_REDIRECT, s.SECURE_HSTS_SECONDS)"
    )
    result = subprocess.run(  # noqa: S603
        [sys.executable, "manage.py", "shell", "--no-imports", "-c", script],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


def test_make_runs_plain_http_keeps_cookies_usable_over_http(tmp_path: Path) -> None:
    """`make run` serves http://127.0.0.1 without DEBUG and sets MEMORYHUB_PLAIN_HTTP: no
    Secure cookies (signing in would be impossible), no redirect to https, no HSTS."""
    assert web_settings(production_env(tmp_path, MEMORYHUB_PLAIN_HTTP="true")) == [
        "False",
        "False",
        "False",
        "0",
    ]
    assert web_settings(production_env(tmp_path)) == ["True", "True", "True", "31536000"]
