"""gunicorn's threaded worker, with a thread taken only by a request whose headers have
arrived (docs/security.md, "Web server").

gunicorn's gthread worker hands a new connection to a thread at once, which waits up to
5 s for its first bytes, and then reads the headers with no deadline at all: a few
connections that send nothing, or half a request line, stopped every thread of a
process (no gunicorn setting bounds it). Here the main loop, which already waits on every
idle connection, also reads a request's headers, without blocking; a thread gets the
connection once they are complete. Headers that have not arrived within
`MEMORYHUB_HEADER_TIMEOUT_SECONDS` of the connection (or of the next request's first
byte) close the connection; so do headers over 64 KiB (431).

A connection the server closes after an answer (`Connection: close`) is half-closed and
left in the main loop until the client closes it or 5 s pass; gunicorn lingered on it
in the main loop itself, blocking every other connection of the process for up to 2 s
per client that kept sending.

Plain HTTP/1 only: a TLS connection (gunicorn's certfile) or HTTP/2 without TLS goes
through gunicorn's own path; MemoryHub's TLS ends at a proxy (docs/operations.md)."""

from __future__ import annotations

import contextlib
import errno
import os
import selectors
import socket
import time
from functools import partial
from typing import Any

from gunicorn import util
from gunicorn.http2 import negotiation
from gunicorn.workers.gthread import TConn, ThreadWorker

HEADER_END = b"\r\n\r\n"
MAX_HEADER_BYTES = 64 * 1024
RECV_BYTES = 64 * 1024
LINGER_SECONDS = 5.0
TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\n"
    b"Content-Type: application/json\r\nContent-Length: 71\r\n\r\n"
    b'{"error": "headers_too_large", "detail": "request headers over 64 KiB"}'
)


def header_seconds() -> float:
    return float(os.environ.get("MEMORYHUB_HEADER_TIMEOUT_SECONDS") or 10.0)


class Connection(TConn):
    def __init__(self, worker: HeaderReadingWorker, *args: Any) -> None:
        super().__init__(*args)
        self.worker = worker
        self.header_bytes = bytearray()
        self.arrived = b""  # headers read by the main loop, for the parser

    def close(self, graceful: bool = False) -> None:
        if graceful:
            self.worker.linger(self.sock)
        else:
            util.close(self.sock)


class HeaderReadingWorker(ThreadWorker):  # type: ignore[misc]  # gunicorn has no type hints
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.header_seconds = header_seconds()
        # Insertion order is deadline order: every deadline is "now + header_seconds".
        self.reading_headers: dict[Connection, float] = {}
        self.lingering: dict[socket.socket, float] = {}

    def reads_headers(self, conn: Connection) -> bool:
        return not self.cfg.is_ssl and not negotiation.prior_knowledge_allowed(self.cfg, conn.client)

    def accept(self, listener: socket.socket) -> None:
        try:
            sock, client = listener.accept()
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                raise
            return
        self.nr_conns += 1
        conn = Connection(self, self.cfg, sock, client, listener.getsockname())
        if self.reads_headers(conn):
            self.await_headers(conn)
        else:
            sock.setblocking(True)
            self.enqueue_req(conn)

    def on_client_socket_readable(self, conn: Connection, client: socket.socket) -> None:
        """A kept-alive connection's next request has begun."""
        self.poller.unregister(client)
        self.keepalived_conns.remove(conn)
        if not isinstance(conn, Connection) or not self.reads_headers(conn):
            self.enqueue_req(conn)
            return
        self.await_headers(conn)
        self.on_header_bytes(conn, client)

    def await_headers(self, conn: Connection) -> None:
        conn.header_bytes = bytearray()
        self.reading_headers[conn] = time.monotonic() + self.header_seconds
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self.on_header_bytes, conn))

    def on_header_bytes(self, conn: Connection, _client: socket.socket) -> None:
        try:
            data = conn.sock.recv(RECV_BYTES)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:  # closed before sending a whole request
            self.stop_reading_headers(conn)
            self.drop(conn)
            return
        searched_from = max(0, len(conn.header_bytes) - len(HEADER_END) + 1)
        conn.header_bytes += data
        if conn.header_bytes.find(HEADER_END, searched_from) >= 0:
            self.stop_reading_headers(conn)
            conn.arrived, conn.header_bytes = bytes(conn.header_bytes), bytearray()
            conn.data_ready = True
            self.enqueue_req(conn)
        elif len(conn.header_bytes) > MAX_HEADER_BYTES:
            self.stop_reading_headers(conn)
            with contextlib.suppress(OSError):
                conn.sock.send(TOO_LARGE)
            self.drop(conn)

    def stop_reading_headers(self, conn: Connection) -> None:
        self.reading_headers.pop(conn, None)
        with contextlib.suppress(KeyError, ValueError, OSError):
            self.poller.unregister(conn.sock)

    def drop(self, conn: Connection) -> None:
        self.nr_conns -= 1
        conn.close()

    def handle(self, conn: Connection) -> Any:
        if isinstance(conn, Connection) and conn.arrived:
            arrived, conn.arrived = conn.arrived, b""
            conn.sock.setblocking(True)
            conn.init()  # the parser, for a new connection
            conn.parser.unreader.unread(arrived)
        return super().handle(conn)

    def murder_pending(self) -> None:
        """Called by gunicorn's loop about every second: also ends header reads past
        their deadline (all of them once the worker stops) and lingering past its own."""
        super().murder_pending()
        now = time.monotonic()
        for conn, deadline in list(self.reading_headers.items()):
            if deadline > now and self.alive:
                break
            self.stop_reading_headers(conn)
            self.drop(conn)
        for sock, deadline in list(self.lingering.items()):
            if deadline <= now or not self.alive:
                self.end_lingering(sock)

    def linger(self, sock: socket.socket) -> None:
        """Close after the client has read the answer: half-close, then wait in the
        poller for its end (or LINGER_SECONDS), discarding what it still sends. Closing
        at once with unread bytes would reset the connection, and the client could lose
        the answer."""
        try:
            sock.shutdown(socket.SHUT_WR)
            sock.setblocking(False)
            self.poller.register(sock, selectors.EVENT_READ, partial(self.on_lingering_bytes, sock))
        except (OSError, ValueError, KeyError):
            util.close(sock)
            return
        self.lingering[sock] = time.monotonic() + LINGER_SECONDS

    def on_lingering_bytes(self, sock: socket.socket, _client: socket.socket) -> None:
        try:
            if sock.recv(RECV_BYTES):
                return
        except BlockingIOError:
            return
        except OSError:
            pass
        self.end_lingering(sock)

    def end_lingering(self, sock: socket.socket) -> None:
        self.lingering.pop(sock, None)
        with contextlib.suppress(KeyError, ValueError, OSError):
            self.poller.unregister(sock)
        util.close(sock)
