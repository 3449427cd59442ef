"""Static files (the admin's, the vendored Swagger UI) are served by WhiteNoise from the
apps, with no collectstatic step; in the test process its scan runs once
(tests/static_files.py), and every client is served as the first was."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import Client
from whitenoise.middleware import WhiteNoiseMiddleware

from tests.static_files import WhiteNoiseScannedOnce

ASSETS = ["/static/admin/css/base.css", "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui.css"]


@pytest.mark.parametrize("path", ASSETS)
def test_every_client_is_served_the_apps_static_files(path: str) -> None:
    first, second = Client().get(path), Client().get(path)

    assert first.status_code == second.status_code == 200
    assert b"".join(first.streaming_content) == b"".join(second.streaming_content)  # type: ignore[attr-defined]
    assert first["Cache-Control"] == second["Cache-Control"]


def test_scanned_once_finds_what_whitenoise_finds() -> None:
    assert "tests.static_files.WhiteNoiseScannedOnce" in settings.MIDDLEWARE
    plain = WhiteNoiseMiddleware(get_response=None)
    WhiteNoiseScannedOnce(get_response=None)
    again = WhiteNoiseScannedOnce(get_response=None)

    assert again.files.keys() == plain.files.keys()
    assert set(ASSETS) <= again.files.keys()
