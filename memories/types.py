"""The six canonical memory types, their aliases, and a non-blocking type hint."""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.db import models


class MemoryType(models.TextChoices):
    IDENTITY = "identity"
    LESSON = "lesson"
    DECISION = "decision"
    CONTEXT = "context"
    REFERENCE = "reference"
    HISTORICAL = "historical"


DEFAULT_TYPE = MemoryType.CONTEXT

ALIASES: dict[str, MemoryType] = {
    "core": MemoryType.IDENTITY,
    "self": MemoryType.IDENTITY,
    "warning": MemoryType.LESSON,
    "insight": MemoryType.LESSON,
    "learning": MemoryType.LESSON,
    "commitment": MemoryType.DECISION,
    "choice": MemoryType.DECISION,
    "active": MemoryType.CONTEXT,
    "background": MemoryType.CONTEXT,
    "pointer": MemoryType.REFERENCE,
    "link": MemoryType.REFERENCE,
    "archive": MemoryType.HISTORICAL,
    "past": MemoryType.HISTORICAL,
}
# Open Brain's capture types, so that its clients work unchanged (the name they gave is
# kept as the entry's original_type).
OPEN_BRAIN_TYPES: dict[str, MemoryType] = {
    "idea": MemoryType.CONTEXT,
    "task": MemoryType.CONTEXT,
    "note": MemoryType.CONTEXT,
    "meeting": MemoryType.HISTORICAL,
    "journal": MemoryType.HISTORICAL,
    "episodic": MemoryType.HISTORICAL,
    "person": MemoryType.REFERENCE,
    "procedural": MemoryType.LESSON,
}
ALIASES.update(OPEN_BRAIN_TYPES)

ACCEPTED_TYPE_NAMES = sorted([*MemoryType.values, *ALIASES])
# Django computes an enum's `values` on every access: held once for the hot paths.
_CANONICAL_NAMES = frozenset(MemoryType.values)


def resolve_type(name: str | None) -> MemoryType | None:
    """Canonical type for a name or alias (case-insensitive); None if unknown."""
    if name is None or name == "":
        return DEFAULT_TYPE
    lowered = name.strip().lower()
    if lowered in _CANONICAL_NAMES:
        return MemoryType(lowered)
    return ALIASES.get(lowered)


def unknown_type_message(given: object) -> str:
    """What a caller that named no type nor alias is told: the six types, then each
    type's aliases, so that the choice reads in the order it is made."""
    by_type = {
        memory_type: [name for name, target in ALIASES.items() if target == memory_type]
        for memory_type in MemoryType
    }
    aliases = "; ".join(f"{', '.join(names)} ({memory_type.value})" for memory_type, names in by_type.items())
    types = ", ".join(MemoryType.values)
    return f"unknown type '{str(given)[:40]}'; use one of {types}, or an alias: {aliases}"


def alias_name(name: str | None) -> str:
    """The alias a type name is (lowercased), or "" for a canonical or empty name."""
    lowered = (name or "").strip().lower()
    return lowered if lowered in ALIASES else ""


@dataclass(frozen=True)
class TypeHint:
    suggested_type: MemoryType
    reason: str

    def as_dict(self) -> dict[str, str]:
        return {"suggested_type": self.suggested_type.value, "reason": self.reason}


# Ordered: the first matching rule wins. Cheap regular expressions only: a hint is
# advice shown to the agent, never a reason to reject a save.
_HINT_RULES: list[tuple[MemoryType, re.Pattern[str], str]] = [
    (
        MemoryType.LESSON,
        re.compile(r"^\s*(never|always|don't|do not|avoid|lesson:|warning:|gotcha:)\b", re.I),
        "reads like a rule learned from experience",
    ),
    (
        MemoryType.DECISION,
        re.compile(r"\b(we|i|team) (decided|chose|agreed|will use|are going with)\b|^\s*decision:", re.I),
        "records a choice that was made",
    ),
    (
        MemoryType.IDENTITY,
        re.compile(r"^\s*(i am|you are|my name is|our team is|we are a)\b", re.I),
        "describes who the agent or team is",
    ),
    (
        MemoryType.REFERENCE,
        re.compile(r"^\s*(see|docs?:|reference:|link:)?\s*https?://\S+\s*$", re.I),
        "is mostly a pointer to somewhere else",
    ),
    (
        MemoryType.HISTORICAL,
        re.compile(r"^\s*(in|on|back in) (19|20)\d\d\b|^\s*(previously|formerly|used to)\b", re.I),
        "describes something in the past",
    ),
]


def suggest_type(content: str, chosen: MemoryType) -> TypeHint | None:
    for memory_type, pattern, reason in _HINT_RULES:
        if pattern.search(content):
            if memory_type == chosen:
                return None
            return TypeHint(memory_type, f"content {reason}; consider type '{memory_type.value}'")
    return None
