"""ModelSerializer works its fields out from the model on every instance it makes:
about a millisecond for an entry's thirty-odd fields, on every read of an entry and for
every serializer of a search's answer; a plain Serializer deep-copies its declared fields
(each field's __init__ again). The fields depend only on the class, so they are worked
out once per class and copied for each instance.

The copy is shallow for a plain field: binding a field to its serializer sets its name,
parent and source on the copy, and nothing else of a plain field changes after it is
made (DRF's own deep copy runs every field's __init__ again: most of a read's
serialization). A nested serializer is deep-copied as DRF does: its child is bound to
it, and the context reaches the child through that binding."""

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


_SHARED: dict[type, serializers.Serializer] = {}  # type: ignore[type-arg]
_shared_lock = threading.Lock()


def representation(serializer_class: type[serializers.Serializer], instance: Any) -> dict[str, Any]:  # type: ignore[type-arg]
    """`serializer_class(instance).data` as a plain dict, from one instance of the class
    shared by every call: its fields are copied and bound once per process, not per
    object. Only for a serializer that reads no context; `to_representation` only reads
    its bound fields, so threads may share it."""
    shared = _SHARED.get(serializer_class)
    if shared is None:
        with _shared_lock:
            shared = _SHARED.get(serializer_class)
            if shared is None:
                shared = serializer_class()
                # Bound here, under the lock, before another thread reads them.
                _bound = shared.fields
                _SHARED[serializer_class] = shared
    return dict(shared.to_representation(instance))
