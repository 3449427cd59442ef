"""Stepping out of a request's transaction while a slow third party answers.

An API request runs in one transaction bound to its team (teams.viewsets). The few
calls that wait on a network service (an embedding provider embedding a search query
or a new memory's text) must not keep that transaction open meanwhile: it would hold
whatever the request locked and written so far, and a connection idle in transaction,
for as long as the provider takes (up to its timeouts and retries).

The code that owns the request's transaction registers how to step out of it
(`owning_request_transaction`); the code that calls a provider wraps the call in
`outside_request_transaction()`. Where nobody registered (a Celery task, a command, a
test calling a service directly), the block just runs where it is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar

StepOutside = Callable[[], AbstractContextManager[None]]

_step_outside: ContextVar[StepOutside | None] = ContextVar("memoryhub_step_outside", default=None)


@contextmanager
def owning_request_transaction(step_outside: StepOutside) -> Iterator[None]:
    """For the block, `outside_request_transaction()` runs its body inside `step_outside()`,
    which commits what the request did so far and opens a new transaction afterwards."""
    token = _step_outside.set(step_outside)
    try:
        yield
    finally:
        _step_outside.reset(token)


@contextmanager
def outside_request_transaction() -> Iterator[None]:
    """Run the block with the request's transaction closed, when a request owns one."""
    step_outside = _step_outside.get()
    if step_outside is None:
        yield
        return
    token = _step_outside.set(None)  # a nested provider call is already outside
    try:
        with step_outside():
            yield
    finally:
        _step_outside.reset(token)
