"""A local HTTP server standing in for the pages and APIs anchors point at (the anchor
checks' tests and the anchor drill)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


class Site:
    """A ThreadingHTTPServer on 127.0.0.1 whose answers a test sets per path:
    (status, body, headers, delay seconds), with an optional action run before the
    answer (`before`). Counts the requests it got."""

    def __init__(self) -> None:
        self.routes: dict[str, tuple[int, bytes, dict[str, str], float]] = {}
        self.before: dict[str, Callable[[], None]] = {}
        self.hits: dict[str, int] = {}
        self.hosts: list[str] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                site.hits[self.path] = site.hits.get(self.path, 0) + 1
                site.hosts.append(self.headers.get("Host", ""))
                if self.path in site.before:
                    site.before[self.path]()
                status, body, headers, delay = site.routes.get(self.path, (404, b"nope", {}, 0.0))
                if delay:
                    time.sleep(delay)  # the scenario: a page slower than the check's timeout
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                with contextlib.suppress(OSError):  # the check may hang up first
                    self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def serve(
        self, path: str, status: int = 200, body: bytes = b"", delay: float = 0.0, **headers: str
    ) -> None:
        self.routes[path] = (status, body, {k.replace("_", "-"): v for k, v in headers.items()}, delay)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def site() -> Iterator[Site]:
    server = Site()
    yield server
    server.stop()
