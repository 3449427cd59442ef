"""The linear-time check (tests/linear_time.py) itself: it fails a quadratic pass."""

from __future__ import annotations

import re

import pytest

from tests.linear_time import assert_linear_time

# Backtracking from every position to the end of the text: quadratic on `a.` * n.
RESCAN = re.compile(r"[\w.]+@")
SIZE = 8 * 1024


def a_dot(size: int) -> str:
    return "a." * (size // 2)


def test_a_quadratic_pass_fails_the_check() -> None:
    with pytest.raises(AssertionError, match="not linear"):
        assert_linear_time(RESCAN.search, a_dot, SIZE)


def test_a_linear_pass_meets_it() -> None:
    def count_dots(text: str) -> int:
        return sum(1 for character in text if character == ".")

    assert_linear_time(count_dots, a_dot, 64 * SIZE)
