"""The scrubber's recall and false-positive rate on the labelled corpus
(tests/teams/credential_corpus.py), so the figures `make bench` reports cannot drop
unnoticed. No timing here: speed is the bench's (section `scrubber`)."""

from __future__ import annotations

from teams.scrubber import scrub
from tests.teams.credential_corpus import negatives, positives

MIN_RECALL = 0.97
MAX_FALSE_POSITIVE_RATE = 0.01


def test_the_corpus_is_large_enough() -> None:
    assert len(positives()) >= 300
    assert len(negatives()) >= 300
    assert len({p.label for p in positives()}) >= 100


def test_recall_on_the_credential_corpus() -> None:
    items = positives()
    missed = [(p.label, p.text) for p in items if p.secret in scrub(p.text).text]

    recall = 1 - len(missed) / len(items)

    assert recall >= MIN_RECALL, f"recall {recall:.3f}; missed {len(missed)}: {missed[:20]}"


def test_false_positive_rate_on_the_near_miss_corpus() -> None:
    items = negatives()
    changed = [(n.label, n.text, scrub(n.text).text) for n in items if scrub(n.text).text != n.text]

    rate = len(changed) / len(items)

    assert rate <= MAX_FALSE_POSITIVE_RATE, f"false positives {rate:.3f}: {changed[:20]}"
