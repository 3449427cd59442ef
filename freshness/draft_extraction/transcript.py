"""Step 1 of drafting candidate memories from a session transcript or notes: the
text every extractor reads (rules.py offline, llm.py through a chat endpoint), so no
extractor ever reads a credential or code. Not memories/metadata_extraction.py, which
finds the people, tags and action items of one memory's metadata.

`prepare_transcript` bounds the text (TRANSCRIPT_MAX_CHARS: what lies past it is
dropped, cut at the last line break before the cap), scrubs credentials with
teams.scrubber (and the team's vault secrets when given), then PII the scrubber does
not cover (e-mail addresses, phone numbers), then drops code: fenced blocks (``` and
~~~; an unclosed fence runs to the end of the text, as in CommonMark) and indented
blocks (4 spaces or a tab after a blank line). It returns a PreparedTranscript: the
only text an extractor reads, the one a draft keeps, and the text every
`source_span` indexes.

Also the shape both extractors answer in: a Candidate, at most MAX_CANDIDATES of them.
Every pattern here is RE2 (google-re2, linear in the text whatever the pattern;
docs/security.md, "Linear-time patterns").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import re2

from memories.conversations.models import MAX_TRANSCRIPT_CHARS
from memories.types import MemoryType
from teams.scrubber import REDACTED, SecretMatcher, scrub

# The bound of a stored conversation too (the same transcript is kept as one).
TRANSCRIPT_MAX_CHARS = MAX_TRANSCRIPT_CHARS
MAX_CANDIDATES = 15
MAX_CONTENT_CHARS = 500  # a candidate's content; longer text is cut at a word boundary

_OPTIONS = re2.Options()
_OPTIONS.max_mem = 32 << 20  # as teams.scrubber: room for the lazy DFA on long texts


def compile_pattern(pattern: str) -> Any:  # re2._Regexp: the package ships no type information
    return re2.compile(pattern, _OPTIONS)


# --------------------------------------------------------------------------- PII


# On UTF-8 bytes, as the scrubber matches (no offset mapping). The last label of the
# domain is letters, so `react@18.2.0` is a version, not an address.
_EMAIL = compile_pattern(r"[\pL\pN_.+-]+@[\pL\pN_-]+(?:\.[\pL\pN_-]+)*\.\pL{2,}")
# International (+ country code, 8 to 15 digits), North American (555-123-4567,
# (415) 555-0100) and national trunk forms (030 12345678). Dates (2024-01-15), IP
# addresses and versions have other shapes; a match inside a longer number is skipped.
_PHONE = compile_pattern(
    r"\+\d{1,3}(?:[ .-]?\(?\d{1,4}\)?){1,5}"
    r"|\(\d{3}\)[ ]?\d{3}[ .-]\d{4}\b"
    r"|\b\d{3}[ .-]\d{3}[ .-]\d{4}\b"
    r"|\b0\d{2,4}[ /-]\d{5,8}\b"
)
_PHONE_MIN_DIGITS = 8
_PHONE_MAX_DIGITS = 15
# A Git remote (git@github.com:org/repo) is an address of a server, not of a person.
_NOT_PERSONAL_LOCAL_PARTS = (b"git",)


def _redact_pii(text: str) -> str:
    data = original = text.encode("utf-8", "surrogatepass")
    data = _replace(data, _EMAIL, REDACTED.format(kind="email").encode(), _is_personal_email)
    data = _replace(data, _PHONE, REDACTED.format(kind="phone").encode(), _is_phone)
    return text if data is original else data.decode("utf-8", "surrogatepass")


def _replace(data: bytes, regex: Any, marker: bytes, keep_match: Any) -> bytes:
    pieces: list[bytes] = []
    end = 0
    for match in regex.finditer(data):
        start, stop = match.span()
        if not keep_match(data, start, stop):
            continue
        pieces += (data[end:start], marker)
        end = stop
    if not pieces:
        return data
    pieces.append(data[end:])
    return b"".join(pieces)


def _is_personal_email(data: bytes, start: int, stop: int) -> bool:
    return data[start : data.index(b"@", start)] not in _NOT_PERSONAL_LOCAL_PARTS


def _is_phone(data: bytes, start: int, stop: int) -> bool:
    digits = sum(1 for byte in data[start:stop] if 48 <= byte <= 57)
    if not _PHONE_MIN_DIGITS <= digits <= _PHONE_MAX_DIGITS:
        return False
    before = data[start - 1 : start]
    after = data[stop : stop + 2]
    # Part of a longer number, an IP address or a version: 1.192.168.100.200, 555-123-4567.8
    if before.isdigit() or before == b".":
        return False
    return not (len(after) == 2 and after[:1] in b".-" and after[1:].isdigit())


# --------------------------------------------------------------------------- code


_FENCE_CHARS = ("`", "~")


def _drop_code(text: str) -> str:
    """Fenced and indented code blocks removed, each replaced by one blank line so the
    prose around it stays apart. One pass over the lines."""
    kept: list[str] = []
    fence = ""  # the run of ` or ~ that opened the current fenced block
    in_indented = False
    previous_blank = True
    dropped_block = False
    for line in text.splitlines(keepends=True):
        body = line.lstrip(" \t")
        if fence:
            closing = body.rstrip()
            if closing.startswith(fence) and closing.strip(fence[0]) == "":
                fence = ""
            continue
        run = body[: len(body) - len(body.lstrip(body[:1]))] if body[:3] in ("```", "~~~") else ""
        # As in CommonMark, a backtick fence's info string holds no backtick: a line
        # "```make test```" is inline code, not the start of a block.
        if run and not (run[0] == "`" and "`" in body[len(run) :]):
            fence = run
            in_indented = False
            if not dropped_block:
                kept.append("\n")
                dropped_block = True
            continue
        if not body.strip():
            kept.append(line)
            previous_blank = True
            continue
        indented = line.startswith(("    ", "\t"))
        if indented and (previous_blank or in_indented) and not line_lead(body).is_list_item:
            in_indented = True
            previous_blank = False
            if not dropped_block:
                kept.append("\n")
                dropped_block = True
            continue
        in_indented = False
        previous_blank = False
        dropped_block = False
        kept.append(line)
    return "".join(kept)


# --------------------------------------------------------------------------- line leads


_LEAD_REACH = 200  # no line lead is longer; past it, the text of the line has begun
_BULLETS = "-*+•⏺●▪◦"
LINE_BLANKS = " \t"


@dataclass(frozen=True)
class LineLead:
    end: int  # where the text of the line starts
    is_list_item: bool
    is_heading: bool
    open_checkbox: bool  # `- [ ] write the guide`: an open item of a checklist, a TODO


def line_lead(line: str) -> LineLead:
    """Blanks, quote marks, list markers (`-`, `1.`), a checkbox or heading hashes at
    the start of a line. String operations, one step per character of the lead."""
    line = line[:_LEAD_REACH]
    i = _skip_blanks(line, 0)
    hashes = len(line) - i - len(line[i:].lstrip("#"))
    if 1 <= hashes <= 6 and line[i + hashes : i + hashes + 1] in (" ", "\t"):
        return LineLead(_skip_blanks(line, i + hashes), False, True, False)
    is_list_item = False
    while i < len(line):
        if line[i] == ">":
            i = _skip_blanks(line, i + 1)
            continue
        marker_end = i + 1 if line[i] in _BULLETS else _number_end(line, i)
        if marker_end > i and line[marker_end : marker_end + 1] in (" ", "\t"):
            i, is_list_item = _skip_blanks(line, marker_end), True
            continue
        break
    box = line[i : i + 3]
    open_checkbox = False
    if is_list_item and box in ("[ ]", "[x]", "[X]") and line[i + 3 : i + 4] in (" ", "\t"):
        open_checkbox = box == "[ ]" and bool(line[i + 3 :].strip())
        i = _skip_blanks(line, i + 3)
    return LineLead(i, is_list_item, False, open_checkbox)


def _skip_blanks(line: str, i: int) -> int:
    return len(line) - len(line[i:].lstrip(LINE_BLANKS))


def _number_end(line: str, i: int) -> int:
    """Past `12.` or `3)` at i (at most 3 digits), else i."""
    j = i
    while j < len(line) and j - i < 3 and line[j].isdigit():
        j += 1
    return j + 1 if j > i and line[j : j + 1] in (".", ")") else i


# --------------------------------------------------------------------------- preparation


class PreparedTranscript(str):
    """A transcript bounded, scrubbed of credentials and PII, and stripped of code: the
    type an extractor reads, so a raw text cannot reach one by mistake."""

    __slots__ = ()


def prepare_transcript(text: str, secret_values: Iterable[str] | SecretMatcher = ()) -> PreparedTranscript:
    """The text every extractor reads (module docstring, step 1)."""
    text = str(text)
    if len(text) > TRANSCRIPT_MAX_CHARS:
        text = text[: _cut_point(text)]
    text = scrub(text, secret_values).text
    text = _redact_pii(text)
    return PreparedTranscript(_drop_code(text))


def _cut_point(text: str) -> int:
    """Where a text over the cap is cut: after the last line break before the cap, else
    the last whitespace; a cap-long run without either is dropped whole, so no token
    (a secret the scrubber would no longer recognise once cut) is ever kept in part."""
    head = text[:TRANSCRIPT_MAX_CHARS]
    line_break = head.rfind("\n")
    if line_break >= 0:
        return line_break + 1
    return max(head.rfind(" "), head.rfind("\t"), 0)


# --------------------------------------------------------------------------- rules


@dataclass(frozen=True)
class Candidate:
    """A memory the extractor proposes; a person accepts, edits or rejects it."""

    type: MemoryType
    key: str
    content: str
    why: str
    source_span: tuple[int, int]  # [start, end) in the prepared transcript

    def as_dict(self) -> dict[str, Any]:
        return {
            "type": self.type.value,
            "key": self.key,
            "content": self.content,
            "why": self.why,
            "source_span": list(self.source_span),
        }


MAX_FACT_CANDIDATES = 15
MAX_FACT_VALUE_CHARS = 200  # a proposed fact's value: a name, a version, a short answer


@dataclass(frozen=True)
class FactCandidate:
    """A fact the extractor proposes, `(entity, key) -> value`; a person accepts, edits
    or rejects it (or, when the team already holds another value, a fact_contradiction
    nudge asks which one is true)."""

    entity: str
    key: str
    value: str
    why: str
    source_span: tuple[int, int]  # [start, end) in the prepared transcript

    def as_dict(self) -> dict[str, Any]:
        return {
            "entity": self.entity,
            "key": self.key,
            "value": self.value,
            "why": self.why,
            "source_span": list(self.source_span),
        }
