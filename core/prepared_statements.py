"""Statements a hot path sends on every request, planned once per connection.

Django's cursors bind values on the client: every statement reaches PostgreSQL as new
text, which it parses and plans again. For an entry's read that is 0.8 ms of planning
for 0.3 ms of execution. A cursor that binds on the server sends the same text with the
values apart, and psycopg prepares a statement the fifth time a connection sends it
(its `prepare_threshold`): from then on the connection only executes it
(docs/operations.md, "Prepared statements").

Only for statements written for server-side binding (no `IN %s` with a tuple, no `SET`
with a value, one statement per call) whose best plan does not depend on a planner
setting of the moment (a prepared plan outlives the setting it was made under).

Rows become model instances with their column layout worked out once per statement,
where Django's raw querysets work it out on every run.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, connections, router
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.postgresql.base import ServerBindingCursor
from django.db.backends.utils import CursorWrapper
from django.db.models import Model, signals
from django.db.models.base import ModelState
from django.db.models.fields.related_descriptors import ForeignKeyDeferredAttribute
from django.db.models.query_utils import DeferredAttribute
from django.db.models.sql import Query

ModelT = TypeVar("ModelT", bound=Model)


def prepared_cursor(connection: BaseDatabaseWrapper) -> CursorWrapper:
    """A cursor of `connection`, in its current transaction, whose statements are
    prepared once the connection has sent them a few times. Django's wrapper around it
    logs and counts its statements as it does every other cursor's."""
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    with connection.wrap_database_errors:
        cursor = ServerBindingCursor(connection.connection)  # type: ignore[call-arg]
        # Django's own wrapping (debug log, execute wrappers) of a cursor class it ships.
        wrapped: CursorWrapper = connection._prepare_cursor(cursor)  # type: ignore[attr-defined]
        return wrapped


def model_columns(model: type[Model], alias: str) -> str:
    """Every column of `model`'s fields, qualified by `alias`, for a statement read with
    model_instances (what Django's own SELECT of the model lists)."""
    return ", ".join(f'{alias}."{field.column}"' for field in model._meta.concrete_fields)


def model_instances(
    model: type[ModelT], sql: str, params: Sequence[Any], *, using: str | None = None
) -> list[ModelT]:
    """The rows of `sql` as instances of `model`, the statement prepared once it is hot.
    Every column that is one of the model's fields sets it; any other column is set on
    the instance as an attribute of its name. Read from the database the router picks
    for reading `model`."""
    alias = using or router.db_for_read(model) or DEFAULT_DB_ALIAS
    connection = connections[alias]
    with prepared_cursor(connection) as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
        if not rows:
            return []
        layout = _layout(model, sql, connection, cursor)
    if layout.plain_rows and not _has_init_listeners(model):
        return [layout.plain_instance(alias, row) for row in rows]
    return [layout.instance(alias, row) for row in rows]


def _has_init_listeners(model: type[Model]) -> bool:
    return signals.pre_init.has_listeners(model) or signals.post_init.has_listeners(model)


@dataclass(frozen=True)
class _Layout:
    model: type[Model]
    field_names: list[str]
    field_positions: list[int]
    extra_columns: list[tuple[str, int]]
    converters: list[tuple[int, list[Callable[..., Any]]]]
    expressions: list[Any]
    # Every field is in the row and the model builds an instance as Django's own
    # Model.__init__ would from it: its attributes can be set at once (plain_instance).
    plain_rows: bool

    def _converted(self, alias: str, row: Sequence[Any]) -> list[Any]:
        values = list(row)
        connection = connections[alias]
        for position, converters in self.converters:
            value = values[position]
            for converter in converters:
                value = converter(value, self.expressions[position], connection)
            values[position] = value
        return values

    def instance(self, alias: str, row: Sequence[Any]) -> Any:
        values = self._converted(alias, row)
        instance = self.model.from_db(alias, self.field_names, [values[i] for i in self.field_positions])
        for name, position in self.extra_columns:
            setattr(instance, name, values[position])
        return instance

    def plain_instance(self, alias: str, row: Sequence[Any]) -> Any:
        """What `instance` builds, without Model.__init__'s per-field work (12 µs a row
        of an entry's 35 fields against 3): the values go straight into the instance's
        attributes, as __init__ would set them on a new instance with no init signals."""
        values = self._converted(alias, row)
        instance = self.model.__new__(self.model)
        attributes = instance.__dict__
        attributes.update(zip(self.field_names, [values[i] for i in self.field_positions], strict=True))
        for name, position in self.extra_columns:
            attributes[name] = values[position]
        state = instance._state = ModelState()
        state.adding = False
        state.db = alias
        return instance


def _builds_plainly(model: type[Model], init_fields: list[Any]) -> bool:
    """Whether setting the row's values as attributes builds what Model.from_db does:
    every concrete field read, the model's own __init__ and from_db, and no field
    whose attribute does more on assignment than Django's (a cached related object to
    forget, which a new instance has not)."""
    concrete = model._meta.concrete_fields
    return (
        len(init_fields) == len(concrete)
        and model.__init__ is Model.__init__
        and model.from_db.__func__ is Model.from_db.__func__  # type: ignore[attr-defined]
        and all(type(model.__dict__.get(field.attname)) in _PLAIN_ATTRIBUTES for field in concrete)
    )


_PLAIN_ATTRIBUTES = (DeferredAttribute, ForeignKeyDeferredAttribute)

MAX_LAYOUTS = 256
_LAYOUTS: dict[tuple[type[Model], str, str], _Layout] = {}
_layouts_lock = threading.Lock()


def _layout(model: type[Model], sql: str, connection: BaseDatabaseWrapper, cursor: CursorWrapper) -> _Layout:
    """Which column sets which field, and the converters of each, as Django's raw
    querysets work them out (RawModelIterable), once per (model, statement, database)."""
    key = (model, sql, connection.alias)
    layout = _LAYOUTS.get(key)
    if layout is not None:
        return layout
    columns = [column.name for column in cursor.description]
    fields_by_column = {field.column: field for field in model._meta.concrete_fields}
    if model._meta.pk.column not in columns:
        raise ValueError(f"a statement read as {model.__name__} must return its primary key")
    init_fields = [field for field in model._meta.fields if field.column in columns]
    expressions = [
        fields_by_column[name].get_col(model._meta.db_table) if name in fields_by_column else None
        for name in columns
    ]
    compiler = connection.ops.compiler("SQLCompiler")(Query(model), connection, connection.alias)
    converted = compiler.get_converters(expressions)  # type: ignore[arg-type]  # None: no field
    layout = _Layout(
        model=model,
        field_names=[field.attname for field in init_fields],
        field_positions=[columns.index(field.column) for field in init_fields],
        extra_columns=[(name, i) for i, name in enumerate(columns) if name not in fields_by_column],
        converters=[(i, converters) for i, (converters, _) in converted.items()],
        expressions=expressions,
        plain_rows=_builds_plainly(model, init_fields),
    )
    with _layouts_lock:
        if len(_LAYOUTS) >= MAX_LAYOUTS:  # callers pass constant statements; a bound all the same
            return layout
        return _LAYOUTS.setdefault(key, layout)
