"""Linear time, checked without a stopwatch target: how much longer a call takes on a text
four times as long. This thread's CPU time, the best of a few runs, so the machine's
speed and load cancel out: about 4x when the work is linear (less where a fixed cost
dominates), 16x when it is quadratic, as the backtracking patterns this guards against
were (12.8 s to scrub and 24 s to extract `a.` * 32768). The milliseconds themselves are
`make bench`'s (sections hardening, scrubber, extraction)."""

from __future__ import annotations

import time
from collections.abc import Callable

GROWTH = 4
LIMIT = 8.0
RUNS = 3
# Below this a ratio says nothing: clock resolution, allocation, a cache miss.
FLOOR_SECONDS = 0.002


def cpu_seconds(call: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(RUNS):
        started = time.thread_time()
        call()
        best = min(best, time.thread_time() - started)
    return best


def growth(work: Callable[[str], object], text_of_size: Callable[[int], str], size: int) -> float:
    """CPU time of `work` on text_of_size(size) over its time on a text GROWTH times shorter."""
    short, long = text_of_size(size // GROWTH), text_of_size(size)
    work(short)  # warm up: lazily built pattern states and caches are not the text's cost
    return cpu_seconds(lambda: work(long)) / max(cpu_seconds(lambda: work(short)), FLOOR_SECONDS)


def assert_linear_time(work: Callable[[str], object], text_of_size: Callable[[int], str], size: int) -> None:
    ratio = growth(work, text_of_size, size)
    assert ratio < LIMIT, f"a text {GROWTH}x longer took {ratio:.1f}x the time: not linear"
