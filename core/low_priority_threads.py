"""CPU work a request does for its own sake, run at background priority.

A save's near-duplicate check embeds the opening of the new text inside the request
(search.duplicates_on_save). On shared cores that inference competed, at the same priority, with
the short requests of every other team (the noisy neighbour). Here it runs on a
small pool of threads lowered to MEMORYHUB_WORKER_NICENESS, the workers' own niceness
(the same work: embedding a memory), so the kernel gives it what serving other
requests leaves over; the request waits for the result as before.

On Linux the nice value belongs to a thread, not the process (setpriority(2), "BUGS"),
so only the pool's threads are lowered; a thread cannot raise its priority again
without privilege, which is why the threads are kept apart rather than lowered and
restored per call. Elsewhere, or with niceness 0, the pool threads run at the process's
priority. Functions run here must not use the database: the pool's threads would each
open a connection that no request closes.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

from django.conf import settings

from core.process_thread_pools import ProcessThreadPool
from core.settings_env import default_processes

logger = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")


def run_at_background_priority(function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """`function(*args, **kwargs)` on a background-priority thread; waits for it and
    returns its result or raises its exception."""
    return _BACKGROUND_THREADS.pool().submit(function, *args, **kwargs).result()


def _background_pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(
        max_workers=default_processes(),  # more than one per core would only queue on the cores
        thread_name_prefix="background-priority",
        initializer=_lower_thread_priority,
        initargs=(settings.MEMORYHUB_WORKER_NICENESS,),
    )


_BACKGROUND_THREADS = ProcessThreadPool(_background_pool)


def _lower_thread_priority(niceness: int) -> None:
    if niceness <= 0 or not sys.platform.startswith("linux"):
        return
    thread_id = threading.get_native_id()
    try:
        current = os.getpriority(os.PRIO_PROCESS, thread_id)
        os.setpriority(os.PRIO_PROCESS, thread_id, current + niceness)
    except OSError as exc:
        logger.warning("background-priority thread left at normal priority: %s", exc)
