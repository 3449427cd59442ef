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
    picked set, updated only against the one picked last. Each similarity is two
    machine-word operations over the texts' token bitsets (token_bits), not a set
    intersection and union in Python."""
    bits = token_bits([texts[item.candidate.memory_id] for item in scored])
    sizes = [b.bit_count() for b in bits]
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
        chosen_bits, chosen_size = bits[chosen], sizes[chosen]
        for index in remaining:
            similarity = bit_jaccard(bits[index], sizes[index], chosen_bits, chosen_size)
            if similarity > redundancy[index]:
                redundancy[index] = similarity
    return picked


def token_bits(texts: list[str]) -> list[int]:
    """Each text's token set (token_set) as the bits of an int, over one vocabulary
    numbered as first seen: a set's size is a popcount, a shared part an `&`."""
    vocabulary: dict[str, int] = {}
    numbered = [
        [vocabulary.setdefault(token, len(vocabulary)) for token in token_set(text)] for text in texts
    ]
    width = (len(vocabulary) + 7) // 8
    sets: list[int] = []
    for positions in numbered:
        bitmap = bytearray(width)
        for position in positions:
            bitmap[position >> 3] |= 1 << (position & 7)
        sets.append(int.from_bytes(bitmap, "little"))
    return sets


def bit_jaccard(a: int, a_size: int, b: int, b_size: int) -> float:
    """jaccard() of two token_bits sets, given their sizes."""
    shared = (a & b).bit_count()
    union = a_size + b_size - shared
    return shared / union if union else 0.0


def token_set(text: str) -> set[str]:
    """The lowercase word tokens of `text` (a linear-time pattern)."""
    return set(_TOKEN.findall(text.lower()))


def jaccard(a: set[str], b: set[str]) -> float:
    if not a and not b:
        return 0.0
    return len(a & b) / len(a | b)
