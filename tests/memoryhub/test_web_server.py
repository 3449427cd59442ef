"""The web server's connection handling under the deployment's gunicorn config."""

from __future__ import annotations

import http.client
import time
from pathlib import Path
from urllib.parse import urlsplit

from tests.memoryhub.test_metrics import two_process_server  # noqa: F401 (a fixture)

IDLE_SECONDS = 3.0  # past gunicorn's own default keep-alive of 2 s


def test_an_idle_kept_alive_connection_is_still_served_seconds_later(
    two_process_server: tuple[str, Path],  # noqa: F811
) -> None:
    address = urlsplit(two_process_server[0])
    connection = http.client.HTTPConnection(address.hostname or "", address.port, timeout=30)
    try:
        connection.request("GET", "/healthz")
        first = connection.getresponse()
        first.read()
        assert first.status == 200
        assert first.getheader("Connection", "").lower() != "close"

        time.sleep(IDLE_SECONDS)
        connection.request("GET", "/healthz")  # on the same socket: raises if the server closed it
        second = connection.getresponse()
        second.read()
    finally:
        connection.close()
    assert second.status == 200
