"""The tiers (tests/tiers.py) on a test file of their own, in a pytest run inside this one:
what is marked `slow`, what `make test-fast` leaves out, and the guard that fails a fast
test starting a process."""

from __future__ import annotations

from fnmatch import fnmatch

import pytest

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.slow  # the inner tests start processes on purpose

INNER_TESTS = """
import subprocess
import sys

import pytest


@pytest.fixture
def embedded_redis():  # a name of tests.tiers.SLOW_FIXTURES
    yield


@pytest.fixture
def through_another_fixture(embedded_redis):
    yield


def start():
    subprocess.run([sys.executable, "-c", "pass"], check=True)


def test_unmarked_starts_a_process():
    start()


def test_unmarked_swallows_the_refusal():
    try:
        start()
    except Exception:
        pass


@pytest.mark.slow
def test_marked_starts_a_process():
    start()


def test_uses_a_slow_fixture(through_another_fixture):
    start()


def test_unmarked_starts_nothing():
    pass
"""
PLUGINS = (
    "-p",
    "tests.tiers",
    "-p",
    "no:django",
    "-p",
    "no:playwright",
    "-p",
    "no:xdist",
    "-p",
    "no:cacheprovider",
)


def test_a_test_not_marked_slow_that_starts_a_process_fails_and_names_the_command(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_inner=INNER_TESTS)

    result = pytester.runpytest(*PLUGINS)

    result.assert_outcomes(passed=3, failed=2)
    result.stdout.fnmatch_lines(["FAILED test_inner.py::test_unmarked_starts_a_process - *"])
    result.stdout.fnmatch_lines(["FAILED test_inner.py::test_unmarked_swallows_the_refusal - *"])
    refusal = (
        "*StartsAProcess: a test that starts a process belongs to the slow tier*it started *'-c', 'pass']"
    )
    assert len([line for line in result.outlines if fnmatch(line, refusal)]) >= 2


def test_the_fast_tier_leaves_out_what_is_marked_and_what_uses_a_slow_fixture(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_inner=INNER_TESTS)

    result = pytester.runpytest(*PLUGINS, "-m", "not slow", "-v")

    result.assert_outcomes(passed=1, failed=2, deselected=2)
    result.stdout.fnmatch_lines(["*test_unmarked_starts_nothing PASSED*"])
