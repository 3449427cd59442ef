from __future__ import annotations

from typing import Any

from rest_framework.pagination import CursorPagination

from memoryhub.lib.errors import InvalidInput


class KeysetPagination(CursorPagination):
    """Cursor pagination: stable while agents keep writing, unlike page numbers."""

    page_size = 50
    page_size_query_param = "limit"
    max_page_size = 200

    def decode_cursor(self, request: Any) -> Any:
        try:
            return super().decode_cursor(request)
        except Exception as exc:  # DRF raises NotFound; a bad cursor is bad input
            raise InvalidInput("invalid cursor", field="cursor") from exc

    def get_page_size(self, request: Any) -> int:
        raw = request.query_params.get(self.page_size_query_param)
        if raw is not None and not (raw.isdigit() and 1 <= int(raw) <= self.max_page_size):
            raise InvalidInput(f"limit must be a whole number from 1 to {self.max_page_size}")
        return super().get_page_size(request)
