"""The benchmark's scorer, proved against the README of ../shared/bench-data: fed the
authors' published ranking, it must reproduce the README's first reference row.

No database: the scorer is pure. The data must be present; a missing folder fails."""

from __future__ import annotations

from tests.bench import quality


def test_scorer_reproduces_the_readme_reference_row_from_the_authors_ranking() -> None:
    base = quality.data_dir()
    assert (base / "en" / "en_openai_top_20_bottom.json").is_file(), (
        f"MADial-Bench data missing at {base}: the scorer cannot be checked. Put ../shared/bench-data "
        "beside the repository or set MEMORYHUB_BENCH_DATA to its madial-bench folder."
    )

    ok, got = quality.self_check(base)

    expected = quality.REFERENCE_ROWS[quality.SELF_CHECK_ROW]
    assert {m: f"{got[m]:.4f}" for m in quality.METRICS} == {m: f"{expected[m]:.4f}" for m in quality.METRICS}
    assert ok


def test_scorer_follows_the_readme_definitions_on_a_small_case() -> None:
    scores = quality.score_one([9, 1, 8, 2], gold=[1, 2, 3])

    assert scores["R@1"] == 0
    assert scores["R@3"] == 1 / 3
    assert scores["R@5"] == 2 / 3
    assert scores["MRR@10"] == 1 / 2
    assert scores["Hit@5"] == 1
    # hits at positions 1 and 3 (0-based) over the ideal of 3 hits at 0, 1, 2
    ideal = 1 + 1 / 1.584962500721156 + 1 / 2
    assert abs(scores["nDCG@5"] - (1 / 1.584962500721156 + 1 / 2.321928094887362) / ideal) < 1e-12


def test_query_keeps_only_the_lines_before_the_first_test_turn() -> None:
    lines = [
        "<BOD>\n",
        '<Bart>: "hello"\n',
        '<Assistant>: "hi"\n',
        '<Assistant>: "gold paraphrase"\n',
        "<EOD>\n",
    ]

    assert quality.dialogue_query(lines, 3) == '"hello"\n"hi"'
