"""The contradiction set: labelled pairs of team memories (generated.jsonl, from
generate.py's families, and hand_written.jsonl), each `{id, family, split, category,
contradicts, old_key, old, new_key, new}`: `old` is saved first, `new` second, and
`contradicts` says whether a contradiction nudge should open.

`split` is `tune` (what the detector's rules were written and adjusted against) or
`held_out` (the figures reported; generated families are split whole, hand-written
pairs by a hash of their keys). Also here: the score of a run (precision and recall of
"a nudge opened") with Wilson intervals, and the template-like entries about different
subjects that must open no nudge.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
FILES = (HERE / "generated.jsonl", HERE / "hand_written.jsonl")
TUNE, HELD_OUT = "tune", "held_out"
TARGET_PRECISION = 0.95
TARGET_RECALL = 0.6


@dataclass(frozen=True)
class Pair:
    id: str
    family: str
    split: str
    category: str
    contradicts: bool
    old_key: str
    old: str
    new_key: str
    new: str


def load_pairs(split: str | None = None) -> list[Pair]:
    pairs = []
    for path in FILES:
        with path.open(encoding="utf-8") as handle:
            pairs.extend(Pair(**json.loads(line)) for line in handle if line.strip())
    return [pair for pair in pairs if split is None or pair.split == split]


def wilson(successes: int, trials: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson score interval of a proportion (sound at 0 and at n/n)."""
    if trials == 0:
        return (0.0, 1.0)
    p = successes / trials
    centre = (p + z * z / (2 * trials)) / (1 + z * z / trials)
    spread = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / (1 + z * z / trials)
    return (max(0.0, centre - spread), min(1.0, centre + spread))


@dataclass
class Score:
    true_positives: int = 0
    false_positives: int = 0
    false_negatives: int = 0
    true_negatives: int = 0
    mistakes: list[dict[str, Any]] = field(default_factory=list)

    def add(self, pair: Pair, flagged: bool, why: str = "") -> None:
        if flagged and pair.contradicts:
            self.true_positives += 1
        elif flagged:
            self.false_positives += 1
        elif pair.contradicts:
            self.false_negatives += 1
        else:
            self.true_negatives += 1
        if flagged != pair.contradicts:
            self.mistakes.append(
                {"id": pair.id, "old": pair.old, "new": pair.new, "flagged": flagged, "why": why}
            )

    @property
    def precision(self) -> float:
        flagged = self.true_positives + self.false_positives
        return self.true_positives / flagged if flagged else 1.0

    @property
    def recall(self) -> float:
        gold = self.true_positives + self.false_negatives
        return self.true_positives / gold if gold else 0.0

    def precision_interval(self) -> tuple[float, float]:
        return wilson(self.true_positives, self.true_positives + self.false_positives)

    def recall_interval(self) -> tuple[float, float]:
        return wilson(self.true_positives, self.true_positives + self.false_negatives)

    def as_dict(self) -> dict[str, Any]:
        return {
            "pairs": self.true_positives + self.false_positives + self.false_negatives + self.true_negatives,
            "tp": self.true_positives,
            "fp": self.false_positives,
            "fn": self.false_negatives,
            "tn": self.true_negatives,
            "precision": round(self.precision, 4),
            "precision_95": [round(x, 4) for x in self.precision_interval()],
            "recall": round(self.recall, 4),
            "recall_95": [round(x, 4) for x in self.recall_interval()],
            "mistakes": self.mistakes,
        }


def score(pairs: Iterable[Pair], flagged: dict[str, tuple[bool, str]]) -> Score:
    result = Score()
    for pair in pairs:
        hit, why = flagged[pair.id]
        result.add(pair, hit, why)
    return result


# --------------------------------------------------------------------------- templates

_SERVICES = [
    "billing", "search", "auth", "notifications", "ledger", "reporting", "checkout", "images",
    "exports", "webhooks", "admin", "mobile-bff", "inventory", "pricing", "email", "audit",
    "features", "invoices", "geo", "sessions", "media", "catalog", "fraud", "payouts", "recommendations",
]  # fmt: skip
_OWNERS = ["Payments", "Platform", "Search", "Growth", "Identity", "Data", "Mobile", "Infra"]
_PEOPLE = [
    "Alice",
    "Bob",
    "Priya",
    "Chen",
    "Marta",
    "Tomasz",
    "Aisha",
    "Diego",
    "Yuki",
    "Olu",
    "Sven",
    "Noor",
]
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday"]
_COMPANIES = [
    "Acme", "Globex", "Initech", "Umbrella", "Hooli", "Soylent", "Vandelay", "Tyrell", "Cyberdyne",
    "Wonka", "Oscorp", "Aperture", "Gringotts", "Monarch", "Nakatomi", "Wayne", "Stark", "Dunder",
    "Piper", "Massive", "Prestige", "Sirius", "Virtucon", "Rekall", "Zorin",
]  # fmt: skip


def template_entries(count: int = 100, *, seed: str = "templates") -> list[tuple[str, str]]:
    """`count` (key, text) entries written from four templates, each about a different
    subject (a service, a customer, an environment, a week of on-call) with its own
    values: what a team that keeps cards in its memory saves. No two are about the
    same subject, so none contradicts another."""
    rng = random.Random(seed)
    entries: list[tuple[str, str]] = []
    makers = [
        lambda i, s: (
            f"service-{s}-{i}",
            f"Service {s}-{i}: owned by {rng.choice(_OWNERS)}, on-call {rng.choice(_PEOPLE)}, "
            f"port {rng.choice([8080, 8081, 9000, 9090])}, deploys on {rng.choice(_DAYS)}s.",
        ),
        lambda i, s: (
            f"customer-{s}-{i}",
            f"Customer {_COMPANIES[i % len(_COMPANIES)]} {i}: plan {rng.choice(['Team', 'Business', 'Enterprise'])}, "
            f"renews in {rng.choice(['March', 'June', 'October'])}, contact {rng.choice(_PEOPLE)}.",
        ),
        lambda i, s: (
            f"env-{s}-{i}",
            f"Environment {s}-{i} database host is db-{s}-{i}.internal with a pool size of {rng.choice([10, 20, 40])}.",
        ),
        lambda i, s: (
            f"oncall-week-{i}",
            f"On-call week {i}: primary {rng.choice(_PEOPLE)}, secondary {rng.choice(_PEOPLE)}, "
            f"escalation {rng.choice(_OWNERS)} lead.",
        ),
    ]
    for i in range(count):
        entries.append(makers[i % len(makers)](i, _SERVICES[i % len(_SERVICES)]))
    return entries
