"""An overall deadline on a blocking read from a client's socket.

A socket timeout bounds each recv(), not the whole read: gunicorn's body reader loops
until it has what was asked for, so a client sending one byte just before every timeout
could hold the thread for ever. One watchdog thread per process instead shuts the
reading side of a socket whose deadline passed (shutdown(SHUT_RD)): the blocked recv()
returns at once with end-of-file, and the reader sees `Watch.fired`."""

from __future__ import annotations

import contextlib
import heapq
import itertools
import os
import socket
import threading
import time
from types import TracebackType


class Watch:
    def __init__(self, sock: socket.socket | None, lock: threading.Condition) -> None:
        self.sock = sock
        self.fired = False
        self.done = False
        self._lock = lock

    def __enter__(self) -> Watch:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, trace: TracebackType | None
    ) -> None:
        # Under the watchdog's lock: after this, `fired` is final.
        with self._lock:
            self.done = True


class Deadlines:
    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._queue: list[tuple[float, int, Watch]] = []
        self._order = itertools.count()
        self._owner_pid = 0

    def watch(self, sock: socket.socket | None, deadline: float) -> Watch:
        """A Watch (a context manager) that shuts `sock`'s reading side at `deadline`
        (time.monotonic()) unless the block ended first. No socket: nothing to watch."""
        watch = Watch(sock, self._condition)
        if sock is None:
            return watch
        with self._condition:
            if self._owner_pid != os.getpid():
                # Started on first use in each process: a thread does not survive a fork.
                self._owner_pid = os.getpid()
                self._queue.clear()
                threading.Thread(target=self._run, name="read-deadlines", daemon=True).start()
            heapq.heappush(self._queue, (deadline, next(self._order), watch))
            self._condition.notify()
        return watch

    def _run(self) -> None:
        while True:
            with self._condition:
                while not self._queue or self._queue[0][0] > time.monotonic():
                    wait = self._queue[0][0] - time.monotonic() if self._queue else None
                    self._condition.wait(wait)
                _, _, watch = heapq.heappop(self._queue)
                if watch.done:
                    continue
                watch.fired = True
            if watch.sock is not None:
                # OSError: already closed by the client or the server.
                with contextlib.suppress(OSError):
                    watch.sock.shutdown(socket.SHUT_RD)


deadlines = Deadlines()
