"""Split memory content into overlapping, token-bounded chunks for indexing.

Every chunk is a contiguous slice of the stripped text, so it keeps the author's
formatting, and every size is measured in the embedding model's own tokens (offline,
see ``search.tokens``).

The algorithm:

1. Tokenize the whole text once. The token count of a span is the number of tokens
   that start inside it, which is exact wherever we cut (at whitespace or punctuation).
2. Split the text into paragraphs at blank lines. A paragraph of at most ``max_tokens``
   is one unit. A longer paragraph is split into sentences (``.``, ``!``, ``?`` or ``…``
   followed by whitespace and not by a lowercase letter; a line break; a CJK full stop),
   and a sentence still longer than ``max_tokens`` is cut into windows of
   ``max_tokens - overlap_tokens`` tokens, each cut moved back to the start of a word
   (a cut falls inside a word only when one word is longer than half a window).
3. Pack the units greedily: a unit joins the current chunk while the chunk stays within
   ``max_tokens``. Otherwise the chunk is closed and the next one starts with an overlap
   carried from the end of the closed chunk: the longest tail made of whole sentences
   that fits ``min(overlap_tokens, max_tokens - tokens of the unit)``; if no whole
   sentence fits, the last that many tokens from a word start, provided that is at least
   half of ``overlap_tokens`` (a shorter fragment carries no useful context); else none.

A text of at most ``max_tokens`` tokens is exactly one chunk, the stripped text.
Chunk sizes never exceed ``max_tokens`` when cuts fall between words; a cut forced
inside one very long word may re-tokenize the word's tail to a token or two more.
"""

from __future__ import annotations

import hashlib
import re
from bisect import bisect_left
from dataclasses import dataclass

from search.tokens import count_tokens, token_offsets

Span = tuple[int, int]

# A blank line: a newline, optional horizontal whitespace (including \r), a newline.
_PARAGRAPH_BREAK = re.compile(r"\n[^\S\n]*\n\s*")
# Sentence ends: western punctuation (plus closing quotes/brackets) then whitespace,
# CJK full stops, or any line break inside a paragraph (lists, code, short lines).
# (\u2026 ellipsis, \u201d \u2019 closing quotes, \u3002 \uff01 \uff1f CJK full stop, !, ?)
_SENTENCE_BREAK = re.compile(r"[.!?\u2026]+[\"'\u201d\u2019)\]]*\s+|[\u3002\uff01\uff1f]+\s*|[^\S\n]*\n\s*")
_WESTERN_STOPS = ".!?\u2026"


@dataclass(frozen=True)
class TextChunk:
    index: int
    text: str
    token_count: int
    content_hash: str


def content_hash(text: str) -> str:
    """SHA-256 hex of the UTF-8 text: the key of the embedding cache."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def chunk_text(text: str, *, max_tokens: int = 400, overlap_tokens: int = 80) -> list[TextChunk]:
    """Chunks of about ``max_tokens`` tokens overlapping by about ``overlap_tokens``."""
    if max_tokens < 1:
        raise ValueError("max_tokens must be at least 1")
    if not 0 <= overlap_tokens < max_tokens:
        raise ValueError("overlap_tokens must be between 0 and max_tokens - 1")
    stripped = text.strip()
    if not stripped:
        return []
    tokens = _TokenIndex(stripped)
    if tokens.count(0, len(stripped)) <= max_tokens:
        return [_make_chunk(0, stripped)]

    units = _units(stripped, tokens, max_tokens=max_tokens, overlap_tokens=overlap_tokens)
    spans = _pack(stripped, tokens, units, max_tokens=max_tokens, overlap_tokens=overlap_tokens)
    return [_make_chunk(index, stripped[start:end]) for index, (start, end) in enumerate(spans)]


def _make_chunk(index: int, text: str) -> TextChunk:
    return TextChunk(index=index, text=text, token_count=count_tokens(text), content_hash=content_hash(text))


class _TokenIndex:
    """Token offsets of one text, for counting tokens in any span without re-encoding."""

    def __init__(self, text: str) -> None:
        self.text = text
        offsets = token_offsets(text)
        self.starts = [start for start, _ in offsets]
        self.ends = [end for _, end in offsets]

    def index_at(self, position: int) -> int:
        """Index of the first token that starts at or after ``position``."""
        return bisect_left(self.starts, position)

    def count(self, start: int, end: int) -> int:
        return self.index_at(end) - self.index_at(start)

    def starts_word(self, index: int) -> bool:
        start = self.starts[index]
        return start == 0 or self.text[start - 1].isspace()

    def continues_word(self, index: int) -> bool:
        """True when token ``index`` is a piece of the same word as the token before it."""
        if index == 0 or self.starts[index] != self.ends[index - 1]:
            return False
        return self.text[self.starts[index]].isalnum() and self.text[self.ends[index - 1] - 1].isalnum()


def _trim(text: str, start: int, end: int) -> Span:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _paragraph_spans(text: str) -> list[Span]:
    spans = []
    position = 0
    for match in _PARAGRAPH_BREAK.finditer(text):
        spans.append(_trim(text, position, match.start()))
        position = match.end()
    spans.append(_trim(text, position, len(text)))
    return [(start, end) for start, end in spans if start < end]


def _sentence_spans(text: str, start: int, end: int) -> list[Span]:
    spans = []
    sentence_start = start
    for match in _SENTENCE_BREAK.finditer(text, start, end):
        next_start = match.end()
        if next_start >= end:
            break
        # "e.g. this" or "approx. ten" is not the end of a sentence.
        if text[match.start()] in _WESTERN_STOPS and text[next_start].islower():
            continue
        spans.append(_trim(text, sentence_start, match.start() + len(match.group().rstrip())))
        sentence_start = next_start
    spans.append(_trim(text, sentence_start, end))
    return [(span_start, span_end) for span_start, span_end in spans if span_start < span_end]


def _units(text: str, tokens: _TokenIndex, *, max_tokens: int, overlap_tokens: int) -> list[Span]:
    """Paragraphs, or sentences and word windows of paragraphs too long to keep whole."""
    units: list[Span] = []
    for paragraph in _paragraph_spans(text):
        if tokens.count(*paragraph) <= max_tokens:
            units.append(paragraph)
            continue
        for sentence in _sentence_spans(text, *paragraph):
            if tokens.count(*sentence) <= max_tokens:
                units.append(sentence)
            else:
                # Leave room for the overlap so consecutive windows can share context.
                window = max_tokens - overlap_tokens
                units.extend(_word_windows(tokens, sentence, window=window))
    return units


def _word_windows(tokens: _TokenIndex, span: Span, *, window: int) -> list[Span]:
    first, end_index = tokens.index_at(span[0]), tokens.index_at(span[1])
    windows = []
    window_start = span[0]
    while end_index - first > window:
        cut = _best_cut(tokens, first, first + window)
        windows.append((window_start, tokens.ends[cut - 1]))
        first, window_start = cut, tokens.starts[cut]
    windows.append((window_start, span[1]))
    return windows


def _best_cut(tokens: _TokenIndex, first: int, limit: int) -> int:
    """Token index in (first, limit] to cut before: a word start, else not inside a word."""
    lowest = first + max(1, (limit - first) // 2)
    for cut in range(limit, lowest - 1, -1):
        if tokens.starts_word(cut):
            return cut
    for cut in range(limit, lowest - 1, -1):
        if not tokens.continues_word(cut):
            return cut
    return limit


def _pack(
    text: str, tokens: _TokenIndex, units: list[Span], *, max_tokens: int, overlap_tokens: int
) -> list[Span]:
    chunks: list[Span] = []
    chunk_start, chunk_end = units[0]
    for unit_start, unit_end in units[1:]:
        if tokens.count(chunk_start, unit_end) <= max_tokens:
            chunk_end = unit_end
            continue
        chunks.append((chunk_start, chunk_end))
        budget = min(overlap_tokens, max_tokens - tokens.count(unit_start, unit_end))
        overlap_start = _overlap_start(
            text, tokens, (chunk_start, chunk_end), budget=budget, min_fragment=overlap_tokens // 2
        )
        chunk_start = unit_start if overlap_start is None else overlap_start
        chunk_end = unit_end
    chunks.append((chunk_start, chunk_end))
    return chunks


def _overlap_start(
    text: str, tokens: _TokenIndex, chunk: Span, *, budget: int, min_fragment: int
) -> int | None:
    """Where the tail of ``chunk`` carried into the next chunk begins, or None for no overlap."""
    if budget <= 0:
        return None
    chunk_start, chunk_end = chunk
    # Sentence starts ascend, so the first that fits gives the longest whole-sentence tail.
    for sentence_start, _ in _sentence_spans(text, chunk_start, chunk_end)[1:]:
        if tokens.count(sentence_start, chunk_end) <= budget:
            return sentence_start
    if budget < max(1, min_fragment):
        return None
    first, end_index = tokens.index_at(chunk_start), tokens.index_at(chunk_end)
    earliest = max(first + 1, end_index - budget)
    if earliest >= end_index:
        return None
    for index in range(earliest, end_index):
        if tokens.starts_word(index):
            return tokens.starts[index]
    for index in range(earliest, end_index):
        if not tokens.continues_word(index):
            return tokens.starts[index]
    return tokens.starts[earliest]
