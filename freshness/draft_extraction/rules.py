"""Step 2 of drafting candidate memories, offline and rule-based: the rules read a
PreparedTranscript (transcript.py) and propose candidates for a person to review.

`extract_candidates` reads it block by block (a speaker turn, a list item, a
paragraph) and sentence by sentence, and proposes at most MAX_CANDIDATES
candidates, deduplicated and ordered by position. Given a plain str, it prepares it
first. The rules, first match wins per sentence:
- a label or a section heading: `Decision: …`, `Lesson: …`, `Gotcha: …`, `TODO: …`,
  `## Next steps` followed by list items…; type names and their aliases resolve
  through memories.types (`Warning:` is a lesson, `Choice:` a decision);
- decisions ("we decided", "let's go with", "we chose X over Y") → decision;
- migrations ("we switched/moved/migrated from X to Y", "replaced X with Y") → decision;
- lessons and gotchas ("lesson", "gotcha", "turns out", "the fix was", "root cause") → lesson;
- never/always rules ("Never …", "we always …", "must never …") → lesson, as the type
  hint in memories.types reads them;
- conventions ("by convention", "our convention is", "we prefer", "rule of thumb") → decision;
- references (a runbook, docs or dashboard at a URL or path) → reference;
- TODOs ("TODO", "FIXME", "follow up", "next step", "still need to", an open
  checkbox `- [ ] …`) → context.
Questions ("should we go with Redis?") and hypotheticals ("if we switch …", "we
haven't decided") are not candidates. Consecutive sentences of one block that match
rules of the same type make one candidate. Past the cap, labels and sections are
kept first, then decisions, migrations and lessons, then rules and conventions, then
references and TODOs; the chosen ones are returned in text order.

Every pattern that runs on the text is RE2 (google-re2, linear in the text whatever the
pattern, docs/security.md, "Linear-time patterns"). The rules' cues run once
over the whole text as one alternation, and only the blocks and sentences a cue
touches are split and matched rule by rule; line leads (list markers, quotes,
checkboxes, headings) are string operations; a sentence longer than
MAX_SENTENCE_CHARS is read in windows. So the whole is linear in the text.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from freshness.draft_extraction.transcript import (
    LINE_BLANKS,
    MAX_CANDIDATES,
    MAX_CONTENT_CHARS,
    Candidate,
    LineLead,
    PreparedTranscript,
    compile_pattern,
    line_lead,
    prepare_transcript,
)
from memories.keys import derive_key
from memories.types import ACCEPTED_TYPE_NAMES, MemoryType, resolve_type

MAX_SENTENCE_CHARS = 1000  # a longer "sentence" (no punctuation) is read in windows
MIN_CONTENT_WORDS = 3


@dataclass(frozen=True)
class _Rule:
    name: str
    type: MemoryType
    tier: int  # which candidates are kept past the cap: lower first
    pattern: Any
    unless: Any = None  # a hypothetical or negated form of the cue


_HYPOTHETICAL = (
    r"\b(?:if|whether|should we|could we|shall we|maybe|might|perhaps|considering|"
    r"thinking about|wondering|not sure|unless)\b"
)
_RULES: tuple[_Rule, ...] = (
    _Rule(
        "decision",
        MemoryType.DECISION,
        1,
        compile_pattern(
            r"(?i)\b(?:we|i|team|they)(?:'ve|\s+have)?\s+(?:finally\s+|just\s+|all\s+)?"
            r"(?:decided|agreed|chose|picked|settled\s+on|opted|went\s+with)\b"
            r"|\b(?:we|i|team|they)(?:'ll|\s+will|'re|\s+are)\s+(?:go(?:ing)?|stick(?:ing)?)\s+with\b"
            r"|\blet'?s\s+(?:go|stick)\s+with\b|\blet'?s\s+keep\s+it\b|\blet us go with\b|^going with\b"
            r"|\bdecided\s+(?:to|on|against)\b"
            r"|\b(?:the\s+)?decision\s+(?:is|was)\b|\bwe(?:\s+will|'ll)\s+use\b|\bwe\s+went\s+for\b"
        ),
        compile_pattern(
            r"(?i)(?:\bnot|n't|\bnever)\s+(?:yet\s+)?(?:decided|agreed|chose|picked|settled)\b|\bundecided\b|"
            + _HYPOTHETICAL
        ),
    ),
    _Rule(
        "migration",
        MemoryType.DECISION,
        1,
        compile_pattern(
            r"(?i)\b(?:switch(?:ed|ing)?|mov(?:ed|ing)|migrat(?:ed|ing)|port(?:ed|ing)|swapp(?:ed|ing)|"
            r"chang(?:ed|ing)|transitioned|replac(?:ed|ing))\b[^.;]{0,80}?\bfrom\b[^.;]{1,80}?\b(?:to|onto)\b"
            r"|\breplaced\b[^.;]{1,80}?\bwith\b|\bno\s+longer\s+use\b"
            r"|\bwe(?:'ve|\s+have)?\s+(?:dropped|removed|deprecated|retired|disabled|adopted|introduced)\b"
            r"|\bwe(?:'ll|\s+will)\s+(?:remove|drop|keep|move|switch|migrate|deprecate|replace|pin|require|rename)\b"
        ),
        compile_pattern("(?i)" + _HYPOTHETICAL),
    ),
    _Rule(
        "lesson",
        MemoryType.LESSON,
        1,
        compile_pattern(
            r"(?i)\blessons?(?:\s+learned)?\b|\bgotchas?\b|\bturn(?:s|ed)\s+out\b|\bthe\s+(?:real\s+)?fix\s+(?:was|is)\b"
            r"|\bfixed\s+(?:it\s+|this\s+)?by\b|\broot\s+cause\b|\bthe\s+(?:problem|bug|culprit|issue|cause)\s+was\b"
            r"|\bthe\s+(?:real|actual|underlying)\s+(?:problem|bug|issue|cause)\s+(?:is|was)\b|\bnote\s+that\b|\bbe\s+aware\b"
            r"|\bthe\s+trick\s+(?:was|is)\b|\bwatch\s+out\b|\bbeware\b|\bpitfall\b|\bcaveat\b|\bTIL\b"
            r"|\blearned\s+(?:that|the\s+hard\s+way)\b|\bworkaround\s+(?:is|was)\b|\bkeep\s+in\s+mind\b"
        ),
    ),
    _Rule(
        "rule",
        MemoryType.LESSON,
        2,
        compile_pattern(
            r"(?i)^(?:(?:and|so|also|please|but)\s+)?(?:never|always|do\s+not|don't|avoid|make\s+sure)\b"
            r"|\b(?:we|you|agents?|everyone|nobody)\s+(?:should\s+|must\s+)?(?:always|never)\b"
            r"|\b(?:must|should)\s+(?:always|never)\b"
        ),
        compile_pattern(
            r"(?i)^(?:(?:and|so|also|please|but)\s+)?(?:do\s+not|don't)\s+(?:worry|know|think|see|have|mind|need|remember|understand|get)\b"
            r"|\bnever\s+(?:mind|happened|worked|heard)\b|\balways\s+(?:been|was)\b"
        ),
    ),
    _Rule(
        "convention",
        MemoryType.DECISION,
        2,
        compile_pattern(
            r"(?i)\bconventions?\s+(?:is|are)\b|\bby\s+convention\b|\bour\s+convention\b|\bwe\s+prefer\b"
            r"|\brule\s+of\s+thumb\b|\bhouse\s+(?:style|rule)\b|\bour\s+(?:standard|style\s+guide)\b"
            r"|\bthe\s+rule\s+is\b|\bnaming\s+(?:scheme|pattern)\b"
            r"|\bfrom\s+now\s+on\b|\bgoing\s+forward\b|\bmoving\s+forward\b|\bfrom\s+here\s+on\b"
        ),
        compile_pattern("(?i)" + _HYPOTHETICAL),
    ),
    _Rule(
        "reference",
        MemoryType.REFERENCE,
        3,
        compile_pattern(
            r"(?i)\b(?:runbook|docs|documentation|dashboard|wiki|playbook|design\s+doc|spec|readme|adr)\b"
            r"[^.\n]{0,40}?(?:\b(?:is|are|lives?|at|in|under)\s+|:\s+)(?:https?://|\S*/)"
        ),
    ),
    _Rule(
        "todo",
        MemoryType.CONTEXT,
        3,
        compile_pattern(
            r"\bTODO\b|\bFIXME\b|(?i:\bfollow[\s-]?ups?\b|\bnext\s+steps?\b|\baction\s+items?\b"
            r"|\bstill\s+needs?\s+to\b|\bremaining\s+work\b"
            r"|\bby\s+(?:next\s+)?(?:monday|tuesday|wednesday|thursday|friday|tomorrow|eod|end\s+of\s+(?:the\s+)?(?:day|week|sprint|month)))"
            r"|^[A-Z][a-z]+\s+to\s+[a-z]+\b"
        ),
        compile_pattern(
            r"(?i)\bno\s+(?:follow[\s-]?ups?|next\s+steps?|action\s+items?)\b|\bnothing\s+to\s+follow"
        ),
    ),
)
_RULE_NAMES = tuple(rule.name for rule in _RULES)


def _cue_pattern(rules: tuple[_Rule, ...]) -> str:
    """Every rule's cue in one alternation, run once over the whole text, so that only
    the sentences a cue touches are matched rule by rule. A sentence-start anchor
    becomes a word boundary: the alternation finds a superset of the rules' matches."""
    parts = []
    for rule in rules:
        source = rule.pattern.pattern.replace("(?i)^", "(?i)\\b").replace("|^", "|\\b")
        if "^" in source.replace("[^", ""):
            raise ValueError(f"rule {rule.name}: an anchor other than at an alternative's start")
        parts.append(f"(?:{source})")
    return "|".join(parts)


_CUES = compile_pattern(_cue_pattern(_RULES))
_LABEL_TIER = 0

# Labels (`Gotcha: …`) and section headings (`## Next steps`). The six type names and
# their aliases resolve through memories.types; the aliases that are ordinary words at
# the start of a chat line (`Core:`, `Self:`, `Active:`, `Past:`) are left out.
_ALIASES_NOT_LABELS = {"core", "self", "active", "past", "archive", "identity", "context", "background"}
_LABELS: dict[str, MemoryType] = {
    name: memory_type
    for name in ACCEPTED_TYPE_NAMES
    if name not in _ALIASES_NOT_LABELS and (memory_type := resolve_type(name)) is not None
}
_LABELS.update(
    {
        **dict.fromkeys(
            (
                "lessons",
                "lesson learned",
                "lessons learned",
                "learnings",
                "insights",
                "gotcha",
                "gotchas",
                "pitfall",
                "pitfalls",
                "caveat",
                "caveats",
                "til",
                "root cause",
                "the fix",
                "workaround",
                "heads up",
                "heads-up",
                "warnings",
                "rule",
                "rules",
            ),
            MemoryType.LESSON,
        ),
        **dict.fromkeys(
            (
                "decisions",
                "decision log",
                "decided",
                "agreed",
                "choices",
                "commitments",
                "convention",
                "conventions",
                "house rules",
                "policy",
            ),
            MemoryType.DECISION,
        ),
        **dict.fromkeys(
            (
                "todo",
                "todos",
                "to do",
                "to-do",
                "fixme",
                "follow up",
                "follow-up",
                "follow-ups",
                "follow ups",
                "followup",
                "next step",
                "next steps",
                "action item",
                "action items",
                "open items",
                "open",
            ),
            MemoryType.CONTEXT,
        ),
        **dict.fromkeys(
            ("references", "links", "docs", "runbook", "runbooks", "see also"), MemoryType.REFERENCE
        ),
    }
)

# `Name:` at the start of a block: a speaker (`User:`, `[10:32] alice:`, `**Assistant**:`)
# or a label (`Lesson:`, `**TODO:**`). A colon must be followed by a blank or the end,
# so `https://…` and `10:32` are neither.
_PREFIX = compile_pattern(
    r"^(?:\[[^\]\n]{1,40}\][ \t]*)?[*_]{0,2}(?P<name>[A-Za-z][A-Za-z0-9 ._'()/-]{0,40}?)[*_]{0,2}[ \t]*:"
    r"[*_]{0,2}(?:[ \t]+|$)"
)
# A speaker is one word, perhaps with a role (`alice (SRE)`); `Turns out: …` is prose.
_SPEAKER = compile_pattern(r"[A-Za-z][A-Za-z0-9._'-]{0,30}(?: \([^)]{1,30}\))?")
# A sentence ends at . ! ? (and closing quotes or brackets) followed by whitespace.
_SENTENCE_END = compile_pattern(r"[.!?]+[\"')\]]*\s+")
_ABBREVIATIONS = ("e.g.", "i.e.", "vs.", "etc.", "cf.", "approx.")


@dataclass
class _Block:
    """A speaker turn, list item or paragraph: [start, end) in the prepared text."""

    start: int
    end: int
    is_list_item: bool
    is_heading: bool
    label_type: MemoryType | None  # from a leading `Label:`
    label_name: str
    content_start: int  # past the lead, speaker and label


@dataclass
class _Found:
    type: MemoryType
    tier: int
    start: int
    end: int
    why: str
    rule: str
    block: int


# --------------------------------------------------------------------------- extraction


def extract_candidates(text: str, limit: int = MAX_CANDIDATES) -> list[Candidate]:
    """At most `limit` (never more than MAX_CANDIDATES) candidate memories, in text
    order (module docstring, step 2). A plain str is prepared first."""
    # A plain str from here on: re2 rebuilds results with type(text)().
    prepared = str(text if isinstance(text, PreparedTranscript) else prepare_transcript(text))
    limit = max(0, min(limit, MAX_CANDIDATES))
    if limit == 0:
        return []
    found = _find(prepared)
    candidates: list[tuple[int, int, Candidate]] = []
    seen: set[str] = set()
    for item in found:
        content = _content(prepared[item.start : item.end])
        if len(content.split()) < MIN_CONTENT_WORDS:
            continue
        fingerprint = _fingerprint(content)
        if fingerprint in seen:
            continue
        seen.add(fingerprint)
        candidate = Candidate(
            type=item.type,
            key=derive_key(content),
            content=content,
            why=item.why,
            source_span=(item.start, item.end),
        )
        candidates.append((item.tier, item.start, candidate))
    chosen = sorted(candidates, key=lambda entry: (entry[0], entry[1]))[:limit]
    return [candidate for _, _, candidate in sorted(chosen, key=lambda entry: entry[1])]


class _CueHits:
    """Where the cue alternation matched, asked in text order: does [start, end) touch
    a match? The pointer only moves forward, so all questions together are linear."""

    def __init__(self, text: str) -> None:
        self._spans = [match.span() for match in _CUES.finditer(text)]
        self._next = 0

    def touches(self, start: int, end: int) -> bool:
        while self._next < len(self._spans) and self._spans[self._next][1] <= start:
            self._next += 1
        return self._next < len(self._spans) and self._spans[self._next][0] < end


def _find(text: str) -> list[_Found]:
    found: list[_Found] = []
    cues = _CueHits(text)
    section: tuple[MemoryType, str] | None = None
    section_from_heading = False
    for index, block in enumerate(_blocks(text)):
        heading = _section_heading(text, block)
        if heading is not None:
            section, section_from_heading = heading
            continue
        if block.is_heading:
            section = None  # another heading ends the section
            continue
        if section is not None and not section_from_heading and not block.is_list_item:
            section = None  # a `Next steps:` line governs the list under it only
        if block.label_type is not None:
            found.append(
                _whole_block(block, block.label_type, f'labelled "{block.label_name}"', "label", index)
            )
            continue
        if section is not None:
            found.append(_whole_block(block, section[0], f'listed under "{section[1]}"', "section", index))
            continue
        _scan_sentences(text, block, index, found, cues)
    return found


def _whole_block(block: _Block, memory_type: MemoryType, why: str, rule: str, index: int) -> _Found:
    return _Found(memory_type, _LABEL_TIER, block.content_start, block.end, why, rule, index)


def _scan_sentences(text: str, block: _Block, index: int, found: list[_Found], cues: _CueHits) -> None:
    if not cues.touches(block.content_start, block.end):
        return  # no cue anywhere in the block: no need to find its sentences
    previous_sentence_end = -1
    for start, end in _sentences(text, block.content_start, block.end):
        follows, previous_sentence_end = previous_sentence_end, end
        if not cues.touches(start, end):
            continue
        sentence = text[start:end].strip()
        if sentence.endswith("?"):
            continue
        match = _match_rule(sentence)
        if match is None:
            continue
        rule, cue = match
        previous = found[-1] if found else None
        if (
            previous is not None
            and previous.block == index
            and previous.end == follows
            and previous.rule in _RULE_NAMES
            and previous.type == rule.type
            and end - previous.start <= MAX_CONTENT_CHARS
        ):
            previous.end = end  # the next sentence of the same lesson / decision
            previous.tier = min(previous.tier, rule.tier)
            continue
        why = f'{rule.name}: "{" ".join(cue.split())[:60]}"'
        found.append(_Found(rule.type, rule.tier, start, end, why, rule.name, index))


def _match_rule(sentence: str) -> tuple[_Rule, str] | None:
    for rule in _RULES:
        match = rule.pattern.search(sentence)
        if match is None:
            continue
        if rule.unless is not None and rule.unless.search(sentence):
            continue
        return rule, match.group(0)
    return None


def _section_heading(text: str, block: _Block) -> tuple[tuple[MemoryType, str], bool] | None:
    """`## Decisions`, `## Next steps (Tuesday)`, or a label alone on its line
    (`Lessons learned:`, `**TODO:**`): the type of the items under it, and whether it
    is a heading (which governs until the next heading)."""
    if block.label_type is not None:
        if text[block.content_start : block.end].strip(" \t*_"):
            return None
        return (block.label_type, block.label_name), block.is_heading
    if not block.is_heading:
        return None
    words = text[block.content_start : block.end].strip(" \t*_:")
    name = " ".join(words.lower().split())
    memory_type = _LABELS.get(name)
    if memory_type is None:
        for size in (2, 1):  # the first words: `Decisions made on Tuesday`
            memory_type = memory_type or _LABELS.get(" ".join(name.split()[:size]))
    return None if memory_type is None else ((memory_type, words), True)


def _blocks(text: str) -> Iterator[_Block]:
    """Blocks in text order: a block starts at a line after a blank one, or at a line
    that opens a list item, a quote, a heading or a `Name:` prefix; other lines
    continue the block above (hard-wrapped prose)."""
    current: _Block | None = None
    position = 0
    for line in text.splitlines(keepends=True):
        start, position = position, position + len(line)
        if not line.strip():
            if current is not None:
                yield current
                current = None
            continue
        end = start + len(line.rstrip())
        lead = line_lead(line)
        # An unindented line after a list item starts a paragraph of its own.
        opens = _opens_block(line, lead) or (
            current is not None and current.is_list_item and line[:1] not in " \t"
        )
        if current is not None and not opens:
            current.end = end
            continue
        if current is not None:
            yield current
        current = _new_block(text, start, end, lead)
        if lead.is_heading:
            yield current  # a heading is never continued by the line below it
            current = None
    if current is not None:
        yield current


_PREFIX_REACH = 100  # a `[time] Name:` prefix ends before this many characters


def _has_prefix(text: str) -> Any:
    return _PREFIX.match(text) if ":" in text[:_PREFIX_REACH] else None


def _opens_block(line: str, lead: LineLead) -> bool:
    body = line.lstrip(LINE_BLANKS)
    if lead.end > len(line) - len(body):
        return True  # a list marker, quote mark, checkbox or heading
    return _has_prefix(body) is not None


def _new_block(text: str, start: int, end: int, lead: LineLead) -> _Block:
    block = _Block(start, end, lead.is_list_item, lead.is_heading, None, "", start + lead.end)
    if lead.open_checkbox:
        block.label_type, block.label_name = MemoryType.CONTEXT, "[ ]"
        return block
    # A speaker, then perhaps a label: `User: TODO: add the index`.
    for _ in range(2):
        prefix = _has_prefix(text[block.content_start : end])
        if prefix is None:
            break
        name = " ".join(prefix.group("name").lower().split())
        label_type = _LABELS.get(name)
        if label_type is None and (
            block.is_list_item or not _SPEAKER.fullmatch(prefix.group("name").strip())
        ):
            break  # in a list item, `Chen: rotate the keys` names an owner, not a speaker
        block.content_start += prefix.end()
        if label_type is not None:
            block.label_type, block.label_name = label_type, prefix.group("name").strip()
            break
    return block


def _sentences(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    """Sentence spans of text[start:end]; windows of at most MAX_SENTENCE_CHARS."""
    segment = text[start:end]
    sentence_start = 0
    for match in _SENTENCE_END.finditer(segment):
        if segment[max(0, match.start() - 6) : match.start() + 1].endswith(_ABBREVIATIONS):
            continue
        if match.end() == len(segment):
            continue
        yield from _windows(start + sentence_start, start + match.start() + 1)
        sentence_start = match.end()
    yield from _windows(start + sentence_start, end)


def _windows(start: int, end: int) -> Iterator[tuple[int, int]]:
    while end - start > MAX_SENTENCE_CHARS:
        yield start, start + MAX_SENTENCE_CHARS
        start += MAX_SENTENCE_CHARS
    if end > start:
        yield start, end


def _content(raw: str) -> str:
    content = " ".join(raw.split()).strip("*_ ")
    if len(content) > MAX_CONTENT_CHARS:
        cut = content.rfind(" ", 0, MAX_CONTENT_CHARS)
        content = content[: cut if cut > 0 else MAX_CONTENT_CHARS] + "…"
    return content


def _fingerprint(content: str) -> str:
    return " ".join("".join(ch if ch.isalnum() else " " for ch in content.lower()).split())
