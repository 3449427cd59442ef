"""Hooks: how a lower app triggers a higher one without importing it.

Apps stand on lower floors only (docs/architecture.md). When a lower app must set off
work that a higher app owns (a saved memory must be indexed; a team shutdown must
delete every app's rows), the lower app declares a `Hook` in its `hooks.py` and calls
it; the higher app registers a receiver in its `AppConfig.ready()`. Every hook is
listed in docs/architecture.md, and a test checks that each one has its receivers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

R = TypeVar("R")


class Hook(Generic[R]):
    """A named call point with receivers registered at start-up, called in the order
    they were registered (which follows INSTALLED_APPS) or in reverse."""

    def __init__(self, name: str, doc: str) -> None:
        self.name = name
        self.__doc__ = doc
        self._receivers: list[Callable[..., R]] = []

    def register(self, receiver: Callable[..., R]) -> Callable[..., R]:
        """Add a receiver; registering the same function twice is a no-op."""
        if receiver not in self._receivers:
            self._receivers.append(receiver)
        return receiver

    @property
    def receivers(self) -> tuple[Callable[..., R], ...]:
        return tuple(self._receivers)

    def call(self, *, reverse: bool = False, **kwargs: Any) -> list[R]:
        """Call every receiver with the same keyword arguments; their results in order."""
        receivers = reversed(self._receivers) if reverse else self._receivers
        return [receiver(**kwargs) for receiver in receivers]

    def first(self, **kwargs: Any) -> R | None:
        """The first receiver's answer that is not None, or None (no receiver answered)."""
        for receiver in self._receivers:
            answer = receiver(**kwargs)
            if answer is not None:
                return answer
        return None

    def __repr__(self) -> str:
        return f"<Hook {self.name}: {len(self._receivers)} receivers>"
