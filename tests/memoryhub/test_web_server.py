"""The web server under the deployment's gunicorn config: its connections and its files."""

from __future__ import annotations

import http.client
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from tests.memoryhub.test_metrics import two_process_server  # noqa: F401 (a fixture)
from tests.web_server import WebServer, server_env
from tests.worker import database_url

pytestmark = pytest.mark.slow  # gunicorn, Python

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

        time.sleep(IDLE_SECONDS)  # the scenario: a connection left idle that long
        connection.request("GET", "/healthz")  # on the same socket: raises if the server closed it
        second = connection.getresponse()
        second.read()
    finally:
        connection.close()
    assert second.status == 200


@pytest.mark.django_db
def test_without_metrics_no_process_keeps_values_in_files(tmp_path: Path) -> None:
    """The files are memory-mapped: on a full disk a process growing one dies of SIGBUS."""
    metrics = tmp_path / "metrics"
    env = server_env(database_url(), MEMORYHUB_METRICS_DIR=str(metrics), MEMORYHUB_METRICS_TOKEN="")
    server = WebServer(env, tmp_path / "gunicorn.log", "--workers", "2").start()
    try:
        assert httpx.get(f"{server.base}/api/v1/teams/nope/memories/").status_code == 401
        assert httpx.get(f"{server.base}/metrics").status_code == 404
    finally:
        server.stop()
    assert list(metrics.rglob("*.db")) == []
