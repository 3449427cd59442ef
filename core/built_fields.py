"""ModelSerializer works its fields out from the model on every instance it makes:
about a millisecond for an entry's thirty-odd fields, on every read of an entry and for
every serializer of a search's answer; a plain Serializer deep-copies its declared fields
(each field's __init__ again). The fields depend only on the class, so they are worked
out once per class and copied for each instance.

The copy is shallow for a plain field: binding a field to its serializer sets its name,
parent and source on the copy, and nothing else of a plain field changes after it is
made (DRF's own deep copy runs every field's __init__ again: most of a read's
serialization). A nested serializer is deep-copied as DRF does: its child is bound to
it, and the context reaches the child through that binding.

Where a door renders one object (an entry, a fact, a search's or an injection's answer),
`representation` skips even the copy: each thread keeps the serializers it made, bound,
and renders with them, each call with its own context (docs/operations.md, "The read
path's round trips")."""

from __future__ import annotations

import copy
import threading
from typing import Any

from rest_framework import serializers

_BUILT: dict[type, dict[str, serializers.Field]] = {}  # type: ignore[type-arg]


class FieldsBuiltOnce:
    """Mixed in before `serializers.ModelSerializer` or `serializers.Serializer`. Only for
    serializers whose `get_fields` depends on nothing but the class (not on the context
    or the instance)."""

    def get_fields(self) -> dict[str, Any]:
        cls = type(self)
        built = _BUILT.get(cls)
        if built is None:
            # Two threads may both build it the first time; either result is the same.
            built = _BUILT[cls] = super().get_fields()  # type: ignore[misc]
        # Unbound originals: binding a copy to this instance leaves them untouched.
        return {
            name: copy.deepcopy(field) if isinstance(field, serializers.BaseSerializer) else copy.copy(field)
            for name, field in built.items()
        }


class _IdleSerializers(threading.local):
    """Per thread, per class, the serializers not in use right now: bound once, then reused."""

    def __init__(self) -> None:
        self.by_class: dict[type, list[serializers.Serializer]] = {}  # type: ignore[type-arg]


_idle = _IdleSerializers()


def representation(
    serializer_class: type[serializers.Serializer],  # type: ignore[type-arg]
    instance: Any,
    context: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """`serializer_class(instance, context=context).data` as a plain dict, from a
    serializer this thread made before: its fields are copied and bound once per thread,
    not per object (for an entry's detail 0.51 -> 0.19 ms). `to_representation` only
    reads the bound fields; the context is this call's. A call made while the thread's
    serializer of the class is still rendering (a field that renders another object of
    its own class) gets a serializer of its own."""
    idle = _idle.by_class.setdefault(serializer_class, [])
    serializer = idle.pop() if idle else serializer_class()
    serializer._context = {} if context is None else context
    try:
        return dict(serializer.to_representation(instance))
    finally:
        serializer._context = {}
        idle.append(serializer)
