from __future__ import annotations

from core.errors import Conflict, InvalidInput, NotFound


class MemoryNotFound(NotFound):
    pass


class MemoryExists(Conflict):
    """An active entry exists under the key and no supersede reason was given."""

    code = "conflict"


class UnknownMemoryType(InvalidInput):
    code = "unknown_type"


class ContentTooLarge(InvalidInput):
    code = "content_too_large"


class NoPreviousVersion(Conflict):
    """Unsupersede of an entry that replaced nothing: there is no belief to go back to."""

    code = "no_previous_version"


class SkillNameTaken(Conflict):
    """Another active entry of the team carries a skill of that name."""

    code = "skill_exists"


class StaleVersion(Conflict):
    """The writer read a version that is no longer the active one."""

    code = "stale_version"


class KeyRepeatedInBatch(InvalidInput):
    """A batch save names a key a second time: each key is saved once per batch."""

    code = "duplicate_key_in_batch"
