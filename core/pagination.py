from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any, TypeVar

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import Field, Model, QuerySet
from rest_framework.pagination import Cursor, CursorPagination
from rest_framework.request import Request

from core.errors import InvalidInput

_M = TypeVar("_M", bound=Model)
_Row = TypeVar("_Row")


class KeysetPagination(CursorPagination):
    """Cursor pagination: stable while agents keep writing, unlike page numbers."""

    page_size = 50
    page_size_query_param = "limit"
    max_page_size = 200
    _model: type[Model] | None = None

    def paginate_queryset(
        self, queryset: QuerySet[_M, _Row] | Sequence[_Row], request: Request, view: Any = None
    ) -> list[_Row] | None:
        # Only a queryset can be paged by cursor (DRF orders it); remember its model to
        # check cursors against.
        if isinstance(queryset, QuerySet):
            self._model = queryset.model
        return super().paginate_queryset(queryset, request, view)

    def decode_cursor(self, request: Request) -> Cursor | None:
        try:
            cursor = super().decode_cursor(request)
        except Exception as exc:  # DRF raises NotFound; a bad cursor is bad input
            raise InvalidInput("invalid cursor", field="cursor") from exc
        if cursor is not None and cursor.position is not None:
            # drf-stubs type the position as int; DRF decodes it from the cursor as a str.
            self._check_position(cursor.position)  # type: ignore[arg-type]
        return cursor

    def _check_position(self, position: str) -> None:
        """A cursor comes back from the client, so its position may be anything; it is
        compared with the first ordering column and must be a value of that column."""
        field = self._ordering_field()
        try:
            if "\x00" in position:
                raise DjangoValidationError("NUL")
            value = field.to_python(position)
        except DjangoValidationError:
            raise InvalidInput("invalid cursor", field="cursor") from None
        if isinstance(value, dt.datetime) and value.tzinfo is None:
            raise InvalidInput("invalid cursor", field="cursor")

    def _ordering_field(self) -> Field[Any, Any]:
        if self._model is None:
            raise RuntimeError("cursors are decoded only while paginating a queryset")
        ordering = self.ordering if isinstance(self.ordering, str) else self.ordering[0]
        field = self._model._meta.get_field(ordering.lstrip("-"))
        if not isinstance(field, Field):
            raise TypeError(f"{type(self).__name__} orders by {ordering}, which is not a column")
        return field

    def get_page_size(self, request: Request) -> int | None:
        raw = request.query_params.get(self.page_size_query_param)
        if raw is not None and not (raw.isascii() and raw.isdigit() and 1 <= int(raw) <= self.max_page_size):
            raise InvalidInput(f"limit must be a whole number from 1 to {self.max_page_size}", field="limit")
        return super().get_page_size(request)

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.cursor_query_param:
                parameter["description"] = "The `next` or `previous` link's cursor, as given."
            if parameter["name"] == self.page_size_query_param:
                parameter["description"] = f"Entries per page (default {self.page_size})."
                parameter["schema"] = {"type": "integer", "minimum": 1, "maximum": self.max_page_size}
        return parameters

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        envelope = super().get_paginated_response_schema(schema)
        envelope["required"] = ["next", "previous", "results"]
        for link in ("next", "previous"):
            envelope["properties"][link].pop("example", None)  # DRF's points at another API
            envelope["properties"][link]["description"] = f"The {link} page, or null."
        return envelope
