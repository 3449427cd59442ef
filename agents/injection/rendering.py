"""The last step of an injection: render the block, and count the tokens of what is
rendered (offline, search.tokens), which the fitting step spends against the budget."""

from __future__ import annotations

import threading
from collections import OrderedDict
from functools import lru_cache

from agents.injection.entries import PINNED_SECTION, SKILL_SECTION, InjectionEntry
from memories.models import Memory
from memories.types import MemoryType
from search.tokens import count_tokens

# Rendering order of the sections, with their headings.
SECTION_HEADINGS: dict[str, str] = {
    MemoryType.IDENTITY: "### Identity",
    PINNED_SECTION: "### Pinned",
    SKILL_SECTION: "### Skills",
    MemoryType.LESSON: "### Lessons",
    MemoryType.DECISION: "### Decisions",
    MemoryType.CONTEXT: "### Context",
    "relevant": "### Relevant to the query",
}
TITLE = "## MemoryHub memory"
EMPTY_NOTE = "No memories to inject."


def render_block(entry: InjectionEntry) -> str:
    """`[LESSON] [deploy-friday]: Never deploy on Fridays.`, and for a confirmed entry
    `[LESSON] [deploy-friday] (corroborated by 2, verified 2026-11-20): …`. Continuation
    lines are indented, so no line of a memory can pass for a heading or a section marker."""
    lines = entry.content.replace("\r\n", "\n").replace("\r", "\n").strip().split("\n")
    body = "\n".join([lines[0], *(f"  {line}" if line.strip() else "" for line in lines[1:])])
    return f"{_entry_prefix(entry)} {body}"


def render_injection(included: list[InjectionEntry], facts: list[str] | None = None) -> str:
    """The markdown block: the title, then each section with entries under its heading;
    `facts` (the facts section's rendered parts) right after identity."""
    parts = [TITLE]
    if not included and not facts:
        parts.append(EMPTY_NOTE)
    for section in SECTION_HEADINGS:
        if section == PINNED_SECTION and facts:
            parts.extend(facts)
        entries = [
            e
            for e in included
            if (
                e.section == section
                if section in ("relevant", SKILL_SECTION, PINNED_SECTION)
                else e.section == "core" and e.type == section
            )
        ]
        if entries:
            parts.append(SECTION_HEADINGS[section])
            parts.extend(render_block(e) for e in entries)
    return "\n\n".join(parts) + "\n"


def block_tokens(entry: InjectionEntry) -> int:
    """Tokens of the rendered block. The tokenizer splits on whitespace first, so the
    prefix and the body add up exactly (and the whole block is the sum of its blocks
    and headings, which a test checks against counting the rendered text)."""
    return tokens_of(_entry_prefix(entry)) + _content_tokens(entry)


@lru_cache(maxsize=8192)
def tokens_of(text: str) -> int:
    return count_tokens(text)


def _entry_prefix(entry: InjectionEntry) -> str:
    verified = entry.verified_at.date().isoformat() if entry.verified_at is not None else ""
    return _prefix(entry.type, entry.key, entry.corroborated, verified)


@lru_cache(maxsize=8192)
def _prefix(memory_type: str, key: str, corroborated: int = 0, verified: str = "") -> str:
    """The entry's type and key; how many confirmed this version and when it was last
    confirmed, once someone has (docs/agents.md, "Prompt injection")."""
    standing = (
        f" (corroborated by {corroborated}, verified {verified})" if corroborated > 0 and verified else ""
    )
    return f"[{memory_type.upper()}] [{key}]{standing}:"


class _ContentTokenCache:
    """Token counts of memory contents, by SHA-256 of the content, least recently used
    out: the same entries are injected call after call, and counting is the slow part
    and hashing is not."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._counts: OrderedDict[tuple[str, int], int] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, content: str) -> int:
        key = (Memory.hash_content(content), len(content))
        with self._lock:
            count = self._counts.get(key)
            if count is not None:
                self._counts.move_to_end(key)
                return count
        count = count_tokens(content)
        with self._lock:
            self._counts[key] = count
            if len(self._counts) > self.size:
                self._counts.popitem(last=False)
        return count

    def clear(self) -> None:
        with self._lock:
            self._counts.clear()


_content_cache = _ContentTokenCache(size=20_000)


def _content_tokens(entry: InjectionEntry) -> int:
    # Rendering changes only whitespace, which the tokenizer drops: the content's count
    # is the rendered body's count.
    return _content_cache.get(entry.content)


def clear_token_caches() -> None:
    """Forget every counted token (benchmarks measure cold caches)."""
    _content_cache.clear()
    tokens_of.cache_clear()
