"""`python -m tests.bench extraction`: the offline draft extractor on the
labelled transcripts in tests/freshness/extraction_transcripts/.

Matching: a candidate matches an expected memory when its content contains every one
of the expected `words` (case-insensitive substrings). Each candidate matches at most
one expected memory and each expected memory at most one candidate (a maximum
bipartite matching per transcript, so the order of the labels does not matter).
- precision = matched candidates / all candidates;
- recall = matched expected memories / all expected memories;
- type accuracy = matched pairs whose candidate has the expected type / matched pairs
  (the type counts separately from the match).
Transcripts with nothing worth keeping count for precision only (their candidates are
false positives). The run is in-process and needs no database.

The rules were tuned on the first transcripts by the person who wrote both; the ones
listed under `held_out` were written after the rules were frozen, and get a row of
their own: the honest estimate is that row, not the tuned one.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.bench import harness
from tests.bench.hardening import adversarial_inputs

LABELLED_DIR = harness.REPO / "tests" / "freshness" / "extraction_transcripts"
LABELS_FILE = LABELLED_DIR / "expected.json"


@dataclass(frozen=True)
class Expected:
    type: str
    words: tuple[str, ...]

    def matched_by(self, content: str) -> bool:
        lowered = content.lower()
        return all(word.lower() in lowered for word in self.words)


@dataclass(frozen=True)
class Transcript:
    name: str
    text: str
    expected: tuple[Expected, ...]
    secrets: tuple[str, ...] = ()
    pii: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()  # look like PII or secrets but must survive the scrub
    held_out: bool = False  # written after the rules were frozen


@dataclass
class Score:
    candidates: int = 0
    expected: int = 0
    matched: int = 0
    typed_right: int = 0
    per_transcript: list[dict[str, Any]] = field(default_factory=list)

    @property
    def precision(self) -> float:
        return self.matched / self.candidates if self.candidates else 1.0

    @property
    def recall(self) -> float:
        return self.matched / self.expected if self.expected else 1.0

    @property
    def type_accuracy(self) -> float:
        return self.typed_right / self.matched if self.matched else 1.0


def load_transcripts(folder: Path = LABELLED_DIR) -> list[Transcript]:
    document = json.loads((folder / LABELS_FILE.name).read_text(encoding="utf-8"))
    held_out = set(document.get("held_out", ()))
    transcripts = []
    for name, label in sorted(document["transcripts"].items()):
        transcripts.append(
            Transcript(
                name=name,
                text=(folder / name).read_text(encoding="utf-8"),
                expected=tuple(Expected(e["type"], tuple(e["words"])) for e in label["expected"]),
                secrets=tuple(label.get("secrets", ())),
                pii=tuple(label.get("pii", ())),
                kept=tuple(label.get("kept", ())),
                held_out=name in held_out,
            )
        )
    return transcripts


def match(expected: tuple[Expected, ...], contents: list[str]) -> dict[int, int]:
    """Maximum bipartite matching (Kuhn's augmenting paths): expected index → candidate
    index. The sets are a handful of items, so the cubic worst case does not matter."""
    edges = [[c for c, content in enumerate(contents) if e.matched_by(content)] for e in expected]
    owner: dict[int, int] = {}  # candidate → expected

    def augment(e: int, visited: set[int]) -> bool:
        for c in edges[e]:
            if c in visited:
                continue
            visited.add(c)
            if c not in owner or augment(owner[c], visited):
                owner[c] = e
                return True
        return False

    for e in range(len(expected)):
        augment(e, set())
    return {e: c for c, e in owner.items()}


def score(transcripts: list[Transcript]) -> Score:
    from freshness.draft_extraction import extract_candidates

    total = Score()
    for transcript in transcripts:
        candidates = extract_candidates(transcript.text)
        pairs = match(transcript.expected, [c.content for c in candidates])
        typed_right = sum(
            1 for e, c in pairs.items() if candidates[c].type.value == transcript.expected[e].type
        )
        total.candidates += len(candidates)
        total.expected += len(transcript.expected)
        total.matched += len(pairs)
        total.typed_right += typed_right
        total.per_transcript.append(
            {
                "name": transcript.name,
                "candidates": len(candidates),
                "expected": len(transcript.expected),
                "matched": len(pairs),
                "typed_right": typed_right,
                "missed": [
                    list(transcript.expected[e].words)
                    for e in range(len(transcript.expected))
                    if e not in pairs
                ],
                "unmatched_candidates": [
                    f"{c.type.value}: {c.content}"
                    for i, c in enumerate(candidates)
                    if i not in pairs.values()
                ],
                "wrong_type": [
                    f"{candidates[c].type.value} (expected {transcript.expected[e].type}): {candidates[c].content}"
                    for e, c in pairs.items()
                    if candidates[c].type.value != transcript.expected[e].type
                ],
            }
        )
    return total


def adversarial_transcripts(size: int) -> dict[str, str]:
    """Shapes of exactly `size` characters that stress the block, sentence and cue
    passes, and the hardening section's shapes (which stress the scrub)."""
    fragments = {
        "decision words": "we decided to go with ",
        "blank lines": "\n",
        "fences": "```\n",
        "tilde fences": "~~~\n~~~~\n",
        "indent": "\n    x\n",
        "checkboxes": "- [ ] ",
        "speaker prefixes": "a: ",
        "labels": "TODO: ",
        "headings": "## Decisions\n",
        "phone digits": "+1 2",
        "digit runs": "1-2 ",
        "email shapes": "a.b@c",
        "sentence ends": ". ",
        "question marks": "?\n",
        "no punctuation": "word ",
        "from to": "switched from a to ",
        "abbreviations": "e.g. ",
        "list items": "- x\n",
        "dense decisions": "User: we decided to use tool x.\n",
    }
    shapes = {name: (f * (size // len(f) + 1))[:size] for name, f in fragments.items()}
    return shapes | {
        f"hardening: {name}": (text * (size // len(text) + 1))[:size]
        for name, text in adversarial_inputs().items()
    }


def worst_case_ms(size: int) -> tuple[str, float]:
    """The slowest adversarial shape of `size` characters (prepare + extract), in ms."""
    from freshness.draft_extraction import extract_candidates

    timings = {}
    for name, text in adversarial_transcripts(size).items():
        started = time.perf_counter()
        extract_candidates(text)
        timings[name] = (time.perf_counter() - started) * 1000
    name = max(timings, key=lambda shape: timings[shape])
    return name, timings[name]


def run(*, quick: bool = False) -> dict[str, Any]:
    """The extraction section. `quick` changes nothing: it takes well under a second."""
    transcripts = load_transcripts()
    print(f"\n== extraction: offline draft extractor, {len(transcripts)} labelled transcripts ==")
    started = time.perf_counter()
    result = score(transcripts)
    elapsed_ms = (time.perf_counter() - started) * 1000
    subsets = {
        "offline rules, all": result,
        "  tuning set": score([t for t in transcripts if not t.held_out]),
        "  held out": score([t for t in transcripts if t.held_out]),
    }
    harness.print_table(
        ["extractor", "transcripts", "expected", "candidates", "matched", "precision", "recall", "type acc."],
        [
            [
                name,
                str(len(subset.per_transcript)),
                str(subset.expected),
                str(subset.candidates),
                str(subset.matched),
                f"{subset.precision:.3f}",
                f"{subset.recall:.3f}",
                f"{subset.type_accuracy:.3f}",
            ]
            for name, subset in subsets.items()
        ],
    )
    print(f"in-process: {elapsed_ms:.0f} ms for the whole set (prepare + extract)")
    from freshness.draft_extraction import TRANSCRIPT_MAX_CHARS

    worst = {size: worst_case_ms(size) for size in (64 * 1024, TRANSCRIPT_MAX_CHARS)}
    for size, (shape, ms) in worst.items():
        print(f"slowest adversarial shape at {size // 1024} KiB: {shape!r}, {ms:.0f} ms (prepare + extract)")
    return {
        "section": "extraction",
        "how": __doc__,
        "labelled_set": str(LABELLED_DIR.relative_to(harness.REPO)),
        "in_process_ms": round(elapsed_ms, 1),
        "adversarial_worst_ms": {
            str(size): {"shape": shape, "ms": round(ms, 1)} for size, (shape, ms) in worst.items()
        },
        "rows": {
            name.strip(): {
                "transcripts": len(subset.per_transcript),
                "expected": subset.expected,
                "candidates": subset.candidates,
                "matched": subset.matched,
                "precision": round(subset.precision, 4),
                "recall": round(subset.recall, 4),
                "type_accuracy": round(subset.type_accuracy, 4),
            }
            for name, subset in subsets.items()
        },
        "per_transcript": result.per_transcript,
    }
