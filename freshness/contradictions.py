"""Contradiction detection between two team memories, without a model beyond the
bundled embedder: a pure module (no database) that the save flow and the beat jobs call.

Two steps:

1. Candidates: the team's active entries whose vector is close to the new entry's
   (cosine similarity, as pgvector's `<=>` compares them in search.selectors), from
   `BAND_FLOOR` up; below it two entries are not about the same thing. After indexing,
   freshness.services judges every candidate up to 1: a near duplicate that disagrees
   is saved rather than refused (the save's duplicate check asks `judge_pair` through
   search.texts_disagree), so it must be judged here too (docs/freshness.md,
   "Contradictions"). `select_candidates` is the band below the duplicate threshold,
   as a pure function.
2. `judge_pair`: rules on the two texts. They must share subject words (content words
   after stop words, lightly stemmed) and disagree in one of these ways, tried in order:
   - a switch: one says "switched/moved/migrated from X to Y", "replaced X with Y" or
     "Y instead of X", and the other still states X;
   - opposite always/never, or a pair of opposites (enabled/disabled, allowed/forbidden,
     required/optional, ...);
   - negation asymmetry: one is negated ("not", "never", "no longer", "n't",
     "stopped") and the other is not, unless the two are one sentence with one ordinary
     word swapped ("we remove feature flags" / "we do not remove experiment flags");
   - a different value for the same subject: what only one text says and what only the
     other says are both short (at most 3 words each), and hold a value of the same kind
     (a number or version, a weekday, a frequency, a month, a name such as
     "Stripe"/"Paddle"; a capitalised first word such as "Alice"/"Bob" only when it is
     the one word either side changes, in the same place); or a number only one side
     has ("every two weeks" / "every week"). Ordinary words swapped ("is served on" /
     "listens on") are synonyms as often as values, and never count.
   A generic verb alone ("use", "run", "go") is no shared subject, except when it is all
   but the one swapped word ("we use Stripe" / "we use Paddle").
   With no disagreement the pair is a duplicate at or above the duplicate threshold, or
   from `PARAPHRASE_SIMILARITY` when neither side has a value the other lacks; else it
   is compatible (a refinement or an addition). A pair at or above the threshold is
   judged like any other: the bundled embedder puts "port is 5432" and "port is 6432"
   at 0.98, so a disagreement wins over the similarity.

Only the first `MAX_JUDGED_CHARS` characters of each text are read, and every pattern
runs on RE2 (google-re2, linear in the text, as teams/scrubber.py); the rest is set and
list work on a bounded number of words, so a 64 KiB entry costs what a short one does.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

import re2

# Only the opening of each text is judged: memories state their point first, and the
# bound keeps the rules' cost independent of the entry's length.
MAX_JUDGED_CHARS = 1000
# Below this cosine similarity two entries are not about the same thing. Measured on
# tests/freshness/contradiction_pairs.jsonl with the bundled all-MiniLM-L6-v2: unrelated
# pairs reach 0.35, pairs about one thing rarely fall under 0.45 (the lowest, "we pin
# dependencies with Poetry" / "... with uv", is 0.398 and is missed).
BAND_FLOOR = 0.40
# The team's default duplicate threshold (teams.models.Team.dedup_threshold's default,
# the bar search.duplicates_on_save applies); callers pass the team's own value.
DEFAULT_DUPLICATE_THRESHOLD = 0.92
# Paraphrases that agree and add no value of their own count as duplicates from here.
PARAPHRASE_SIMILARITY = 0.85
# At most this many candidates per save are judged (the closest first).
MAX_CANDIDATES = 20
# Each side of a value substitution says at most this many words the other does not.
MAX_SUBSTITUTED_WORDS = 3
# Quotes in the nudge are cut to this many characters (an ellipsis marks the cut).
MAX_QUOTE_CHARS = 120

K = TypeVar("K")


class Label(StrEnum):
    CONTRADICTING = "contradicting"
    COMPATIBLE = "compatible"
    DUPLICATE = "duplicate"
    UNRELATED = "unrelated"


@dataclass(frozen=True)
class Verdict:
    label: Label
    reason: str
    # The content words both texts share (as the new text writes them, lowercased) that
    # make the pair about the same thing; empty when they share none.
    subject: tuple[str, ...] = ()


# --------------------------------------------------------------------------- words


def _words(listed: str) -> frozenset[str]:
    return frozenset(listed.split())


_OPTIONS = re2.Options()
_OPTIONS.max_mem = 8 << 20
# A word: letters and digits, joined inside by ' . : / - (so "9:30", "eu-west-1",
# "Fly.io", "don't" and "3.12" stay whole, and a sentence's final period is not kept).
_WORD = re2.compile(r"[\pL\pN]+(?:['\x{2019}.:/-][\pL\pN]+)*", _OPTIONS)

STOP_WORDS = _words("""a an the and or but if then so of to in on at by for with from as into onto over
    under about than is are was were be been being am do does did done doing has have
    had having it its it's this that these those there here we our ours us you your they
    them their he she his her i me my mine can could should would will shall may might
    must need needs needed also just only still now currently anymore today again all
    any some each every per via which who whom whose what when where while how up down
    out off too very more most please team our their since yet""")
# Verbs that say nothing about the subject: "we use X" and "we use Y" share no subject.
GENERIC_WORDS = _words("use go run happen make get set keep live put handle work let take")
NEGATIONS = _words("not no never none nobody nothing neither nor without cannot")
NEGATED_CONTRACTIONS = ("n't", "n\u2019t")
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
    ("including", "excluding"),
    ("include", "exclude"),
    ("inclusive", "exclusive"),
    ("manually", "automatically"),
    ("kept", "deleted"),
    ("kept", "removed"),
    ("keep", "delete"),
    ("keep", "remove"),
)
SWITCH_VERBS = _words("""switch switched switching move moved moving migrate migrated migrating change changed
    changing went go transition transitioned port ported replace replaced replacing swap
    swapped upgrade upgraded downgrade downgraded rewrite rewrote rewritten convert converted""")
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


@dataclass(frozen=True)
class _Word:
    stem: str  # what is compared: "deploys" and "deployed" are both "deploy"
    surface: str  # what is shown: the word as written, lowercased
    # "number", "weekday", "frequency", "month", "name", "maybe-name" (capitalised at the
    # start of a sentence) or "" (an ordinary word)
    kind: str


@dataclass(frozen=True)
class _Text:
    words: tuple[_Word, ...]  # content words in order, stop words removed
    stems: frozenset[str]  # the stems of `words`
    lowered: tuple[str, ...]  # every word, lowercased, in order (for phrases)
    negated: bool

    def surfaces(self, stems: Iterable[str]) -> str:
        """The words of `stems` as this text writes them, in its order."""
        wanted = set(stems)
        shown: list[str] = []
        for word in self.words:
            if word.stem in wanted and word.surface not in shown:
                shown.append(word.surface)
        return " ".join(shown)


def _stem(word: str) -> str:
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


def _kind(token: str, lowered: str, sentence_start: bool) -> str:
    if any(char.isdigit() for char in token) or lowered in NUMBER_WORDS:
        return "number"
    if _stem(lowered) in _WEEKDAY_STEMS:
        return "weekday"
    if lowered in FREQUENCIES:
        return "frequency"
    if lowered in MONTHS and lowered != "may":
        return "month"
    # A name: a capital inside the word (GitHub, MySQL), or a capital not at the start of
    # a sentence. At a sentence's start a capital may be a name ("Alice") or not
    # ("Deploys"); _same_kind decides from the other text.
    if any(char.isupper() for char in token[1:]):
        return "name"
    if token[:1].isupper():
        return "maybe-name" if sentence_start else "name"
    return ""


_WEEKDAY_STEMS = frozenset(_stem(day) for day in WEEKDAYS)
_GENERIC_STEMS = frozenset(_stem(word) for word in GENERIC_WORDS)


def _analyse(text: str) -> _Text:
    """The content words of the opening of `text`, and whether it is negated."""
    return _analyse_opening(str(text)[:MAX_JUDGED_CHARS])


# A new entry is judged against up to MAX_CANDIDATES others, and a batch's entries
# against each other: each opening is read once. Keyed by the opening (at most
# MAX_JUDGED_CHARS), so the cache holds at most about 1 MB of text per process.
@functools.lru_cache(maxsize=1024)
def _analyse_opening(opening: str) -> _Text:
    words: list[_Word] = []
    lowered_words: list[str] = []
    negated = False
    previous_end = 0
    for match in _WORD.finditer(opening):
        token = match.group(0)
        lowered = token.lower().replace("\u2019", "'")
        between = opening[previous_end : match.start()]
        sentence_start = previous_end == 0 or any(mark in between for mark in ".;:!?\n")
        previous_end = match.end()
        lowered_words.append(lowered)
        if lowered in NEGATIONS or lowered.endswith(NEGATED_CONTRACTIONS):
            negated = True
            continue
        if lowered in STOP_WORDS:
            continue
        stem = NUMBER_WORDS.get(lowered) or _stem(lowered)
        words.append(_Word(stem=stem, surface=lowered, kind=_kind(token, lowered, sentence_start)))
    # "no longer" is caught by "no"; "stopped using" and "dropped" say the same.
    if any(word in {"stopped", "dropped", "abandoned", "retired", "deprecated"} for word in lowered_words):
        negated = True
    return _Text(
        words=tuple(words),
        stems=frozenset(word.stem for word in words),
        lowered=tuple(lowered_words),
        negated=negated,
    )


# --------------------------------------------------------------------------- rules


def _switched_away(text: _Text) -> frozenset[str]:
    """The stems a text says were left: X in "moved from X to Y", "replaced X with Y",
    "Y instead of X" (at most four words each)."""
    words = text.lowered
    left: set[str] = set()
    switching = False
    for index, word in enumerate(words):
        if word in SWITCH_VERBS:
            switching = True
        if switching and word == "from":
            left.update(_span_until(words, index + 1, stop={"to", "into", "for"}))
        if word in {"replaced", "replace", "replacing", "swapped"}:
            left.update(_span_until(words, index + 1, stop={"with", "by", "for"}))
        if word == "instead" and index + 1 < len(words) and words[index + 1] == "of":
            left.update(_span_until(words, index + 2, stop={"for", "to", "in", "on", "at", "with"}))
    return frozenset(_stem(word) for word in left if word not in STOP_WORDS)


def _span_until(words: Sequence[str], start: int, *, stop: set[str]) -> list[str]:
    span: list[str] = []
    for word in words[start : start + 4]:
        if word in stop:
            break
        span.append(word)
    return span


def _switch_disagreement(new: _Text, old: _Text) -> str | None:
    for switching, other in ((new, old), (old, new)):
        left = _switched_away(switching)
        if not left:
            continue
        stated = left & other.stems
        if stated and not (_switched_away(other) & stated):
            return f"one says it moved away from '{other.surfaces(stated)}', the other still states it"
    return None


def _opposite_disagreement(new: _Text, old: _Text) -> str | None:
    new_words, old_words = set(new.lowered), set(old.lowered)
    for first, second in OPPOSITES:
        if (first in new_words and second in old_words and second not in new_words) or (
            second in new_words and first in old_words and first not in new_words
        ):
            return f"opposite words: '{first}' / '{second}'"
    return None


def _negation_disagreement(new: _Text, old: _Text) -> str | None:
    # "Feature branches are deleted" / "Release branches are not deleted": the same
    # sentence about another thing, not the same statement negated.
    if new.negated != old.negated and not _is_single_substitution(new, old):
        return "one states it, the other negates it"
    return None


def _value_disagreement(new: _Text, old: _Text, subject: frozenset[str]) -> str | None:
    """What only one text says and what only the other says are both short and hold a
    value of the same kind: "port 5432" / "port 6432", "uses Stripe" / "uses Paddle"."""
    only_new = [(i, word) for i, word in enumerate(new.words) if word.stem not in old.stems]
    only_old = [(i, word) for i, word in enumerate(old.words) if word.stem not in new.stems]
    if len({w.stem for _, w in only_new}) > MAX_SUBSTITUTED_WORDS:
        return None
    if len({w.stem for _, w in only_old}) > MAX_SUBSTITUTED_WORDS:
        return None
    about = new.surfaces(subject)
    if not only_new or not only_old:
        # "every two weeks" / "every week": the one word only one side has is a number.
        extra = only_new or only_old
        if len(extra) == 1 and extra[0][1].kind == "number":
            return f"a different quantity for '{about}': '{extra[0][1].surface}' on one side only"
        return None
    # A sentence-initial word is a value only when it is all that either side changes.
    lone = len(only_old) == 1 and len(only_new) == 1
    for old_index, old_word in only_old:
        for new_index, new_word in only_new:
            if _same_kind(old_word.kind, new_word.kind, aligned=lone and old_index == new_index):
                return f"a different value for '{about}': '{old_word.surface}' -> '{new_word.surface}'"
    return None


def _same_kind(first: str, second: str, *, aligned: bool) -> bool:
    """Two values of one kind. A capitalised first word of a sentence ("Alice", but also
    "Deploys") is a name only against a name, or when it is the one word that changed in
    the same place ("Alice is the lead" / "Bob is the lead")."""
    if not first or not second:
        return False
    names = {"name", "maybe-name"}
    if first in names and second in names:
        return aligned or not (first == second == "maybe-name")
    return first == second


def _has_own_value(text: _Text, other: _Text) -> bool:
    return any(word.kind and word.stem not in other.stems for word in text.words)


def judge_pair(
    new_text: str,
    old_text: str,
    similarity: float,
    *,
    duplicate_threshold: float = DEFAULT_DUPLICATE_THRESHOLD,
    band_floor: float = BAND_FLOOR,
) -> Verdict:
    """How the newly saved `new_text` stands to the existing `old_text`, given the cosine
    similarity of their vectors. A pair at or above `duplicate_threshold` is still judged
    by the rules: the bundled embedder puts "port is 5432" and "port is 6432" at 0.98."""
    if similarity < band_floor:
        return Verdict(Label.UNRELATED, f"similarity {similarity:.2f} is below the band ({band_floor:.2f})")
    new, old = _analyse(new_text), _analyse(old_text)
    shared = new.stems & old.stems
    subject = frozenset(shared - _GENERIC_STEMS)
    if not subject and not _is_single_substitution(new, old):
        return Verdict(Label.UNRELATED, "no subject words in common")
    # "we use Stripe" / "we use Paddle": the generic verb is all they share, and enough.
    subject = subject or frozenset(shared)
    subject_words = tuple(new.surfaces(subject).split())
    for reason in (
        _switch_disagreement(new, old),
        _opposite_disagreement(new, old),
        _negation_disagreement(new, old),
        _value_disagreement(new, old, subject),
    ):
        if reason is not None:
            return Verdict(Label.CONTRADICTING, reason, subject_words)
    if similarity >= duplicate_threshold:
        return Verdict(Label.DUPLICATE, f"agrees, similarity {similarity:.2f}", subject_words)
    if similarity >= PARAPHRASE_SIMILARITY and not _has_own_value(new, old) and not _has_own_value(old, new):
        return Verdict(
            Label.DUPLICATE, f"agrees and adds no value, similarity {similarity:.2f}", subject_words
        )
    return Verdict(Label.COMPATIBLE, "same subject, no disagreement", subject_words)


def _is_single_substitution(new: _Text, old: _Text) -> bool:
    """ "we use Stripe" / "we use Paddle": the same words but one, in the same place."""
    if len(new.words) != len(old.words) or not new.words:
        return False
    differing = [i for i, (a, b) in enumerate(zip(new.words, old.words, strict=True)) if a.stem != b.stem]
    return len(differing) == 1 and len(new.words) > 1


# --------------------------------------------------------------------------- candidates


def select_candidates(
    new_vector: Sequence[float],
    entries: Iterable[tuple[K, Sequence[float]]],
    *,
    duplicate_threshold: float = DEFAULT_DUPLICATE_THRESHOLD,
    band_floor: float = BAND_FLOOR,
    limit: int = MAX_CANDIDATES,
) -> list[tuple[K, float]]:
    """The entries (key, vector) whose cosine similarity to `new_vector` lies in
    `[band_floor, duplicate_threshold)`, closest first, at most `limit`. Vectors of
    another length, or of zero length, are skipped. This filters what the caller passes
    (the nearest active entries, as pgvector finds them); it does not search a team."""
    new_norm = math.sqrt(math.fsum(value * value for value in new_vector))
    if new_norm == 0:
        return []
    kept: list[tuple[K, float]] = []
    for key, vector in entries:
        if len(vector) != len(new_vector):
            continue
        norm = math.sqrt(math.fsum(value * value for value in vector))
        if norm == 0:
            continue
        similarity = math.fsum(a * b for a, b in zip(new_vector, vector, strict=True)) / (new_norm * norm)
        if band_floor <= similarity < duplicate_threshold:
            kept.append((key, similarity))
    kept.sort(key=lambda item: item[1], reverse=True)
    return kept[:limit]


# --------------------------------------------------------------------------- nudge


def contradiction_message(*, old_text: str, new_text: str, max_quote_chars: int = MAX_QUOTE_CHARS) -> str:
    """The nudge as the seed phrases it: "You previously recorded 'old'. Update to 'new'?"."""
    old, new = _quote(old_text, max_quote_chars), _quote(new_text, max_quote_chars)
    return f"You previously recorded '{old}'. Update to '{new}'?"


def _quote(text: str, limit: int) -> str:
    # Whitespace collapsed on a bounded slice; a trailing period is dropped inside quotes.
    flat = " ".join(str(text)[: limit * 4].split()).rstrip(".")
    if len(flat) <= limit:
        return flat
    return flat[: limit - 1].rstrip() + "…"
