"""Domain errors. Each carries the short code and HTTP status the API answers with,
so services stay free of HTTP while the one exception handler stays generic."""

from __future__ import annotations

from typing import Any


class DomainError(Exception):
    code = "invalid"
    status = 400

    def __init__(self, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.detail = detail
        self.extra = extra


class InvalidInput(DomainError):
    code = "invalid"
    status = 400


class NotFound(DomainError):
    code = "not_found"
    status = 404


class Conflict(DomainError):
    code = "conflict"
    status = 409
