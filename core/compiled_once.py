"""A query that a hot path sends on every request, compiled to SQL once per process.

Django compiles a queryset to SQL each time it runs: about a millisecond for an
entry's read, more than the database takes to answer it. Where only the values change
between calls, the SQL is compiled once with marker values and each call swaps its own
values in at the markers' places (docs/operations.md, "The read path's round trips")."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from django.db.models import Model, QuerySet

from core.prepared_statements import model_instances

# Values no caller ever passes, so each is found only where its argument went.
INT_MARKER = -8_070_450_532_247_928_831
STR_MARKER = "\x1ecompiled-once\x1e"


class CompiledOnce:
    """`build(**arguments)` returns the queryset; its arguments are ints or strs, and each
    must reach the SQL's parameters unchanged (a lookup that transforms its value, such
    as `__icontains`, is refused when the query is first compiled)."""

    def __init__(self, build: Callable[..., QuerySet[Any]], **argument_types: type) -> None:
        self._build = build
        self._argument_types = argument_types
        self._compiled: tuple[type[Model], str, list[Any], dict[str, list[int]]] | None = None
        self._lock = threading.Lock()

    def sql_with_params(self, **arguments: Any) -> tuple[str, list[Any]]:
        _model, sql, params, places = self._compile()
        params = list(params)
        for name, positions in places.items():
            for position in positions:
                params[position] = arguments[name]
        return sql, params

    def rows(self, **arguments: Any) -> list[Any]:
        """The query's rows as model instances, the statement prepared once it is hot
        (core.prepared_statements)."""
        model = self._compile()[0]
        sql, params = self.sql_with_params(**arguments)
        return model_instances(model, sql, params)

    def first(self, **arguments: Any) -> Any:
        """The query's first row as a model instance, or None."""
        return next(iter(self.rows(**arguments)), None)

    def _compile(self) -> tuple[type[Model], str, list[Any], dict[str, list[int]]]:
        compiled = self._compiled
        if compiled is None:
            with self._lock:
                compiled = self._compiled = self._compiled or self._compile_with_markers()
        return compiled

    def _compile_with_markers(self) -> tuple[type[Model], str, list[Any], dict[str, list[int]]]:
        markers = {
            name: _marker(index, kind) for index, (name, kind) in enumerate(self._argument_types.items())
        }
        queryset = self._build(**markers)
        sql, params = queryset.query.sql_with_params()
        places = {name: _positions(params, marker) for name, marker in markers.items()}
        for name, positions in places.items():
            if not positions:
                raise ValueError(f"the argument {name!r} does not reach the query's parameters unchanged")
        return queryset.model, sql, list(params), places


def _marker(index: int, kind: type) -> Any:
    if kind is int:
        return INT_MARKER - index
    if kind is str:
        return f"{STR_MARKER}{index}"
    raise TypeError(f"compiled queries take int and str arguments, not {kind.__name__}")


def _positions(params: Sequence[Any], marker: Any) -> list[int]:
    # `type(...) is` as well: True == 1, and a marker must not match a flag.
    return [i for i, value in enumerate(params) if type(value) is type(marker) and value == marker]
