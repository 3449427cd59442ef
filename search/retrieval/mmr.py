"""Step 4, diversification: maximal marginal relevance (λ = 0.7) over the Jaccard
similarity of token sets picks the top k, so near-duplicates give way to other
answers. Pure: it sees only scores and texts."""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Mapping
from dataclasses import replace

from search.retrieval.scoring import Scored

MMR_LAMBDA = 0.7
_TOKEN = re.compile(r"\w+", re.UNICODE)


def diversify(scored: list[Scored], texts: Mapping[uuid.UUID, str], k: int) -> list[Scored]:
    """Up to `k` of `scored` (best first), each the one with the highest
    λ * score - (1 - λ) * max Jaccard similarity to those picked before it; ties go
    to the earlier one. Each comes back with that value in `mmr`. `texts` holds the
    text of every candidate.

    O(k·n) similarities: each candidate keeps its running maximum similarity to the
    picked set, updated only against the one picked last."""
    tokens = [token_set(texts[item.candidate.memory_id]) for item in scored]
    redundancy = [0.0] * len(scored)
    remaining = list(range(len(scored)))  # indices into `scored`, in its order
    picked: list[Scored] = []
    while remaining and len(picked) < k:
        best_position, best_value = 0, -math.inf
        for position, index in enumerate(remaining):
            value = MMR_LAMBDA * scored[index].score - (1 - MMR_LAMBDA) * redundancy[index]
            if value > best_value:
                best_position, best_value = position, value
        chosen = remaining.pop(best_position)
        picked.append(replace(scored[chosen], mmr=round(best_value, 6)))
        for index in remaining:
            redundancy[index] = max(redundancy[index], jaccard(tokens[index], tokens[chosen]))
    return picked


def token_set(text: str) -> set[str]:
    """The lowercase word tokens of `text` (a linear-time pattern)."""
    return set(_TOKEN.findall(text.lower()))


def jaccard(a: set[str], b: set[str]) -> float:
    if not a and not b:
        return 0.0
    return len(a & b) / len(a | b)
