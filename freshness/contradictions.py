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
2. `judge_pair`: rules on the two texts (freshness.contradiction_text reads them). Being
   close is never enough: a contradiction needs the same claim about the same subject,
   told apart in one of these ways, tried in order:
   - a switch away: one says it left X ("moved from X to Y", "replaced X with Y", "Y
     instead of X", "X was retired", "we no longer use X", "we left X") and the other
     still states X, and X is a name or a value, or they share another subject word;
   - opposite words (always/never, enabled/disabled, allowed/forbidden, ...) in the same
     claim: with the pair taken out, neither side says an ordinary word the other lacks
     while the other does too ("the docs repo is public" / "the infra repo is private"
     are about two repositories);
   - a negation of the same claim: one sentence negated, one not, the same words but
     for a few on one side only ("we do not store card numbers in S3" / "we store page
     views in S3" are about two things);
   - one value changed: a single slot where each side holds a value of the same kind (a
     number or version, a weekday, a frequency, a month, a name), everything else shared
     or said by one side only. Two or more slots changed, or ordinary words changed on
     both sides, is another subject (two cards of one template: "billing: port 8080,
     owner Alice" / "search: port 9090, owner Bob"); a value in the subject's place (the
     first words of a sentence, "Acme renews in March" / "Globex renews in March") is
     another subject too, unless the sentence names a role ("Alice is the lead").
   Never a contradiction: a step list (a runbook, a checklist) against anything, and a
   rule against its exception or a guarded warning ("do not X without Y", "X is allowed
   only for hotfixes"): one side qualifies what the other states.
   With no disagreement the pair is a duplicate at or above the duplicate threshold, or
   from `PARAPHRASE_SIMILARITY` when neither side has a value the other lacks; else it
   is compatible.

Every contradicting verdict carries a `confidence` (0..1): how often its rule was right
on the tuning half of tests/bench/contradiction_set (RULE_CONFIDENCE). Injection shows
only contradictions from `INJECT_CONFIDENCE` up; the others wait on the Review page.

Only the first `MAX_JUDGED_CHARS` characters of each text are read, and every pattern
runs on RE2 (linear in the text); the rest is set and list work on a bounded number of
words and sentences, so a 64 KiB entry costs what a short one does.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

from freshness.contradiction_text import (
    GENERIC_STEMS,
    OPPOSITES,
    Sentence,
    Text,
    analyse,
    stated_stems,
)
from freshness.contradiction_text import (
    MAX_JUDGED_CHARS as MAX_JUDGED_CHARS,  # read by callers and tests from here
)

# Below this cosine similarity two entries are not about the same thing (measured with
# the bundled embedder: docs/freshness.md, "Contradictions").
BAND_FLOOR = 0.40
# The team's default duplicate threshold (teams.models.Team.dedup_threshold's default,
# the bar search.duplicates_on_save applies); callers pass the team's own value.
DEFAULT_DUPLICATE_THRESHOLD = 0.92
# Paraphrases that agree and add no value of their own count as duplicates from here.
PARAPHRASE_SIMILARITY = 0.85
# At most this many candidates per save are judged (the closest first).
MAX_CANDIDATES = 20
# Quotes in the nudge are cut to this many characters (an ellipsis marks the cut).
MAX_QUOTE_CHARS = 120
# A contradiction nudge reaches the injected "Please review" from this confidence up.
INJECT_CONFIDENCE = 0.8
# A negated or opposite claim may add at most this many words of its own on one side.
MAX_EXTRA_WORDS = 3

# What each rule's verdict is worth: the lower end of the 95% Wilson interval of its
# precision on the tuning pairs, rounded down (the counts: docs/freshness.md,
# "Contradictions"; `python -m tests.bench contradictions` prints the tune split's).
RULE_CONFIDENCE = {
    "value": 0.95,
    "switch": 0.94,
    "negation": 0.83,
    "opposite": 0.74,
}

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
    # For a contradiction: how likely it is to be one (RULE_CONFIDENCE and similarity).
    confidence: float = 0.0
    rule: str = ""


@dataclass(frozen=True)
class _Finding:
    rule: str
    reason: str


# --------------------------------------------------------------------------- rules


def _switch_disagreement(new: Text, old: Text, shared: frozenset[str]) -> _Finding | None:
    """One side left X, the other still states X (positively, without leaving it too)."""
    for leaving, other in ((new, old), (old, new)):
        left = leaving.left & stated_stems(other) - other.left
        if not left:
            continue
        # X must say which thing: a name or value, or the pair shares another subject word.
        specific = any(word.kind for word in other.words if word.stem in left)
        if specific or (shared - left - GENERIC_STEMS):
            return _Finding(
                "switch", f"one says it moved away from '{other.surfaces(left)}', the other still states it"
            )
    return None


def _opposite_disagreement(new: Text, old: Text) -> _Finding | None:
    for first, second in OPPOSITES:
        for a, b in ((new, old), (old, new)):
            for sentence_a in a.sentences:
                if first not in sentence_a.lowered or second in sentence_a.lowered:
                    continue
                for sentence_b in b.sentences:
                    if second not in sentence_b.lowered or first in sentence_b.lowered:
                        continue
                    drop = {first, second}
                    if _same_claim(sentence_a, sentence_b, ignore=drop):
                        return _Finding("opposite", f"opposite words: '{first}' / '{second}'")
    return None


def _negation_disagreement(new: Text, old: Text) -> _Finding | None:
    for sentence_new in new.sentences:
        for sentence_old in old.sentences:
            if sentence_new.negated == sentence_old.negated:
                continue
            if _same_claim(sentence_new, sentence_old, ignore=set()):
                return _Finding("negation", "one states it, the other negates it")
    return None


def _same_claim(a: Sentence, b: Sentence, *, ignore: set[str]) -> bool:
    """The two sentences say the same thing but for the words in `ignore` (an opposite
    pair) and negation: they share a subject word, neither qualifies it with an exception
    or a guard the other lacks, and only one side says words of its own (at most
    MAX_EXTRA_WORDS of them)."""
    if a.exception != b.exception and (a.exception or b.exception):
        return False
    stems_a = {w.stem for w in a.words if w.surface not in ignore}
    stems_b = {w.stem for w in b.words if w.surface not in ignore}
    if not (stems_a & stems_b) - GENERIC_STEMS:
        return False
    only_a, only_b = stems_a - stems_b, stems_b - stems_a
    if only_a and only_b:
        return False
    return len(only_a | only_b) <= MAX_EXTRA_WORDS


def _value_disagreement(new: Text, old: Text) -> _Finding | None:
    """A single slot changed: each side has one run of values the other lacks, of the
    same kind; no ordinary word changed on both sides; not in the subject's place."""
    new_stems, old_stems = new.stems, old.stems
    new_slots = new.value_slots(excluding=old_stems)
    old_slots = old.value_slots(excluding=new_stems)
    if len(new_slots) > 1 or len(old_slots) > 1:
        return None  # two or more values changed: two subjects of one template
    if new.ordinary_only(excluding=old_stems) and old.ordinary_only(excluding=new_stems):
        return None  # both sides say things of their own: another subject or attribute
    if not (new_stems & old_stems) - GENERIC_STEMS:
        return None
    if not new_slots and not old_slots:
        return None
    if not new_slots or not old_slots:
        # "every two weeks" / "every week": a number on one side only, all else shared.
        (slot,) = new_slots or old_slots
        text = new if new_slots else old
        other = old if new_slots else new
        if slot.kinds == {"number"} and not text.ordinary_only(excluding=other.stems) and not slot.at_subject:
            return _Finding("value", f"a different quantity: '{slot.surface}' on one side only")
        return None
    (new_slot,), (old_slot,) = new_slots, old_slots
    if not _same_kind(new_slot.kinds, old_slot.kinds):
        return None
    if any(slot.at_subject and not slot.names_role for slot in (new_slot, old_slot)):
        return None  # "Acme renews in March" / "Globex renews in March": two subjects
    return _Finding("value", f"a different value: '{old_slot.surface}' -> '{new_slot.surface}'")


def _same_kind(first: frozenset[str], second: frozenset[str]) -> bool:
    """Runs of values of the same kinds ("June 6" / "May 2"; "Alice" / "Bob")."""
    names = {"name", "maybe-name"}
    return {"name" if kind in names else kind for kind in first} == {
        "name" if kind in names else kind for kind in second
    }


def _has_own_value(text: Text, other: Text) -> bool:
    return bool(text.value_slots(excluding=other.stems))


# --------------------------------------------------------------------------- judge


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
    new, old = analyse(new_text), analyse(old_text)
    shared = new.stems & old.stems
    subject = frozenset(shared - GENERIC_STEMS)
    if not subject:
        return Verdict(Label.UNRELATED, "no subject words in common")
    subject_words = tuple(new.surfaces(subject).split())
    if new.is_procedure or old.is_procedure:
        return Verdict(
            Label.COMPATIBLE, "a step list says how, not what is true: never a contradiction", subject_words
        )
    finding = (
        _switch_disagreement(new, old, shared)
        or _opposite_disagreement(new, old)
        or _negation_disagreement(new, old)
        or _value_disagreement(new, old)
    )
    if finding is not None:
        return Verdict(
            Label.CONTRADICTING,
            finding.reason,
            subject_words,
            confidence=RULE_CONFIDENCE[finding.rule],
            rule=finding.rule,
        )
    if similarity >= duplicate_threshold:
        return Verdict(Label.DUPLICATE, f"agrees, similarity {similarity:.2f}", subject_words)
    if similarity >= PARAPHRASE_SIMILARITY and not _has_own_value(new, old) and not _has_own_value(old, new):
        return Verdict(
            Label.DUPLICATE, f"agrees and adds no value, similarity {similarity:.2f}", subject_words
        )
    return Verdict(Label.COMPATIBLE, "same subject, no disagreement", subject_words)


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
