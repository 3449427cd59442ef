"""Every write of memory versions, one pipeline (docs/write-path.md, "The pipeline").

The use cases, by name (the front doors, the other apps and the commands call these):

    save_memory          one version (saving.py)
    save_batch           up to MAX_BATCH_ENTRIES saves in one transaction (batch.py)
    settle_near_check    the batch's near-duplicate check, once the worker indexed the entry
    import_export        an export file applied to a team (importing.py)
    delete_memory, unsupersede_memory, archive_memory, restore_archived, confirm_memory,
    set_freshness_flag, delete_team_memories
                         a key's lifecycle beside the save (lifecycle.py)

The stages are private (`_pipeline.py`: prepare, store, new_row, already_holds; the
import's `_export_file.py`, reading a file, and `_new_keys.py`, writing keys new to the
team in bulk): the drivers run the same stages and differ only in how they batch. An
import-linter contract keeps every module outside this package off the private ones.
"""

from memories.writes._pipeline import (
    MAX_REASON_LENGTH,
    PROVENANCE_KEY,
    SOFT_SUPERSEDE_REASON,
    UNSET,
    SaveResult,
    Unset,
)
from memories.writes.batch import (
    MAX_BATCH_ENTRIES,
    STATUSES,
    BatchEntry,
    BatchOutcome,
    BatchStatus,
    save_batch,
    settle_near_check,
)
from memories.writes.importing import IMPORTED_REASON, ImportRefused, ImportReport, import_export
from memories.writes.lifecycle import (
    FRESHNESS_FLAGS,
    ConfirmResult,
    archive_memory,
    confirm_memory,
    delete_memory,
    delete_team_memories,
    restore_archived,
    set_freshness_flag,
    unsupersede_memory,
)
from memories.writes.saving import save_memory

__all__ = [
    "FRESHNESS_FLAGS",
    "IMPORTED_REASON",
    "MAX_BATCH_ENTRIES",
    "MAX_REASON_LENGTH",
    "PROVENANCE_KEY",
    "SOFT_SUPERSEDE_REASON",
    "STATUSES",
    "UNSET",
    "BatchEntry",
    "BatchOutcome",
    "BatchStatus",
    "ConfirmResult",
    "ImportRefused",
    "ImportReport",
    "SaveResult",
    "Unset",
    "archive_memory",
    "confirm_memory",
    "delete_memory",
    "delete_team_memories",
    "import_export",
    "restore_archived",
    "save_batch",
    "save_memory",
    "set_freshness_flag",
    "settle_near_check",
    "unsupersede_memory",
]
