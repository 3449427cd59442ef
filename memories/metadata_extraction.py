"""Metadata from a memory's text without an LLM: people (@mentions), tags (#hashtags),
topics (the names the text is about) and action items (sentences that ask for something
to be done).

`extract_metadata` is a pure function. `with_extracted_metadata` merges its result
into the metadata a save stores, and `metadata_filter_q` / `metadata_filter_document`
turn `tags=` and `people=` filters into one JSONB containment (`metadata @> ...`),
which the GIN index on `metadata` (jsonb_path_ops) answers.

Rules, chosen so that ordinary technical text does not produce junk:
- Fenced code blocks, inline code spans and markdown link targets are ignored for
  all three; URLs and e-mail addresses are ignored for people and tags.
- A mention or tag starts at the beginning of the text, after whitespace or after an
  opening bracket or quote, so `bob@example.com`, `C#`, `&#39;`, `page#section` and
  `/#anchor` are not. It begins with a letter (`#123` is an issue, `@3pm` a time).
- A markdown heading (`# Title`) is not a tag: `#` must touch the word.
- A colour code is not a tag: all hex digits, 3, 4, 6 or 8 long, and either holding
  a digit (`#1e90ff`, `#f00`) or made of at most two distinct characters (`#fff`,
  `#ababab`). Words that happen to be hex (`#cafe`, `#feed`, `#decade`) stay tags.
- Tags and people are lowercased (they are matched case-insensitively by filters),
  deduplicated, and kept in the order they first appear.
- A topic is a run of capitalised words (`Project Alpha`, `Paddle`, `PostgreSQL`) or an
  acronym (`CDN`), lowercased: a name the text is about. A word that only starts a
  sentence is not one (`Never deploy…`), nor a common word that starts a run (`The`,
  `We`, `Our`…). At most MAX_TOPICS, in order of appearance.
- An action item is a sentence (or list item, or line) containing "need(s) to",
  "must", "follow up" / "follow-up" / "followup", or "TODO", as whole words, in any
  case. It is kept as written (list markers and extra whitespace removed).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import re2
from django.db.models import Q

EXTRACTED_KEYS = ("people", "tags", "topics", "action_items")
# Where a merged metadata records which keys it got from the text, so that the next
# version recomputes them instead of carrying stale values over.
EXTRACTED_MARKER = "extracted"

MAX_PEOPLE = 32
MAX_TAGS = 32
MAX_TOPICS = 8
MAX_NAME_CHARS = 64
MAX_ACTION_ITEMS = 20
MAX_ACTION_ITEM_CHARS = 300
MAX_FILTER_VALUES = 10

_FENCED_CODE = re.compile(r"^[ \t]*(```|~~~).*?(?:^[ \t]*\1[^\n]*$|\Z)", re.S | re.M)
_INLINE_CODE = re.compile(r"(`+)[^`]*?\1")
# These three scan forward over runs of text that an adversarial input can make as long
# as the text (`a.a.a.…`, `](](…`); with a backtracking engine every start position
# would rescan the run. RE2 matches in linear time (docs/security.md, "Linear-time
# patterns"); the others below need lookaround, which RE2 lacks, and stop at the first
# character that cannot continue them, so each is linear as written.
_LINK_TARGET = re2.compile(r"\]\([^)\s]*(?:\s+\"[^\"]*\")?\)")
_URL = re2.compile(r"(?i)\b(?:[a-z][a-z0-9+.-]*://|www\.)\S+")
_EMAIL = re2.compile(r"[\pL\pN_.+-]+@[\pL\pN_-]+(?:\.[\pL\pN_-]+)+")

# Allowed just before @ or #: start, whitespace, opening brackets and quotes. Written
# as "the sign, not preceded by anything else", so each pattern starts with its literal
# sign and the engine jumps from one sign to the next instead of trying every position.
_NOT_AFTER = r"[^\s(\[{<\"'\u201c\u2018,;]"
_MENTION = re.compile(r"@(?<!" + _NOT_AFTER + r"@)([^\W\d_][\w.-]*)(?![\w/@])")
_HASHTAG = re.compile(r"#(?<!" + _NOT_AFTER + r"#)([^\W\d_][\w/-]*)(?![\w#])")
_HEX = re.compile(r"^[0-9a-f]+$")
# A capitalised word (or an acronym) and the capitalised words right after it.
_NAME_RUN = re2.compile(r"\p{Lu}[\pL\pN]+(?:[ \t]+\p{Lu}[\pL\pN]+)*")
_SENTENCE_OPENERS = frozenset(
    [
        "a",
        "an",
        "the",
        "this",
        "that",
        "these",
        "those",
        "we",
        "our",
        "us",
        "i",
        "it",
        "its",
        "my",
        "you",
        "your",
        "they",
        "their",
        "he",
        "she",
        "there",
        "here",
        "when",
        "if",
        "then",
        "also",
        "and",
        "but",
        "or",
        "so",
        "for",
        "to",
        "in",
        "on",
        "at",
        "by",
        "of",
        "as",
        "after",
        "before",
        "while",
        "never",
        "always",
        "do",
        "don't",
        "please",
        "note",
        "use",
        "run",
        "see",
    ]
)

# RE2 (linear and fast on text without any of the words); \pZ adds the Unicode spaces
# RE2's \s leaves out.
_ACTION = re2.compile(r"(?i)\b(?:needs?[\s\pZ]+to|must|follow[\s\pZ-]?ups?|todos?)\b")
# Sentence ends: . ! ? followed by whitespace (so URLs, versions and file names
# survive), and line breaks (list items, one-line notes).
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_LIST_MARKER = re.compile(r"^(?:[-*+•]\s+|\d+[.)]\s+)?(?:\[[ xX]\]\s+)?")


def extract_metadata(content: str) -> dict[str, list[str]]:
    """People, tags and action items found in `content`; every key is always present
    (an empty list when nothing was found)."""
    prose = _strip_code(str(content))  # re2 rebuilds results with type(text)(): a plain str
    words = _EMAIL.sub(" ", _URL.sub(" ", _LINK_TARGET.sub("]", prose)))
    # findall and dict.fromkeys run in C: Python handles each distinct name once, not
    # each of the thousands of repeats an adversarial text can hold.
    mentions = dict.fromkeys(_MENTION.findall(words))
    hashtags = dict.fromkeys(_HASHTAG.findall(words))
    return {
        "people": _unique((_clean_name(m) for m in mentions), MAX_PEOPLE),
        "tags": _unique((name for m in hashtags if not _is_colour(name := _clean_name(m))), MAX_TAGS),
        "topics": _topics(words),
        "action_items": _action_items(prose),
    }


def with_extracted_metadata(content: str, metadata: dict[str, Any] | None) -> dict[str, Any]:
    """The metadata to store with `content`: the caller's metadata, plus what the
    text yields for each of people / tags / action_items the caller did not set.

    Caller keys win. Keys listed under `extracted` in the given metadata were filled
    by an earlier extraction (e.g. carried over from the version being superseded, or
    echoed back by a client): they are dropped and recomputed from the new text, so a
    new version never keeps the old text's tags. `extracted` lists the keys this call
    filled; it is absent when it filled none. Empty findings are not stored."""
    merged = dict(metadata or {})
    previous = merged.pop(EXTRACTED_MARKER, None)
    if isinstance(previous, list):
        for name in previous:
            if name in EXTRACTED_KEYS:
                merged.pop(name, None)
    found = extract_metadata(content)
    filled = [name for name in EXTRACTED_KEYS if name not in merged and found[name]]
    for name in filled:
        merged[name] = found[name]
    if filled:
        merged[EXTRACTED_MARKER] = filled
    return merged


def normalise_filter_values(values: Iterable[str] | None) -> list[str]:
    """Filter values as extraction stores them: lowercase, without a leading # or @,
    blanks dropped, deduplicated."""
    cleaned = (value.strip().lstrip("#@").strip().lower() for value in values or [])
    return _unique((value for value in cleaned if value), MAX_FILTER_VALUES)


def parse_filter_param(raw: str | None) -> list[str]:
    """A query parameter such as `tags=deploy,infra` (commas separate values)."""
    return normalise_filter_values((raw or "").split(","))


def metadata_filter_document(
    tags: Iterable[str] | None = None, people: Iterable[str] | None = None
) -> dict[str, list[str]] | None:
    """The JSONB document a memory's metadata must contain to match every tag and
    every person given (AND), or None when there is nothing to filter on."""
    document: dict[str, list[str]] = {}
    if tag_values := normalise_filter_values(tags):
        document["tags"] = tag_values
    if people_values := normalise_filter_values(people):
        document["people"] = people_values
    return document or None


def metadata_filter_q(
    tags: Iterable[str] | None = None,
    people: Iterable[str] | None = None,
    topics: Iterable[str] | None = None,
) -> Q:
    """`Q(metadata__contains=...)` for list selectors (every tag, every person) and, with
    topics, any one of them; an empty Q when no filter."""
    document = metadata_filter_document(tags, people)
    condition = Q(metadata__contains=document) if document else Q()
    if topic_values := normalise_filter_values(topics):
        condition &= Q(metadata__topics__has_any_keys=topic_values)
    return condition


def _strip_code(text: str) -> str:
    return _INLINE_CODE.sub(" ", _FENCED_CODE.sub("\n", text))


def _clean_name(name: str) -> str:
    # A mention at the end of a sentence ("thanks @bob.") keeps no trailing dot.
    return name.rstrip(".-/")[:MAX_NAME_CHARS].lower()


def _is_colour(name: str) -> bool:
    if len(name) not in (3, 4, 6, 8) or not _HEX.match(name):
        return False
    return any(ch.isdigit() for ch in name) or len(set(name)) <= 2


def _topics(text: str) -> list[str]:
    topics: dict[str, None] = {}
    for match in _NAME_RUN.finditer(text):
        if match.start() and text[match.start() - 1] in "@#":
            continue  # a mention or a tag: people and tags hold it
        words = match.group(0).split()
        if _starts_sentence(text, match.start()) or words[0].lower() in _SENTENCE_OPENERS:
            words = words[1:]  # the sentence's first word, or a common word, is no name
        while words and words[0].lower() in _SENTENCE_OPENERS:
            words = words[1:]
        if words:
            topics[" ".join(words).lower()[:MAX_NAME_CHARS]] = None
            if len(topics) == MAX_TOPICS:
                break
    return list(topics)


def _starts_sentence(text: str, start: int) -> bool:
    """Whether only whitespace, list markers or quotes stand between `start` and the
    text's start or the end of the previous sentence or line."""
    before = text[max(0, start - 8) : start].rstrip(" \t*-•>\"'(\u201c")
    numbered = before.endswith(")") and before[:-1][-1:].isdigit()  # "1) Use X"
    return not before or before[-1] in ".!?:\n" or numbered


def _action_items(prose: str) -> list[str]:
    items: dict[str, None] = {}
    if not _ACTION.search(prose):
        return []
    # Each distinct piece once (a repeated sentence costs one search), and no more
    # pieces once MAX_ACTION_ITEMS items are found.
    for piece in dict.fromkeys(_SENTENCE_END.split(prose)):
        # Markers and spacing never decide whether a piece holds an action word.
        if not _ACTION.search(piece):
            continue
        sentence = " ".join(_LIST_MARKER.sub("", piece.strip()).split())
        if sentence:
            items[_shorten(sentence)] = None
            if len(items) == MAX_ACTION_ITEMS:
                break
    return list(items)


def _shorten(text: str) -> str:
    if len(text) <= MAX_ACTION_ITEM_CHARS:
        return text
    return text[: MAX_ACTION_ITEM_CHARS - 1].rstrip() + "…"


def _unique(values: Iterable[str], limit: int) -> list[str]:
    seen: dict[str, None] = {}
    for value in values:
        if value and value not in seen:
            seen[value] = None
            if len(seen) == limit:
                break
    return list(seen)
