"""The contradiction detector's labelled set (contradiction_pairs.jsonl) and its scorer,
shared by the quality gate in test_contradictions.py and `python -m tests.bench contradictions`.

Each line is {"old", "new", "label", "domain"}: `old` is an entry the team already has,
`new` the one being saved, `label` one of freshness.contradictions.Label.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from freshness.contradictions import (
    DEFAULT_DUPLICATE_THRESHOLD,
    Label,
    Verdict,
    judge_pair,
    select_candidates,
)
from search.embeddings.base import EmbeddingProvider, Profile
from search.embeddings.local import LocalOnnxProvider

PAIRS_PATH = Path(__file__).with_name("contradiction_pairs.jsonl")
LABELS = tuple(Label)
TARGET_PRECISION = 0.8
TARGET_RECALL = 0.6


@dataclass(frozen=True)
class Pair:
    old: str
    new: str
    label: Label
    domain: str


def load_pairs(path: Path = PAIRS_PATH) -> list[Pair]:
    pairs = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                row = json.loads(line)
                pairs.append(Pair(row["old"], row["new"], Label(row["label"]), row.get("domain", "")))
    return pairs


def bundled_embedder() -> EmbeddingProvider:
    """The in-process ONNX model every install has (search/embeddings/local.py),
    whatever embedding profile the deployment configures."""
    return LocalOnnxProvider(Profile(name="bundled", provider="local"))


def embed_pairs(pairs: Sequence[Pair], provider: EmbeddingProvider) -> dict[str, list[float]]:
    texts = sorted({text for pair in pairs for text in (pair.old, pair.new)})
    return dict(zip(texts, provider.embed_documents(texts), strict=True))


Detector = Callable[[Pair, dict[str, list[float]]], Verdict]


def judge_every_pair(pair: Pair, vectors: dict[str, list[float]]) -> Verdict:
    """The rules on every pair, whatever its similarity."""
    similarity = sum(a * b for a, b in zip(vectors[pair.new], vectors[pair.old], strict=True))
    return judge_pair(pair.new, pair.old, similarity)


def as_the_save_flow_sees_it(pair: Pair, vectors: dict[str, list[float]]) -> Verdict:
    """Only band candidates are judged: at or above the duplicate threshold the save's
    duplicate check (search.duplicates_on_save) has refused or superseded the entry already."""
    kept = select_candidates(vectors[pair.new], [("old", vectors[pair.old])])
    if kept:
        return judge_pair(pair.new, pair.old, kept[0][1])
    similarity = sum(a * b for a, b in zip(vectors[pair.new], vectors[pair.old], strict=True))
    if similarity >= DEFAULT_DUPLICATE_THRESHOLD:
        return Verdict(Label.DUPLICATE, "taken by the duplicate check")
    return Verdict(Label.UNRELATED, "below the band")


@dataclass
class Score:
    confusion: dict[Label, dict[Label, int]]  # gold -> predicted -> count
    mistakes: list[tuple[Pair, Verdict]]

    @property
    def true_positives(self) -> int:
        return self.confusion[Label.CONTRADICTING][Label.CONTRADICTING]

    @property
    def precision(self) -> float:
        predicted = sum(row[Label.CONTRADICTING] for row in self.confusion.values())
        return self.true_positives / predicted if predicted else 0.0

    @property
    def recall(self) -> float:
        gold = sum(self.confusion[Label.CONTRADICTING].values())
        return self.true_positives / gold if gold else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "precision": round(self.precision, 4),
            "recall": round(self.recall, 4),
            "confusion": {str(g): {str(p): n for p, n in row.items()} for g, row in self.confusion.items()},
            "mistakes": [
                {
                    "old": pair.old,
                    "new": pair.new,
                    "label": str(pair.label),
                    "predicted": str(v.label),
                    "reason": v.reason,
                }
                for pair, v in self.mistakes
            ],
        }


def score(pairs: Sequence[Pair], vectors: dict[str, list[float]], detector: Detector) -> Score:
    confusion = {gold: dict.fromkeys(LABELS, 0) for gold in LABELS}
    mistakes = []
    for pair in pairs:
        verdict = detector(pair, vectors)
        confusion[pair.label][verdict.label] += 1
        if verdict.label != pair.label:
            mistakes.append((pair, verdict))
    return Score(confusion=confusion, mistakes=mistakes)
