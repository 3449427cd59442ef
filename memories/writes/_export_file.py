"""An export file (memories.exporting) read and checked line by line, with no database:
the import's first stage (memories.writes.importing applies what this returns).

Every line is checked on its own (valid UTF-8, strict JSON, no NUL or lone surrogate,
depth, field types, key format, known type, times), so a bad line is reported with its
number and the others still apply. A missing or unknown header refuses the file.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from core.errors import InvalidInput
from memories.exporting import EXPORT_FORMAT, EXPORT_VERSION, READABLE_VERSIONS
from memories.models import MemoryState, SupersedeKind
from memories.types import (
    ACCEPTED_TYPE_NAMES,
    DEFAULT_TYPE,
    OPEN_BRAIN_TYPES,
    alias_name,
    resolve_type,
    suggest_type,
    unknown_type_message,
)
from memories.writes._pipeline import UNSET, Unset
from teams.validators import check_key

# As the API's JSON parser (core.api_errors): metadata needs a handful of levels at most.
MAX_JSON_DEPTH = 32
# The columns' own limits (project, updated_by, deleted_by, created_by): checked per line,
# since the pipeline leaves them to the API's serializers.
MAX_NAME_CHARS = 200
# Django computes an enum's `values` on every access; checked once per line here.
_STATES = frozenset(MemoryState.values)
_SUPERSEDE_KINDS = frozenset(SupersedeKind.values)


@dataclass
class LineError:
    line: int
    error: str
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return {"line": self.line, "error": self.error, "detail": self.detail}


@dataclass
class NoteLine:
    note: str
    created_by: str
    created_at: dt.datetime | None


@dataclass
class ConfirmationLine:
    confirmed_by: str
    note: str
    confirmed_at: dt.datetime | None


@dataclass
class MemoryLine:
    """One version as the file gives it. `state` is None when the file leaves it out
    (a hand-written record): the key's last version is then the active one. `anchor` and
    `supersedes` are UNSET when the file leaves them out (a version 1 file, a hand-written
    one): the anchor carries over, the replay links each version to the one before."""

    line: int
    id: str
    key: str
    content: str
    type: str
    project: str
    metadata: dict[str, Any]
    skill_trigger: dict[str, Any] | None
    anchor: dict[str, Any] | Unset | None
    pinned: bool  # false when the file leaves it out (a file of before pins, a hand-written one)
    original_type: str  # the alias `type` was given as; "" when the file leaves it out
    auto_captured: bool
    state: str | None
    deleted_by: str
    archived_by: str
    supersedes: str | Unset | None
    supersede_reason: str
    supersede_kind: str
    restored_from: str | None
    updated_by: str
    created_at: str  # as the file says it, for the provenance
    created: dt.datetime | None
    deleted_at: dt.datetime | None
    archived_at: dt.datetime | None
    last_confirmed_at: dt.datetime | None
    last_accessed_at: dt.datetime | None
    access_count: int
    upvotes: int
    downvotes: int
    notes: list[NoteLine] = field(default_factory=list)
    confirmations: list[ConfirmationLine] = field(default_factory=list)


@dataclass
class VaultLine:
    line: int
    key: str
    is_secret: bool
    sealed: str


@dataclass
class ParsedFile:
    header: dict[str, Any] = field(default_factory=dict)
    keys: dict[str, list[MemoryLine]] = field(default_factory=dict)
    vault: list[VaultLine] = field(default_factory=list)
    # Fact records, checked when they are applied (memories.facts.transfer).
    facts: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    # Conversation records, checked when they are applied (memories.conversations.transfer).
    conversations: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    errors: list[LineError] = field(default_factory=list)

    def key_groups(self) -> list[list[str]]:
        """The file's keys in the order their history starts, those whose versions name
        each other's (a longer duplicate saved under another key, an unsupersede that
        gave another key its entry back) together: they are written together."""
        key_of = {version.id: key for key, versions in self.keys.items() for version in versions}
        parent = {key: key for key in self.keys}

        def root(key: str) -> str:
            while parent[key] != key:
                parent[key] = parent[parent[key]]
                key = parent[key]
            return key

        for key, versions in self.keys.items():
            for version in versions:
                for link in (version.supersedes, version.restored_from):
                    other = key_of.get(link) if isinstance(link, str) else None
                    if other is not None and root(other) != root(key):
                        parent[root(other)] = root(key)
        groups: dict[str, list[str]] = {}
        for key in sorted(self.keys, key=lambda k: self.keys[k][0].line):
            groups.setdefault(root(key), []).append(key)
        return list(groups.values())


class BadLine(Exception):
    def __init__(self, error: str, detail: str) -> None:
        super().__init__(detail)
        self.error, self.detail = error, detail


def parse_export(raw: bytes) -> ParsedFile:
    """Every line of the file checked on its own; the header must be the first line.
    A missing or unknown header refuses the file (InvalidInput): it is not an export."""
    lines = raw.split(b"\n")
    parsed = ParsedFile(header=_check_header(lines[0] if lines else b""))
    by_id: dict[str, MemoryLine] = {}
    attached: list[tuple[int, dict[str, Any]]] = []
    now = timezone.now()
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        try:
            record = json_object(line)
            kind = record.get("record")
            if kind == "memory":
                memory = _memory_line(number, record, now)
                if memory.id in by_id:
                    raise BadLine("invalid", f"memory id {memory.id} appears twice")
                by_id[memory.id] = memory
                parsed.keys.setdefault(memory.key, []).append(memory)
            elif kind in ("annotation", "confirmation"):
                attached.append((number, record))
            elif kind == "vault":
                parsed.vault.append(_vault_line(number, record))
            elif kind == "fact":
                parsed.facts.append((number, record))
            elif kind == "conversation":
                parsed.conversations.append((number, record))
            elif kind not in ("end", "header"):
                raise BadLine("invalid", f"unknown record {str(kind)[:40]!r}")
        except BadLine as bad:
            parsed.errors.append(LineError(number, bad.error, bad.detail))
    for number, record in attached:
        what = "note" if record["record"] == "annotation" else "confirmation"
        try:
            memory_id = record.get("memory")
            if not isinstance(memory_id, str):
                raise BadLine("invalid", f"a {what} names its 'memory' by id, a string")
            if memory_id not in by_id:
                raise BadLine("invalid", f"the {what}'s memory {memory_id[:40]} is not in the file")
            if what == "note":
                by_id[memory_id].notes.append(_note_line(record, now))
            else:
                by_id[memory_id].confirmations.append(_confirmation_line(record, now))
        except BadLine as bad:
            parsed.errors.append(LineError(number, bad.error, bad.detail))
    return parsed


def _check_header(line: bytes) -> dict[str, Any]:
    try:
        header = json_object(line)
    except BadLine as bad:
        raise InvalidInput(f"line 1 is not an export header: {bad.detail}", field="body") from None
    if header.get("record") != "header" or header.get("format") != EXPORT_FORMAT:
        raise InvalidInput(f"line 1 must be the header of a {EXPORT_FORMAT} file", field="body")
    if header.get("version") not in READABLE_VERSIONS or isinstance(header.get("version"), bool):
        raise InvalidInput(
            f"export format version {str(header.get('version'))[:20]} is not supported; "
            f"this server reads versions 1 to {EXPORT_VERSION}",
            field="body",
        )
    return header


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("number out of range")
    return value


def json_object(line: bytes) -> dict[str, Any]:
    try:
        value = json.loads(line.decode("utf-8"), parse_constant=_reject_constant, parse_float=_finite)
    except UnicodeDecodeError:
        raise BadLine("malformed_json", "the line is not valid UTF-8") from None
    except RecursionError:
        raise BadLine("too_deeply_nested", f"JSON is limited to {MAX_JSON_DEPTH} levels") from None
    except ValueError as exc:
        raise BadLine("malformed_json", f"malformed JSON: {str(exc)[:200]}") from None
    if not isinstance(value, dict):
        raise BadLine("invalid", "each line is one JSON object")
    check_strings(value, 0)
    return value


def check_strings(node: Any, depth: int) -> None:
    """PostgreSQL holds neither NUL bytes nor lone surrogates (core.api_errors)."""
    if isinstance(node, str):
        if "\x00" in node:
            raise BadLine("invalid_characters", "NUL bytes are not allowed")
        try:
            node.encode("utf-8")
        except UnicodeEncodeError:
            raise BadLine("invalid_characters", "characters that are not valid UTF-8") from None
        return
    if depth >= MAX_JSON_DEPTH:
        raise BadLine("too_deeply_nested", f"JSON is limited to {MAX_JSON_DEPTH} levels")
    if isinstance(node, dict):
        for name, value in node.items():
            check_strings(name, depth)
            check_strings(value, depth + 1)
    elif isinstance(node, list):
        for value in node:
            check_strings(value, depth + 1)


def _text(record: dict[str, Any], name: str, *, required: bool = False, limit: int | None = None) -> str:
    value = record.get(name, "")
    if value is None and not required:
        value = ""
    if not isinstance(value, str):
        raise BadLine("invalid", f"'{name}' must be a string")
    if limit is not None and len(value) > limit:
        raise BadLine("invalid", f"'{name}' is limited to {limit} characters")
    if required and not value.strip():
        raise BadLine("invalid", f"'{name}' must not be empty")
    return value


def _time(record: dict[str, Any], name: str, now: dt.datetime) -> dt.datetime | None:
    """An ISO 8601 time, or None when absent; one without a zone is UTC. A time later than
    the import is refused: it would put a version ahead of every later write."""
    text = _text(record, name, limit=MAX_NAME_CHARS)
    if not text:
        return None
    try:
        value = parse_datetime(text)
    except ValueError:
        value = None
    if value is None:
        raise BadLine("invalid", f"'{name}' must be an ISO 8601 date and time")
    if timezone.is_naive(value):
        value = timezone.make_aware(value, dt.UTC)
    if value > now:
        raise BadLine("invalid", f"'{name}' is later than now")
    return value


def _count(record: dict[str, Any], name: str) -> int:
    value = record.get(name, 0)
    if value is None:
        return 0
    if not isinstance(value, int) or isinstance(value, bool) or value < 0 or value >= 2**31:
        raise BadLine("invalid", f"'{name}' must be a count (a whole number, 0 or more)")
    return value


def _optional_id(record: dict[str, Any], name: str) -> str | None:
    value = record.get(name)
    if value is not None and not isinstance(value, str):
        raise BadLine("invalid", f"'{name}' must be a string or null")
    return value


def _original_type(record: dict[str, Any], type_name: str) -> str:
    """The alias the entry's type was given as: one that names the line's type."""
    original = _text(record, "original_type", limit=32)
    if original and (alias_name(original) != original or resolve_type(original) != resolve_type(type_name)):
        raise BadLine("invalid", f"'original_type' {original[:32]!r} is not an alias of type {type_name!r}")
    return original


def _flag(record: dict[str, Any], name: str) -> bool:
    value = record.get(name, False)
    if not isinstance(value, bool):
        raise BadLine("invalid", f"'{name}' must be true or false")
    return value


def _object(record: dict[str, Any], name: str) -> dict[str, Any] | None:
    value = record.get(name)
    if value is not None and not isinstance(value, dict):
        raise BadLine("invalid", f"'{name}' must be an object or null")
    return value


def _memory_line(number: int, record: dict[str, Any], now: dt.datetime) -> MemoryLine:
    key = _text(record, "key", required=True)
    try:
        check_key(key)
    except InvalidInput as exc:
        raise BadLine("invalid", f"key: {exc.detail}") from None
    content = _text(record, "content", required=True)
    # A hand-written record (memoryhub import-markdown) may leave the type to us.
    if "type" in record:
        type_name = _text(record, "type")
    else:
        type_name = inferred_type(_text(record, "heading"), content)
    if resolve_type(type_name) is None:
        raise BadLine("unknown_type", unknown_type_message(type_name))
    metadata = record.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise BadLine("invalid", "'metadata' must be an object")
    state = _text(record, "state") or None
    if state is not None and state not in _STATES:
        raise BadLine("invalid", f"'state' is one of: {', '.join(MemoryState.values)}")
    kind = _text(record, "supersede_kind")
    if kind and kind not in _SUPERSEDE_KINDS:
        raise BadLine("invalid", f"'supersede_kind' is one of: {', '.join(SupersedeKind.values)}")
    created = _time(record, "created_at", now)
    memory_id = record.get("id")
    if not isinstance(memory_id, str) or not memory_id:
        # A hand-written file may leave ids out; notes then cannot point at the entry.
        memory_id = f"line-{number}"
    return MemoryLine(
        line=number,
        id=memory_id,
        key=key,
        content=content,
        type=type_name,
        project=_text(record, "project", limit=MAX_NAME_CHARS),
        metadata=metadata,
        skill_trigger=_object(record, "skill_trigger"),
        anchor=_object(record, "anchor") if "anchor" in record else UNSET,
        pinned=_flag(record, "pinned"),
        original_type=_original_type(record, type_name),
        auto_captured=_flag(record, "auto_captured"),
        state=state,
        deleted_by=_text(record, "deleted_by", limit=MAX_NAME_CHARS),
        archived_by=_text(record, "archived_by", limit=MAX_NAME_CHARS),
        supersedes=_optional_id(record, "supersedes") if "supersedes" in record else UNSET,
        supersede_reason=_text(record, "supersede_reason"),
        supersede_kind=kind,
        restored_from=_optional_id(record, "restored_from"),
        updated_by=_text(record, "updated_by", limit=MAX_NAME_CHARS),
        created_at=_text(record, "created_at") if created is not None else "",
        created=created,
        deleted_at=_time(record, "deleted_at", now),
        archived_at=_time(record, "archived_at", now),
        last_confirmed_at=_time(record, "last_confirmed_at", now),
        last_accessed_at=_time(record, "last_accessed_at", now),
        access_count=_count(record, "access_count"),
        upvotes=_count(record, "upvotes"),
        downvotes=_count(record, "downvotes"),
    )


def inferred_type(heading: str, content: str) -> str:
    """The type of a section without one: a word of its heading that names a type or an
    alias ("## Decisions", "## Lessons learned"), else the save's own type hint on its
    text (memories.types.suggest_type), else the default. Open Brain's type names are
    not read in headings: "Project notes" or "Tasks" says where a file keeps its text,
    not what the text is."""
    for word in re.findall(r"[a-z]+", heading.lower()):
        for name in (word, word.removesuffix("s")):
            if name in ACCEPTED_TYPE_NAMES and name not in OPEN_BRAIN_TYPES:
                return str(resolve_type(name))
    hint = suggest_type(content, DEFAULT_TYPE)
    return (hint.suggested_type if hint is not None else DEFAULT_TYPE).value


def _vault_line(number: int, record: dict[str, Any]) -> VaultLine:
    key, is_secret, sealed = record.get("key"), record.get("is_secret"), record.get("sealed")
    if not isinstance(key, str) or not isinstance(is_secret, bool) or not isinstance(sealed, str):
        raise BadLine("invalid", "a vault entry has a 'key', an 'is_secret' flag and a 'sealed' value")
    try:
        check_key(key)
    except InvalidInput as exc:
        raise BadLine("invalid", f"key: {exc.detail}") from None
    return VaultLine(line=number, key=key, is_secret=is_secret, sealed=sealed)


def _note_line(record: dict[str, Any], now: dt.datetime) -> NoteLine:
    note, created_by = record.get("note"), record.get("created_by", "")
    if not isinstance(note, str) or not isinstance(created_by, str):
        raise BadLine("invalid", "a note has 'memory', 'note' and 'created_by' strings")
    if len(created_by) > MAX_NAME_CHARS:
        raise BadLine("invalid", f"'created_by' is limited to {MAX_NAME_CHARS} characters")
    return NoteLine(note=note, created_by=created_by, created_at=_time(record, "created_at", now))


def _confirmation_line(record: dict[str, Any], now: dt.datetime) -> ConfirmationLine:
    return ConfirmationLine(
        confirmed_by=_text(record, "confirmed_by", limit=MAX_NAME_CHARS),
        note=_text(record, "note"),
        confirmed_at=_time(record, "confirmed_at", now),
    )
