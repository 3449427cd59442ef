"""The two tiers: `make test` runs every test, `make test-fast` leaves out those marked
`slow`, the tests that start processes (gunicorn, Celery workers and beat, Redis, a
browser, PostgreSQL servers, commands) or that fuzz or smoke-run a drill.

- A test is marked `slow` by what it uses: any fixture of SLOW_FIXTURES, directly or
  through another fixture. A module or test that starts processes itself says so with
  `pytestmark = pytest.mark.slow` / `@pytest.mark.slow`.
- A test not marked `slow` that starts a process fails, in every run (`make test`
  included), with the command it tried to start: the fast tier cannot quietly fill with
  slow tests. The process is not started.
"""

from __future__ import annotations

import multiprocessing.process
import os
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

# Fixtures that start a process for the test (tests/worker.py, tests/mcp/conftest.py,
# pytest-playwright), or a live server with a browser or a load driver behind it.
SLOW_FIXTURES = frozenset(
    {
        "embedded_redis",  # redis-server (worker, start_worker, start_beat, task_route use it)
        "mcp_server",  # gunicorn
        "playwright",  # playwright's driver, then chromium (browser, page)
        "live_server",
    }
)

SLOW = "slow"
_EXPLAINED = (
    "a test that starts a process belongs to the slow tier: mark it "
    "`pytest.mark.slow` (or use a fixture of tests/tiers.py's SLOW_FIXTURES)"
)


class StartsAProcess(AssertionError):
    """Raised where a fast-tier test starts a process; an AssertionError so that code
    under test that catches Exception does not swallow it quietly."""


def is_slow(item: pytest.Item) -> bool:
    return item.get_closest_marker(SLOW) is not None


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(SLOW)


@contextmanager
def _no_processes(started: list[str]) -> Iterator[None]:
    """Every way this process starts another refuses, recording what was asked."""
    saved: list[tuple[Any, str, Any]] = []

    def refuse(target: Any, name: str, describe: Callable[..., str]) -> None:
        original = getattr(target, name)

        def refused(*args: Any, **kwargs: Any) -> Any:
            started.append(describe(*args, **kwargs))
            raise StartsAProcess(f"{_EXPLAINED}; it started {started[-1]}")

        saved.append((target, name, original))
        setattr(target, name, refused)

    # Popen is where subprocess.run/call/check_output and asyncio's subprocesses start theirs.
    refuse(subprocess.Popen, "_execute_child", lambda popen, args, *rest, **kw: f"{args!r}")
    refuse(multiprocessing.process.BaseProcess, "start", lambda process: f"a {type(process).__name__}")
    for name in ("fork", "forkpty", "system", "posix_spawn", "posix_spawnp"):
        if hasattr(os, name):
            refuse(os, name, lambda *args, _name=name, **kw: f"os.{_name}{args[:1]!r}")
    try:
        yield
    finally:
        for target, name, original in reversed(saved):
            setattr(target, name, original)


@contextmanager
def _guarded(item: pytest.Item) -> Iterator[None]:
    if is_slow(item):
        yield
        return
    started: list[str] = []
    with _no_processes(started):
        yield
    if started:
        # Also when the code under test caught the refusal: the test itself is wrong.
        raise StartsAProcess(f"{_EXPLAINED}; it started {', '.join(started)}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    with _guarded(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    with _guarded(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    with _guarded(item):
        return (yield)
