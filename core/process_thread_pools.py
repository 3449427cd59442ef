"""A thread pool per process: made on first use, and made again in a process forked from
one that had it (gunicorn's and Celery's workers), whose inherited pool has no threads
and would never run what it is given."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor


class ProcessThreadPool:
    """`pool()` is this process's pool, made by `make` (called at most once per process)."""

    def __init__(self, make: Callable[[], ThreadPoolExecutor]) -> None:
        self._make = make
        self._pool: ThreadPoolExecutor | None = None
        self._pid: int | None = None
        self._lock = threading.Lock()

    def pool(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None or self._pid != os.getpid():
                self._pool = self._make()
                self._pid = os.getpid()
            return self._pool
