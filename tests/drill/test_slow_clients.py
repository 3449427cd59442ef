"""Drill: one token's 50 slow or idle connections against `make run`'s web server
(gunicorn's default processes of 4 threads), while another team reads and searches one
request after another. That team's latency under attack stays within twice its idle
figure (p95).

The attack, all from one agent token, each connection renewed when the server ends it:
- 20 slowloris bodies: a save's headers, then one byte of its body a second;
- 10 held GET streams: `GET /mcp/` asking for an event stream (405 now), again and again;
- 10 idle keep-alives: one request, then nothing;
- 10 unfinished headers: the request line and the token, then one header byte a second."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from teams.services import create_team, create_token
from tests.bench.harness import percentile
from tests.drill.record import record
from tests.web_server import WebServer, server_env
from tests.worker import database_url, wait_for

pytestmark = [pytest.mark.drill, pytest.mark.django_db(transaction=True)]

VICTIM_REQUESTS = 150  # per phase: GET memories/ and POST search/ in turn
ATTACK_SECONDS_MAX = 300.0  # the attack's own bound, whatever the victim does
TARGET_RATIO = 2.0


class Attacker(threading.Thread):
    """One connection of the attack, opened again whenever the server ends it."""

    def __init__(self, port: int, behaviour: Callable[[socket.socket, threading.Event], None]) -> None:
        super().__init__(daemon=True)
        self.port, self.behaviour = port, behaviour
        self.stop = threading.Event()
        self.connections = 0

    def run(self) -> None:
        deadline = time.monotonic() + ATTACK_SECONDS_MAX
        while not self.stop.is_set() and time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=5) as sock:
                    self.connections += 1
                    self.behaviour(sock, self.stop)
            except OSError:
                self.stop.wait(0.2)


def trickle(sock: socket.socket, stop: threading.Event, data: bytes) -> None:
    for byte in data:
        if stop.wait(1.0):
            return
        sock.sendall(bytes([byte]))


def slow_body(token: str) -> Callable[[socket.socket, threading.Event], None]:
    def behaviour(sock: socket.socket, stop: threading.Event) -> None:
        sock.sendall(
            (
                "POST /api/v1/teams/attacker/memories/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n"
            ).encode()
        )
        trickle(sock, stop, b'{"key": "k", "content": "' + b"x" * 4970 + b'"}')

    return behaviour


def held_stream(token: str) -> Callable[[socket.socket, threading.Event], None]:
    request = (
        "GET /mcp/ HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
        f"Authorization: Bearer {token}\r\n\r\n"
    ).encode()

    def behaviour(sock: socket.socket, stop: threading.Event) -> None:
        while not stop.is_set():
            sock.sendall(request)
            if not sock.recv(65536):  # a stream that never ends, or an answer
                return
            stop.wait(0.5)

    return behaviour


def idle_keep_alive(token: str) -> Callable[[socket.socket, threading.Event], None]:
    def behaviour(sock: socket.socket, stop: threading.Event) -> None:
        sock.sendall(
            (
                "GET /api/v1/teams/attacker/memories/ HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                f"Authorization: Bearer {token}\r\n\r\n"
            ).encode()
        )
        sock.recv(65536)
        sock.settimeout(None)
        while not stop.wait(1.0):
            pass

    return behaviour


def unfinished_headers(token: str) -> Callable[[socket.socket, threading.Event], None]:
    def behaviour(sock: socket.socket, stop: threading.Event) -> None:
        sock.sendall(
            f"GET /api/v1/teams/attacker/memories/ HTTP/1.1\r\nAuthorization: Bearer {token}\r\n".encode()
        )
        trickle(sock, stop, b"X-Slow: " + b"s" * 200)

    return behaviour


def victim_latencies(base: str, token: str) -> tuple[list[float], int]:
    """Milliseconds of each request, and how many did not answer 2xx."""
    latencies: list[float] = []
    failed = 0
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=f"{base}/api/v1/teams/victim/", headers=headers, timeout=30) as client:
        for n in range(VICTIM_REQUESTS):
            started = time.perf_counter()
            try:
                if n % 2:
                    response = client.post("search/", json={"query": "deploy friday"})
                else:
                    response = client.get("memories/")
                failed += not response.is_success
            except httpx.TransportError:
                failed += 1
            latencies.append((time.perf_counter() - started) * 1000)
    return latencies, failed


def summary(latencies: list[float]) -> dict[str, float]:
    return {"p50": round(percentile(latencies, 50), 1), "p95": round(percentile(latencies, 95), 1)}


def test_one_tokens_slow_connections_leave_another_teams_latency_within_twice_idle(tmp_path: Path) -> None:
    victim_team = create_team(slug="victim", name="Victim")
    victim = create_token(team=victim_team, name="reader", scopes=["read", "write"], actor="drill").raw
    attacker = create_token(
        team=create_team(slug="attacker", name="Attacker"),
        name="bot",
        scopes=["read", "write"],
        actor="drill",
    ).raw
    env = server_env(
        database_url(), MEMORYHUB_THROTTLE_READ="100000/min", MEMORYHUB_THROTTLE_WRITE="100000/min"
    )
    server = WebServer(env, tmp_path / "gunicorn.log").start()  # make run's processes and threads
    attackers: list[Attacker] = []
    try:
        with httpx.Client(base_url=f"{server.base}/api/v1/teams/victim/", timeout=30) as client:
            for n in range(20):
                body = {
                    "key": f"note-{n}",
                    "content": f"Deploy on friday, note {n}.",
                    "allow_duplicate": True,
                }
                assert client.post(
                    "memories/", json=body, headers={"Authorization": f"Bearer {victim}"}
                ).is_success
        for _ in range(2):  # warm up every process and thread
            victim_latencies(server.base, victim)
        idle, idle_failed = victim_latencies(server.base, victim)
        for behaviour, count in (
            (slow_body(attacker), 20),
            (held_stream(attacker), 10),
            (idle_keep_alive(attacker), 10),
            (unfinished_headers(attacker), 10),
        ):
            attackers += [Attacker(server.port, behaviour) for _ in range(count)]
        for thread in attackers:
            thread.start()
        wait_for(lambda: all(thread.connections for thread in attackers), 60, "every attacking connection")
        attacked, attacked_failed = victim_latencies(server.base, victim)
    finally:
        for thread in attackers:
            thread.stop.set()
        for thread in attackers:
            thread.join(10)
        server.stop()
    idle_figures, attacked_figures = summary(idle), summary(attacked)
    ratio = round(attacked_figures["p95"] / idle_figures["p95"], 2)
    record(
        "one token's 50 slow connections",
        idle_p50_ms=idle_figures["p50"],
        idle_p95_ms=idle_figures["p95"],
        attacked_p50_ms=attacked_figures["p50"],
        attacked_p95_ms=attacked_figures["p95"],
        p95_ratio=ratio,
        attacker_connections=sum(thread.connections for thread in attackers),
        victim_failures=idle_failed + attacked_failed,
    )
    print(f"\nidle {idle_figures}, under attack {attacked_figures}, p95 ratio {ratio}")
    assert idle_failed == attacked_failed == 0
    assert ratio <= TARGET_RATIO, (idle_figures, attacked_figures)
