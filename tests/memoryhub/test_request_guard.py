"""The web server's guards against clients that hold its threads (docs/security.md, "Web
server"), on a real gunicorn with the deployment's config: one process of four threads, so
two held threads are half of it.

- `GET /mcp/` (a server-sent event stream in the SDK) answers 405 at once.
- A token has at most two requests in flight per process; more answer 429 unread.
- A body that does not arrive in time answers 408; headers that do not arrive in time, or
  a connection that sends nothing, close without ever taking a thread.
- Every answer given without reading the body closes the connection, and says so."""

from __future__ import annotations

import contextlib
import http.client
import json
import select
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from teams.services import create_team, create_token
from tests.web_server import WebServer, server_env
from tests.worker import database_url

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]  # gunicorn

BODY_SECONDS = 2.0  # the guard's body deadline in this server (plus the size at the minimum rate)
HEADER_SECONDS = 2.0
HANG_SECONDS = 20.0  # a hang detector, not a speed target: every wait below is far shorter
SLOW_CLIENTS = 6  # more than the process's four threads


@pytest.fixture(scope="module")
def guarded_server(
    django_db_setup: None, django_db_blocker: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[WebServer]:
    with django_db_blocker.unblock():
        url = database_url()
    env = server_env(
        url,
        WEB_CONCURRENCY="1",
        MEMORYHUB_WEB_THREADS="4",
        MEMORYHUB_BODY_TIMEOUT_SECONDS=str(BODY_SECONDS),
        MEMORYHUB_HEADER_TIMEOUT_SECONDS=str(HEADER_SECONDS),
        MEMORYHUB_THROTTLE_READ="100000/min",
        MEMORYHUB_THROTTLE_WRITE="100000/min",
    )
    server = WebServer(env, tmp_path_factory.mktemp("guarded") / "gunicorn.log").start()
    try:
        yield server
    finally:
        server.stop()


def agent(slug: str, scopes: tuple[str, ...] = ("read", "write")) -> str:
    team = create_team(slug=slug, name=slug.title())
    return create_token(team=team, name="bot", scopes=list(scopes), actor="test").raw


def slow_body(server: WebServer, token: str, *, declared: int = 1000) -> socket.socket:
    """A save whose headers are complete and whose body has only begun (1 byte of
    `declared`): the slowloris that holds a thread while the application reads."""
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=HANG_SECONDS)
    sock.sendall(
        (
            "POST /api/v1/teams/slow/memories/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {declared}\r\n\r\n{{"
        ).encode()
    )
    return sock


def response_of(sock: socket.socket) -> http.client.HTTPResponse:
    response = http.client.HTTPResponse(sock)
    response.begin()
    return response


def assert_closing_error(response: http.client.HTTPResponse, status: int, code: str) -> dict[str, Any]:
    body = json.loads(response.read())
    assert response.status == status, body
    assert response.getheader("Connection", "").lower() == "close"
    assert body["error"] == code and body["detail"]
    return body


def test_get_and_delete_on_mcp_answer_405_at_once(guarded_server: WebServer) -> None:
    token = agent("reader", ("read",))
    headers = {"Authorization": f"Bearer {token}", "Accept": "text/event-stream"}
    with httpx.Client(base_url=guarded_server.base, timeout=HANG_SECONDS) as client:
        for method in ("GET", "DELETE"):
            # Streamed: an event stream's pings would keep a plain read waiting for ever.
            with client.stream(method, "/mcp/", headers=headers) as response:
                assert response.status_code == 405, response.headers
                assert response.headers["Allow"] == "POST"
                assert response.headers["Content-Type"] == "application/json"
                assert json.loads(response.read())["error"] == "method_not_allowed"
        # The next request on the same client is served.
        assert client.get("/healthz").status_code == 200


def test_slow_bodies_of_one_token_leave_other_teams_served(guarded_server: WebServer) -> None:
    attacker = agent("slow")
    other = agent("other")
    held = [slow_body(guarded_server, attacker) for _ in range(SLOW_CLIENTS)]
    try:
        headers = {"Authorization": f"Bearer {other}"}
        with httpx.Client(base_url=guarded_server.base, timeout=HANG_SECONDS) as client:
            for _ in range(3):
                assert client.get("/api/v1/teams/other/memories/", headers=headers).status_code == 200
                assert client.get("/healthz").status_code == 200
                assert client.get("/login/").status_code == 200
        # Two were taken and time out; the rest were refused without being read.
        statuses = sorted(response_of(sock).status for sock in held)
        assert statuses == [408, 408] + [429] * (SLOW_CLIENTS - 2)
    finally:
        for sock in held:
            sock.close()


def test_a_token_over_its_cap_answers_429_unread_and_closes(guarded_server: WebServer) -> None:
    token = agent("capped")
    held = [slow_body(guarded_server, token) for _ in range(3)]
    try:
        # Two are taken (their bodies keep them until the deadline); the third is
        # answered at once, whichever it is.
        readable, _, _ = select.select(held, [], [], HANG_SECONDS)
        assert len(readable) == 1
        refused = response_of(readable[0])
        assert refused.getheader("Retry-After") == "1"
        assert assert_closing_error(refused, 429, "rate_limited")["retry_after"] == 1
        # While the two are held, the token's requests without a body are refused too.
        with httpx.Client(base_url=guarded_server.base, timeout=HANG_SECONDS) as client:
            response = client.get(
                "/api/v1/teams/capped/memories/", headers={"Authorization": f"Bearer {token}"}
            )
        assert response.status_code == 429
        assert response.headers["Connection"] == "close"
    finally:
        for sock in held:
            sock.close()


def test_a_stalled_body_answers_408_and_closes(guarded_server: WebServer) -> None:
    token = agent("stalled")
    with contextlib.closing(slow_body(guarded_server, token)) as sock:
        assert_closing_error(response_of(sock), 408, "request_timeout")
        assert sock.recv(1) == b""  # closed by the server


def test_after_an_early_413_the_next_request_on_the_client_succeeds(guarded_server: WebServer) -> None:
    token = agent("large")
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    too_large = b"x" * (1024 * 1024 + 1)
    with httpx.Client(base_url=guarded_server.base, headers=headers, timeout=HANG_SECONDS) as client:
        for path in ("/mcp/", "/api/v1/teams/large/memories/"):
            response = client.post(path, content=too_large)
            assert response.status_code == 413
            assert response.headers["Connection"] == "close"
            assert response.json()["error"] == "body_too_large"
            assert client.get("/api/v1/teams/large/memories/").status_code == 200


def test_idle_connections_and_unfinished_headers_hold_no_thread(guarded_server: WebServer) -> None:
    idle = [socket.create_connection(("127.0.0.1", guarded_server.port)) for _ in range(SLOW_CLIENTS)]
    partial = [socket.create_connection(("127.0.0.1", guarded_server.port)) for _ in range(SLOW_CLIENTS)]
    try:
        for sock in partial:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        with httpx.Client(base_url=guarded_server.base, timeout=HANG_SECONDS) as client:
            for _ in range(3):
                assert client.get("/healthz").status_code == 200
        # Past the header deadline the server has closed them all.
        for sock in idle + partial:
            sock.settimeout(HANG_SECONDS)
            assert sock.recv(1) == b""
    finally:
        for sock in idle + partial:
            sock.close()


def test_a_chunked_body_is_read_by_the_guard(guarded_server: WebServer) -> None:
    token = agent("chunked")
    body = iter([b'{"key": "k", "content": "', b"Sent in chunks.", b'"}'])
    response = httpx.post(
        f"{guarded_server.base}/api/v1/teams/chunked/memories/",
        content=body,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        timeout=HANG_SECONDS,
    )
    assert response.status_code == 201, response.text
    assert response.json()["content"] == "Sent in chunks."
