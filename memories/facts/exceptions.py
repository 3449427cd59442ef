from __future__ import annotations

from core.errors import Conflict, NotFound


class FactNotFound(NotFound):
    pass


class FactConflict(Conflict):
    """The fact has an active value that differs and no reason was given: the answer
    carries the current value (`current`), as a memory save's conflict does."""

    code = "conflict"
