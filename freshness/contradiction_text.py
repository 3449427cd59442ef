"""How the contradiction detector (freshness.contradictions) reads a memory: its content
words with their kind (a value such as a number, a weekday or a name, or an ordinary
word), its sentences (each negated or not, qualified by an exception or a guard or not),
what it says was left behind ("moved from X", "X was retired"), its runs of values, and
whether it is a step list.

Only the first MAX_JUDGED_CHARS characters are read; the word pattern and the step
markers run on RE2 (linear in the text), the rest is list work on those words.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import re2

# Only the opening of each text is judged: memories state their point first, and the
# bound keeps the rules' cost independent of the entry's length.
MAX_JUDGED_CHARS = 1000
# A span of what was left ("from X to", "replaced X with") is at most this many words.
MAX_SPAN_WORDS = 4

_OPTIONS = re2.Options()
_OPTIONS.max_mem = 8 << 20
# A word: letters and digits, joined inside by ' . : / - (so "9:30", "eu-west-1",
# "Fly.io", "don't" and "3.12" stay whole, and a sentence's final period is not kept).
_WORD = re2.compile(r"[\pL\pN]+(?:['\x{2019}.:/-][\pL\pN]+)*", _OPTIONS)
# Step markers: a list item at a line's start ("1.", "2)", "-", "*"), "Step 3", or an
# inline "1. ... 2. ..." list.
_LIST_ITEM = re2.compile(r"(?m)^[ \t]*(?:[0-9]{1,2}[.)]|[-*\x{2022}])[ \t]+\S", _OPTIONS)
_STEP_WORD = re2.compile(r"(?i)\bstep[ \t]+[0-9]{1,2}\b", _OPTIONS)
_INLINE_ITEM = re2.compile(r"(?:^|\s)[1-9][.)][ \t]+[\pL]", _OPTIONS)
MIN_STEPS = 2


def _words(listed: str) -> frozenset[str]:
    return frozenset(listed.split())


STOP_WORDS = _words("""a an the and or but if then so of to in on at by for with from as into onto over
    under about than is are was were be been being am do does did done doing has have
    had having it its it's this that these those there here we our ours us you your they
    them their he she his her i me my mine can could should would will shall may might
    must need needs needed also just only still now currently anymore today again all
    any some each every per via which who whom whose what when where while how up down
    out off too very more most please team our their since yet longer""")
# Verbs and fillers that say nothing about the subject: "we use X" and "we use Y" share
# no subject, and a changed verb ("runs" / "is on") is no changed subject.
GENERIC_WORDS = _words("""use go run happen make get set keep live put handle work let take goes runs
    uses used using rely relies handles everything thing things""")
NEGATIONS = _words("not no never none nobody nothing neither nor without cannot stopped")
NEGATED_CONTRACTIONS = ("n't", "n\u2019t")
# A sentence with one of these qualifies a rule (an exception, a guard, a permission):
# "Hotfixes may go out on Fridays", "Do not X without Y", "Exception: ...".
EXCEPTION_WORDS = _words("""except exception exceptions exempt unless only if while during until without
    before outside may can""")
# Word pairs that state opposite things of one subject.
OPPOSITES = (
    ("always", "never"),
    ("enabled", "disabled"),
    ("enable", "disable"),
    ("allowed", "forbidden"),
    ("allowed", "prohibited"),
    ("allowed", "banned"),
    ("allowed", "disallowed"),
    ("required", "optional"),
    ("mandatory", "optional"),
    ("public", "private"),
    ("synchronous", "asynchronous"),
    ("sync", "async"),
    ("manual", "automatic"),
    ("manually", "automatically"),
    ("including", "excluding"),
    ("include", "exclude"),
    ("inclusive", "exclusive"),
    ("kept", "deleted"),
    ("kept", "removed"),
    ("keep", "delete"),
    ("keep", "remove"),
    ("fine", "forbidden"),
)
SWITCH_VERBS = _words("""switch switched switching move moved moving migrate migrated migrating change changed
    changing went go transition transitioned port ported replace replaced replacing swap
    swapped upgrade upgraded downgrade downgraded rewrite rewrote rewritten convert converted
    bumped bump raised lowered increased reduced took taken""")
# "X was retired" / "we dropped X": X was left.
RETIRE_WORDS = _words("""retired deprecated decommissioned cancelled canceled sunset sunsetted dropped
    removed abandoned left""")
PASSIVE_WORDS = _words("was were is are been be got")
# Words a reversal adds around its value that say nothing of the subject.
NEUTRAL_WORDS = _words("""since ago last later earlier new old instead across everywhere moved now
    services service spring summer autumn fall winter month quarter year week""")
WEEKDAYS = _words("monday tuesday wednesday thursday friday saturday sunday weekday weekend")
FREQUENCIES = _words("hourly daily nightly weekly biweekly fortnightly monthly quarterly yearly annually")
MONTHS = _words("january february march april may june july august september october november december")
# Number words read as the digits they stand for, so "first" and "1st" are one value.
NUMBER_WORDS = {
    "zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6",
    "seven": "7", "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12",
    "twenty": "20", "thirty": "30", "hundred": "100", "thousand": "1000", "once": "1x",
    "twice": "2x", "first": "1st", "second": "2nd", "third": "3rd", "fourth": "4th", "fifth": "5th",
}  # fmt: skip
# "Alice is the lead": a value in the subject's place that names who holds a role.
ROLE_AFTER = (("is", "the"), ("are", "the"), ("was", "the"), ("is", "our"), ("are", "our"))


def stem(word: str) -> str:
    """A crude suffix stripper: "deploys", "deployed", "deploying" -> "deploy";
    "uses", "used", "using", "use" -> "us". Consistent, not linguistic."""
    if any(char.isdigit() for char in word):
        return word
    if word.endswith(("'s", "\u2019s")):
        word = word[:-2]
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("ing") and len(word) > 5:
        word = word[:-3]
    elif word.endswith("ed") and len(word) > 4:
        word = word[:-2]
    elif word.endswith("s") and len(word) > 3 and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    if word.endswith("e") and len(word) > 2:
        word = word[:-1]
    return word


_WEEKDAY_STEMS = frozenset(stem(day) for day in WEEKDAYS)
GENERIC_STEMS = frozenset(stem(word) for word in GENERIC_WORDS)
_NEUTRAL_STEMS = frozenset(stem(word) for word in NEUTRAL_WORDS | SWITCH_VERBS | RETIRE_WORDS) | GENERIC_STEMS


@dataclass(frozen=True)
class Word:
    stem: str  # what is compared: "deploys" and "deployed" are both "deploy"
    surface: str  # what is shown: the word as written, lowercased
    # "number", "weekday", "frequency", "month", "name", "maybe-name" (capitalised at the
    # start of a sentence) or "" (an ordinary word)
    kind: str
    sentence: int  # which sentence of the text
    place: int  # its place among the sentence's content words
    token: int  # its place among the sentence's words, stop words included
    labelled: bool  # before a colon in its sentence ("Customer Acme: plan Team")


@dataclass(frozen=True)
class Slot:
    """A run of value words one text has and the other lacks."""

    kinds: frozenset[str]
    surface: str
    at_subject: bool  # the sentence's first content words, or its label before a colon
    names_role: bool  # "<slot> is the ...": a value that says who holds a role


@dataclass(frozen=True)
class Sentence:
    words: tuple[Word, ...]
    lowered: frozenset[str]  # every word, lowercased
    negated: bool
    exception: frozenset[str]  # the exception and guard words it says


@dataclass(frozen=True)
class Text:
    words: tuple[Word, ...]  # content words in order, stop words removed
    stems: frozenset[str]
    sentences: tuple[Sentence, ...]
    left: frozenset[str]  # stems of what it says was left behind
    is_procedure: bool
    tokens: tuple[tuple[str, ...], ...]  # each sentence's words, lowercased

    def surfaces(self, stems: Iterable[str]) -> str:
        """The words of `stems` as this text writes them, in its order."""
        wanted = set(stems)
        shown: list[str] = []
        for word in self.words:
            if word.stem in wanted and word.surface not in shown:
                shown.append(word.surface)
        return " ".join(shown)

    def value_slots(self, *, excluding: frozenset[str]) -> list[Slot]:
        """Runs of adjacent value words (in one sentence) whose stems are not in
        `excluding`: "June 6" is one slot, "2.2.7 ... June 6" two."""
        runs: list[list[Word]] = []
        for word in self.words:
            if not word.kind or word.stem in excluding:
                continue
            last = runs[-1][-1] if runs else None
            if last is not None and (word.sentence, word.place) == (last.sentence, last.place + 1):
                runs[-1].append(word)
            else:
                runs.append([word])
        return [self._slot(run) for run in runs]

    def _slot(self, run: list[Word]) -> Slot:
        first, last = run[0], run[-1]
        tokens = self.tokens[first.sentence]
        after = tuple(tokens[last.token + 1 : last.token + 3])
        return Slot(
            kinds=frozenset(word.kind for word in run),
            surface=" ".join(word.surface for word in run),
            at_subject=first.place == 0 or first.labelled,
            names_role=after in ROLE_AFTER,
        )

    def ordinary_only(self, *, excluding: frozenset[str]) -> list[Word]:
        """Ordinary words (no value, no generic or switching verb) whose stems are not in
        `excluding`: what this text says of its own."""
        return [
            word
            for word in self.words
            if not word.kind and word.stem not in excluding and word.stem not in _NEUTRAL_STEMS
        ]


def stated_stems(text: Text) -> frozenset[str]:
    """The stems of the text's sentences that are not negated."""
    return frozenset(
        word.stem for sentence in text.sentences if not sentence.negated for word in sentence.words
    )


def _kind(token: str, lowered: str, sentence_start: bool) -> str:
    if any(char.isdigit() for char in token) or lowered in NUMBER_WORDS:
        return "number"
    if stem(lowered) in _WEEKDAY_STEMS:
        return "weekday"
    if lowered in FREQUENCIES:
        return "frequency"
    if lowered in MONTHS and lowered != "may":
        return "month"
    # A name: a capital inside the word (GitHub, MySQL), a capital not at the start of a
    # sentence, or a dotted name (incident.io, Fly.io).
    if any(char.isupper() for char in token[1:]) or ("." in token and not token.endswith(".")):
        return "name"
    if token[:1].isupper():
        return "maybe-name" if sentence_start else "name"
    return ""


def analyse(text: str) -> Text:
    """The reading of the opening of `text`."""
    return _analyse_opening(str(text)[:MAX_JUDGED_CHARS])


# A new entry is judged against up to MAX_CANDIDATES others: each opening is read once.
# Keyed by the opening (at most MAX_JUDGED_CHARS), so the cache holds at most about 1 MB
# of text per process.
@functools.lru_cache(maxsize=1024)
def _analyse_opening(opening: str) -> Text:
    sentences: list[list[tuple[str, str, bool]]] = [[]]  # (token, lowered, labelled)
    previous_end = 0
    for match in _WORD.finditer(opening):
        token = match.group(0)
        between = opening[previous_end : match.start()]
        if previous_end and any(mark in between for mark in ".;!?\n"):
            sentences.append([])
        if ":" in between:
            # Words so far in this sentence were its label ("Customer Acme: plan Team").
            sentences[-1] = [(t, lw, True) for t, lw, _ in sentences[-1]]
        previous_end = match.end()
        sentences[-1].append((token, token.lower().replace("\u2019", "'"), False))
    read = [_sentence(index, tokens) for index, tokens in enumerate(sentences) if tokens]
    words = tuple(word for sentence, _left in read for word in sentence.words)
    return Text(
        words=words,
        stems=frozenset(word.stem for word in words),
        sentences=tuple(sentence for sentence, _left in read),
        left=frozenset(stem_ for _sentence_, left in read for stem_ in left),
        is_procedure=_is_procedure(opening),
        tokens=tuple(tuple(lowered for _t, lowered, _l in tokens) for tokens in sentences if tokens),
    )


def _sentence(index: int, tokens: list[tuple[str, str, bool]]) -> tuple[Sentence, set[str]]:
    words: list[Word] = []
    negated = False
    lowered_all = [lowered for _t, lowered, _l in tokens]
    for position, (token, lowered, labelled) in enumerate(tokens):
        if lowered in NEGATIONS or lowered.endswith(NEGATED_CONTRACTIONS):
            negated = True
            continue
        if lowered in STOP_WORDS:
            continue
        words.append(
            Word(
                stem=NUMBER_WORDS.get(lowered) or stem(lowered),
                surface=lowered,
                kind=_kind(token, lowered, position == 0),
                sentence=index,
                place=len(words),
                token=position,
                labelled=labelled,
            )
        )
    sentence = Sentence(
        words=tuple(words),
        lowered=frozenset(lowered_all),
        negated=negated,
        exception=frozenset(lowered_all) & EXCEPTION_WORDS,
    )
    return sentence, _left_behind(lowered_all)


def _left_behind(words: Sequence[str]) -> set[str]:
    """The stems a sentence says were left: X in "moved from X to Y", "replaced X with
    Y", "X was replaced by Y", "Y instead of X", "X was retired", "we dropped X", "we no
    longer use X", "stopped using X" (at most MAX_SPAN_WORDS words each)."""
    left: list[str] = []
    switching = False
    for index, word in enumerate(words):
        if word in SWITCH_VERBS:
            switching = True
        following = words[index + 1] if index + 1 < len(words) else ""
        passive = index > 0 and words[index - 1] in PASSIVE_WORDS
        if switching and word in {"from", "off"}:
            left += _span(words, index + 1, 1, stop={"to", "into", "for", "and"})
        if word in {"replaced", "replace", "replacing", "swapped"}:
            if passive or following == "by":
                left += _span(words, index - (2 if passive else 1), -1, stop=PASSIVE_WORDS | {"and"})
            else:
                left += _span(words, index + 1, 1, stop={"with", "by", "for"})
        if word == "instead" and following == "of":
            left += _span(words, index + 2, 1, stop={"for", "to", "in", "on", "at", "with"})
        if word in RETIRE_WORDS:
            if passive:
                left += _span(words, index - 2, -1, stop=PASSIVE_WORDS | {"and", "we"})
            else:
                left += _span(words, index + 1, 1, stop={"for", "in", "and", "from", "on"})
        longer = word == "longer" and index > 0 and words[index - 1] == "no"
        if longer or word == "stopped":
            start = index + 1
            if start < len(words) and stem(words[start]) in GENERIC_STEMS | {"do"}:
                start += 1
            left += _span(words, start, 1, stop={"for", "in", "on", "at", "and", "to"})
    return {stem(word) for word in left if word not in STOP_WORDS and word not in NEGATIONS}


def _span(words: Sequence[str], start: int, step: int, *, stop: Iterable[str]) -> list[str]:
    stops = set(stop)
    span: list[str] = []
    index = start
    while 0 <= index < len(words) and len(span) < MAX_SPAN_WORDS:
        if words[index] in stops:
            break
        span.append(words[index])
        index += step
    return span


def _is_procedure(opening: str) -> bool:
    """A runbook or a checklist: at least MIN_STEPS list items or "Step N" markers."""
    for pattern in (_LIST_ITEM, _STEP_WORD, _INLINE_ITEM):
        if _count_at_least(pattern, opening, MIN_STEPS):
            return True
    return False


def _count_at_least(pattern: object, text: str, wanted: int) -> bool:
    # Stops at the wanted count: a long list is not walked to its end.
    matches = enumerate(pattern.finditer(text), start=1)  # type: ignore[attr-defined]
    return any(found >= wanted for found, _match in matches)
