"""Every write to memories: save (insert or supersede) and delete.

Locking rule: a write to (team, key) first takes a transaction-scoped advisory lock
on that pair, then reads the active row. The lock serialises writers of one key
(the partial unique index would otherwise turn a race into an IntegrityError), and
READ COMMITTED gives each statement after the lock a fresh snapshot, so the reader
always sees the previous writer's committed row.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from memories.exceptions import ContentTooLarge, MemoryExists, MemoryNotFound, UnknownMemoryType
from memories.models import MAX_CONTENT_BYTES, Memory, SupersedeKind
from memories.types import (
    ACCEPTED_TYPE_NAMES,
    DEFAULT_TYPE,
    MemoryType,
    TypeHint,
    resolve_type,
    suggest_type,
)
from memoryhub.lib.errors import InvalidInput
from search.tasks import index_after_commit
from teams.models import Team
from teams.scrubber import ScrubResult, scrub
from teams.selectors import team_secret_values
from teams.validators import is_key

logger = logging.getLogger(__name__)

SOFT_SUPERSEDE_REASON = "minor correction"
MAX_METADATA_BYTES = 16 * 1024
MAX_REASON_LENGTH = 2000


@dataclass
class SaveResult:
    memory: Memory
    superseded: Memory | None = None
    hint: TypeHint | None = None
    redactions: list[dict[str, object]] = field(default_factory=list)


def save_memory(
    *,
    team: Team,
    key: str,
    content: str,
    updated_by: str,
    type_name: str | None = None,
    supersede_reason: str | None = None,
    project: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> SaveResult:
    """Insert a memory, or supersede the active one under the key when a reason is
    given. Raises MemoryExists (409) when an active entry exists and no reason is.

    On a supersede, a type, project or metadata left out (None) carries over from
    the entry being replaced: a correction of the text keeps what the entry is."""
    type_given = bool(type_name and type_name.strip())
    memory_type = resolve_type(type_name) if type_given else DEFAULT_TYPE
    if memory_type is None:
        raise UnknownMemoryType(
            f"unknown type '{type_name}'; use one of: {', '.join(ACCEPTED_TYPE_NAMES)}",
            field="type",
        )
    _check_key(key)
    if not content.strip():
        raise InvalidInput("content must not be empty", field="content")
    if len(content.encode()) > MAX_CONTENT_BYTES:
        raise ContentTooLarge(
            f"content is {len(content.encode())} bytes; the limit is {MAX_CONTENT_BYTES}",
            field="content",
        )
    reason = (supersede_reason or "").strip()
    if len(reason) > MAX_REASON_LENGTH:
        raise InvalidInput(f"supersede_reason is limited to {MAX_REASON_LENGTH} characters")
    if metadata is not None and len(json.dumps(metadata).encode()) > MAX_METADATA_BYTES:
        raise InvalidInput(f"metadata is limited to {MAX_METADATA_BYTES} bytes", field="metadata")

    with transaction.atomic():
        secrets = team_secret_values(team_id=team.id)
        scrubbed = scrub(content, secrets)

        _lock_key(team.id, key)
        current = (
            Memory.objects.select_for_update(no_key=True).filter(team=team, key=key, is_active=True).first()
        )
        if current is not None and not reason:
            raise MemoryExists(
                f"'{key}' already has an active entry; send supersede_reason to replace it",
                current=current,
            )
        kind = ""
        if current is not None:
            if not type_given:
                memory_type = MemoryType(current.type)
            if project is None:
                project = current.project
            if metadata is None:
                metadata = current.metadata
            current.is_active = False
            current.save(update_fields=["is_active", "updated_at"])
            is_soft = reason.lower() == SOFT_SUPERSEDE_REASON
            kind = SupersedeKind.SOFT if is_soft else SupersedeKind.HARD
        metadata, metadata_scrub = _scrub_json(metadata or {}, secrets)
        scrubbed.redactions.update(metadata_scrub.redactions)
        memory = Memory.objects.create(
            team=team,
            key=key,
            content=scrubbed.text,
            type=memory_type,
            project=project or "",
            metadata=metadata,
            supersedes=current,
            supersede_reason=reason if current is not None else "",
            supersede_kind=kind,
            updated_by=updated_by,
            content_hash=Memory.hash_content(scrubbed.text),
        )
        index_after_commit(team.id, memory.id)
    if scrubbed.redactions:
        logger.warning("redacted %s from memory %s of team %s", dict(scrubbed.redactions), key, team.slug)
    return SaveResult(
        memory=memory,
        superseded=current,
        hint=suggest_type(scrubbed.text, memory_type),
        redactions=scrubbed.as_list(),
    )


def delete_memory(*, team: Team, key: str, deleted_by: str) -> Memory:
    """Soft-delete the active entry: inactive, with deleted_at, kept for history."""
    _check_key(key)
    with transaction.atomic():
        _lock_key(team.id, key)
        current = (
            Memory.objects.select_for_update(no_key=True).filter(team=team, key=key, is_active=True).first()
        )
        if current is None:
            raise MemoryNotFound("no active memory under this key")
        current.is_active = False
        current.deleted_at = timezone.now()
        current.deleted_by = deleted_by
        current.save(update_fields=["is_active", "deleted_at", "deleted_by", "updated_at"])
    return current


def _check_key(key: str) -> None:
    if not is_key(key):
        raise InvalidInput(
            "a key is 1-200 characters: letters, digits and . _ : @ -, starting with a letter or digit",
            field="key",
        )


def _lock_key(team_id: int, key: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [f"memory:{team_id}:{key}"])


def _scrub_json(value: Any, secrets: list[str]) -> tuple[Any, ScrubResult]:
    """Scrub every string (keys and values) inside a JSON value."""
    total = ScrubResult(text="")

    def walk(node: Any) -> Any:
        if isinstance(node, str):
            result = scrub(node, secrets)
            total.redactions.update(result.redactions)
            return result.text
        if isinstance(node, dict):
            return {walk(k): walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return walk(value), total
