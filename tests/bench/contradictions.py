"""`python -m tests.bench contradictions`: the contradiction detector on its
labelled set, tests/freshness/contradiction_pairs.jsonl.

Each pair's texts are embedded with the bundled model (search/embeddings/local.py,
in-process, offline) and judged by freshness.contradictions. Two rows:

- judge: the rules on every pair, at its real similarity;
- save flow: only pairs in the candidate band (select_candidates) are judged; a pair at
  or above the duplicate threshold is taken by the save's duplicate check first.

Precision and recall are of the label "contradicting". Target: precision >= 0.8 at
recall >= 0.6 with no model beyond the bundled embedder. No database is touched.
"""

from __future__ import annotations

import time
from typing import Any

from tests.bench import harness


def run(*, quick: bool = False) -> dict[str, Any]:
    """`quick` changes nothing: the set embeds in a few seconds."""
    from freshness.contradictions import BAND_FLOOR, DEFAULT_DUPLICATE_THRESHOLD
    from tests.freshness import labelled_pairs as lp

    pairs = lp.load_pairs()
    counts = {str(label): sum(1 for pair in pairs if pair.label == label) for label in lp.LABELS}
    print(
        f"\n== contradictions: {len(pairs)} labelled pairs ({', '.join(f'{n} {k}' for k, n in counts.items())}) =="
    )
    print(
        f"band [{BAND_FLOOR:.2f}, {DEFAULT_DUPLICATE_THRESHOLD:.2f}) of cosine similarity, "
        f"bundled embedder, target precision >= {lp.TARGET_PRECISION} at recall >= {lp.TARGET_RECALL}"
    )
    started = time.perf_counter()
    vectors = lp.embed_pairs(pairs, lp.bundled_embedder())
    embed_seconds = time.perf_counter() - started

    results: dict[str, Any] = {}
    rows = []
    for name, detector in (("judge", lp.judge_every_pair), ("save flow", lp.as_the_save_flow_sees_it)):
        started = time.perf_counter()
        scored = lp.score(pairs, vectors, detector)
        judge_ms = (time.perf_counter() - started) * 1000 / len(pairs)
        meets = scored.precision >= lp.TARGET_PRECISION and scored.recall >= lp.TARGET_RECALL
        rows.append(
            [
                name,
                f"{scored.precision:.3f}",
                f"{scored.recall:.3f}",
                str(scored.true_positives),
                "yes" if meets else "NO",
                f"{judge_ms:.2f}",
            ]
        )
        results[name] = {**scored.as_dict(), "meets_target": meets, "ms_per_pair": round(judge_ms, 3)}
    harness.print_table(["row", "precision", "recall", "tp", "target", "ms/pair"], rows)

    for name in results:
        print(f"\nconfusion ({name}), gold rows x predicted columns:")
        confusion = results[name]["confusion"]
        labels = list(confusion)
        harness.print_table(
            ["gold \\ predicted", *labels],
            [[gold, *(str(confusion[gold][predicted]) for predicted in labels)] for gold in labels],
        )
    print(f"\nembedded {2 * len(pairs)} texts ({len(vectors)} distinct) in {embed_seconds:.1f} s")
    return {
        "pairs": len(pairs),
        "label_counts": counts,
        "band": [BAND_FLOOR, DEFAULT_DUPLICATE_THRESHOLD],
        "target": {"precision": lp.TARGET_PRECISION, "recall": lp.TARGET_RECALL},
        "rows": results,
    }
