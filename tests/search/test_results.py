"""The last step alone (search.retrieval.results): snippets and result rows from
scored candidates. Pure functions over unsaved memories: no database."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from memories.models import Memory
from search.retrieval.candidates import Candidate
from search.retrieval.results import SNIPPET_CHARS, scored_results, shorten
from search.retrieval.scoring import Scored

CREATED = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


def memory(key: str, content: str, *, is_active: bool = True) -> Memory:
    return Memory(
        id=uuid.uuid4(), key=key, content=content, type="decision", is_active=is_active, created_at=CREATED
    )


def test_a_short_text_is_its_own_snippet() -> None:
    text = "x" * SNIPPET_CHARS

    assert shorten(text) == text


def test_a_long_text_is_cut_at_the_last_word_that_fits() -> None:
    text = "word " * 100  # 500 characters

    snippet = shorten(text)

    assert snippet.endswith("word…")
    assert len(snippet) <= SNIPPET_CHARS + 1
    assert snippet == "word " * 59 + "word…"


def test_results_follow_the_picked_order_with_their_scores_and_sources() -> None:
    old, new = memory("vpn", "The VPN is old.", is_active=False), memory("wifi", "Wifi " * 80)
    picked = [
        Scored(0.8, Candidate(new.id, found_by={"vector", "keyword"}), {"vector": 0.9}, mmr=0.56),
        Scored(0.4, Candidate(old.id, found_by={"keyword"}), {"vector": 0.0}, mmr=0.1),
    ]
    successor = {"id": str(uuid.uuid4()), "key": "vpn", "reason": "moved", "kind": "hard", "is_active": True}

    results = scored_results(
        picked,
        {old.id: old, new.id: new},
        snippets={old.id: "The VPN…"},
        successors={old.id: successor},
        notes={},
        explain=False,
    )

    assert [(r.key, r.score, r.source, r.is_active) for r in results] == [
        ("wifi", 0.8, "keyword+vector", True),
        ("vpn", 0.4, "keyword", False),
    ]
    # No chunk snippet: the start of the content.
    assert results[0].snippet == new.content[:SNIPPET_CHARS]
    assert results[1].snippet == "The VPN…"
    assert (results[0].superseded_by, results[1].superseded_by) == (None, successor)
    assert all(r.explain is None for r in results)


def test_explain_rounds_the_parts_and_adds_the_mmr_value() -> None:
    entry = memory("a", "text")
    parts = {"vector": 0.12345678, "keyword": 1.0, "merged": 0.5, "decay": 0.99999999, "rating": 1.05}

    [result] = scored_results(
        [Scored(0.5, Candidate(entry.id, found_by={"vector"}), parts, mmr=0.35)],
        {entry.id: entry},
        snippets={},
        successors={},
        notes={},
        explain=True,
    )

    assert result.explain == {
        "vector": 0.123457,
        "keyword": 1.0,
        "merged": 0.5,
        "decay": 1.0,
        "rating": 1.05,
        "mmr": 0.35,
    }
