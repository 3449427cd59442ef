"""A request id that follows a request through its log lines and into the tasks it
enqueues, so an operator can find everything one request caused (docs/operations.md,
"Logs").

The id comes from the client's or the proxy's `X-Request-ID` when it is a plain token
(letters, digits, `.`, `_`, `-`, at most 64 characters), otherwise it is generated; the
response carries it back. A task published while a request runs carries it in a message
header, and the worker's log lines for that task show it.
"""

from __future__ import annotations

import logging
import string
import uuid
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from django.http import HttpRequest, HttpResponse
from pythonjsonlogger.json import JsonFormatter

HEADER = "X-Request-ID"
TASK_HEADER = "memoryhub_request_id"
MAX_LENGTH = 64
_ALLOWED = frozenset(string.ascii_letters + string.digits + "._-")

current_request_id: ContextVar[str | None] = ContextVar("memoryhub_request_id", default=None)


def accepted_request_id(candidate: str | None) -> str | None:
    """`candidate` when it is safe to log and echo as it is, else None."""
    if not candidate or len(candidate) > MAX_LENGTH or not _ALLOWED.issuperset(candidate):
        return None
    return candidate


def new_request_id() -> str:
    return uuid.uuid4().hex


class RequestIdMiddleware:
    """First in MIDDLEWARE, so every later log line of the request carries the id."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request_id = accepted_request_id(request.headers.get(HEADER)) or new_request_id()
        token = current_request_id.set(request_id)
        try:
            response = self.get_response(request)
        finally:
            current_request_id.reset(token)
        response[HEADER] = request_id
        return response


class RequestIdLogFilter(logging.Filter):
    """Gives every record a `request_id` ("-" outside a request or task)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = current_request_id.get() or "-"
        return True


class ScrubbedJsonFormatter(JsonFormatter):
    """python-json-logger's formatter, limited to what the scrubbing filter has cleaned:
    the fields named in `fmt`, the message and the traceback. A record's `extra` values
    are left out (Celery passes a task's arguments and return value that way, and nothing
    scrubs them), and the traceback printed is the scrubbed `exc_text`: the library would
    format `exc_info` afresh, printing the raw one."""

    def add_fields(
        self, log_data: dict[str, Any], record: logging.LogRecord, message_dict: dict[str, Any]
    ) -> None:
        super().add_fields(log_data, record, message_dict)
        named = {self._get_rename(field) for field in self._required_fields}
        named |= {"exc_info", "stack_info", self._get_rename(str(self.timestamp))}
        for field in set(log_data) - named:
            del log_data[field]

    def format(self, record: logging.LogRecord) -> str:
        if record.exc_info and record.exc_text:
            record = logging.makeLogRecord(record.__dict__)
            record.exc_info = None
        return super().format(record)


# Celery signal receivers, connected by memoryhub.celery (core imports no app).


def add_request_id_to_task(headers: dict[str, Any] | None = None, **_: object) -> None:
    """before_task_publish: the publishing request's id travels with the message."""
    request_id = current_request_id.get()
    if headers is not None and request_id is not None:
        headers[TASK_HEADER] = request_id


def adopt_task_request_id(task: Any = None, **_: object) -> None:
    """task_prerun: the task's log lines carry the id of the request that enqueued it. A
    task run in-process (no broker) has no header and keeps the running request's id."""
    request = getattr(task, "request", None)
    request_id = accepted_request_id(getattr(request, TASK_HEADER, None))
    if request is not None and request_id is not None:
        request.memoryhub_request_id_token = current_request_id.set(request_id)


def forget_task_request_id(task: Any = None, **_: object) -> None:
    """task_postrun: the next task on this worker process starts without the id."""
    token = getattr(getattr(task, "request", None), "memoryhub_request_id_token", None)
    if token is not None:
        current_request_id.reset(token)
