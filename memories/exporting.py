"""A team's whole memory as export records (docs/write-path.md, "Export and import").

The records, in order: one header (format and version), every memory version (by key,
then oldest first: each key's history reads top to bottom, with every field a version
has: its supersede chain, deletions and archives with their times, votes, reads,
anchor, confirmation time, skills and learnings, which are memories carrying
`skill_trigger` or `metadata.learning`), every note, every confirmation, every version of every fact
(memories.facts.transfer), every conversation with its lines
(memories.conversations.transfer), and a trailer
with the counts, so a reader can tell a complete file from one cut short. An import
(memories.writes.importing) into an empty team reproduces the team from it. The vault is
left out, unless the export is given a passphrase seal (an admin's `with_vault`): then
every vault entry follows the confirmations, its value sealed under the passphrase
(teams.vault_crypto.PassphraseSeal) and the header says how to open it.

Rows are read through server-side cursors (`iterator(chunk_size=…)`), so exporting
100k memories holds one chunk at a time, never the team. Call `export_records` inside
the team's scope (teams.streaming does).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from django.utils import timezone

from memories.conversations.transfer import conversation_records
from memories.facts.transfer import fact_records
from memories.models import Annotation, Confirmation, Memory, MemoryState
from teams.models import Team, VaultEntry
from teams.selectors import reveal_vault_value
from teams.vault_crypto import PassphraseSeal

EXPORT_FORMAT = "memoryhub-export"
# Version 2 added anchors, confirmations, `last_confirmed_at` and reads; version 3, facts;
# version 4, conversations. An older file still imports (what it lacks takes its default).
EXPORT_VERSION = 4
READABLE_VERSIONS = frozenset({1, 2, 3, 4})
ROWS_PER_FETCH = 1000

MEMORY_FIELDS = (
    "id",
    "key",
    "content",
    "type",
    "project",
    "metadata",
    "skill_trigger",
    "is_active",
    "deleted_at",
    "deleted_by",
    "archived_at",
    "archived_by",
    "supersedes_id",
    "supersede_reason",
    "supersede_kind",
    "restored_from_id",
    "updated_by",
    "created_at",
    "updated_at",
    "upvotes",
    "downvotes",
    "access_count",
    "last_accessed_at",
    "anchor",
    "pinned",
    "last_confirmed_at",
    "confirmed_by_count",
    "original_type",
    "auto_captured",
)


def export_records(*, team: Team, vault_seal: PassphraseSeal | None = None) -> Iterator[dict[str, Any]]:
    header: dict[str, Any] = {
        "record": "header",
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "team": team.slug,
        "exported_at": timezone.now(),
    }
    if vault_seal is not None:
        header["vault"] = vault_seal.header()
    yield header
    memories = 0
    rows = Memory.objects.filter(team=team).order_by("key", "created_at", "id").values_list(*MEMORY_FIELDS)
    for row in rows.iterator(chunk_size=ROWS_PER_FETCH):
        memories += 1
        yield memory_record(dict(zip(MEMORY_FIELDS, row, strict=True)))
    annotations = 0
    notes = Annotation.objects.filter(team=team).order_by("created_at", "id")
    for note_id, memory_id, note, created_by, created_at in notes.values_list(
        "id", "memory_id", "note", "created_by", "created_at"
    ).iterator(chunk_size=ROWS_PER_FETCH):
        annotations += 1
        yield {
            "record": "annotation",
            "id": str(note_id),
            "memory": str(memory_id),
            "note": note,
            "created_by": created_by,
            "created_at": _time(created_at),
        }
    confirmations = 0
    confirmed = Confirmation.objects.filter(team=team).order_by("confirmed_at", "id")
    for confirmation_id, memory_id, confirmed_by, note, confirmed_at in confirmed.values_list(
        "id", "memory_id", "confirmed_by", "note", "confirmed_at"
    ).iterator(chunk_size=ROWS_PER_FETCH):
        confirmations += 1
        yield {
            "record": "confirmation",
            "id": str(confirmation_id),
            "memory": str(memory_id),
            "confirmed_by": confirmed_by,
            "note": note,
            "confirmed_at": _time(confirmed_at),
        }
    facts = 0
    for record in fact_records(team=team):
        facts += 1
        yield record
    conversations = 0
    for record in conversation_records(team=team):
        conversations += 1
        yield record
    trailer: dict[str, Any] = {
        "record": "end",
        "memories": memories,
        "annotations": annotations,
        "confirmations": confirmations,
        "facts": facts,
        "conversations": conversations,
    }
    if vault_seal is not None:
        trailer["vault"] = 0
        entries = VaultEntry.objects.filter(team=team).order_by("key")
        # Values, plain ones included, are sealed: a plain value may still be private.
        for entry in entries.iterator(chunk_size=ROWS_PER_FETCH):
            trailer["vault"] += 1
            yield {
                "record": "vault",
                "key": entry.key,
                "is_secret": entry.is_secret,
                "sealed": vault_seal.seal(reveal_vault_value(entry)),
                "updated_by": entry.updated_by,
                "updated_at": entry.updated_at,
            }
    yield trailer


def memory_record(row: dict[str, Any]) -> dict[str, Any]:
    deleted_at: datetime | None = row["deleted_at"]
    if deleted_at is not None:
        state = MemoryState.DELETED
    elif row["archived_at"] is not None:
        state = MemoryState.ARCHIVED
    else:
        state = MemoryState.ACTIVE if row["is_active"] else MemoryState.SUPERSEDED
    return {
        "record": "memory",
        "id": str(row["id"]),
        "key": row["key"],
        "content": row["content"],
        "type": row["type"],
        "project": row["project"],
        "metadata": row["metadata"],
        "skill_trigger": row["skill_trigger"],
        "state": state,
        "deleted_at": _time(deleted_at),
        "deleted_by": row["deleted_by"],
        "archived_at": _time(row["archived_at"]),
        "archived_by": row["archived_by"],
        "supersedes": _optional_id(row["supersedes_id"]),
        "supersede_reason": row["supersede_reason"],
        "supersede_kind": row["supersede_kind"],
        "restored_from": _optional_id(row["restored_from_id"]),
        "updated_by": row["updated_by"],
        "created_at": _time(row["created_at"]),
        "updated_at": _time(row["updated_at"]),
        "upvotes": row["upvotes"],
        "downvotes": row["downvotes"],
        "access_count": row["access_count"],
        "last_accessed_at": _time(row["last_accessed_at"]),
        "anchor": row["anchor"],
        "pinned": row["pinned"],
        "original_type": row["original_type"],
        "auto_captured": row["auto_captured"],
        "last_confirmed_at": _time(row["last_confirmed_at"]),
        "confirmed_by_count": row["confirmed_by_count"],
    }


def _time(value: datetime | None) -> str | None:
    """ISO 8601 to the microsecond (the JSON encoder would cut it to milliseconds): an
    import keeps the time, and history orders by it."""
    return None if value is None else value.isoformat()


def _optional_id(value: object) -> str | None:
    return None if value is None else str(value)
