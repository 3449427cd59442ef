"""The capture bench's loader and scoring (tests/bench/capture.py): pure, no database. The
expected figures are worked out by hand from the module's definitions."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryhub_client.capture import Learning
from tests.bench import capture

TINY = """\
### a: one failure, one correction
user: Run it.
call Bash make run
fail: Exit code 2\\nmake: *** No rule to make target 'run'. @learn
call Read {"file_path": "/x"}
fail: File does not exist.
user: No, we start it with docker compose up, never make. @learn
secret: ghp_abc

### b: nothing to learn
user: thanks!
"""


def test_the_set_loads_as_claude_codes_records_with_its_labels(tmp_path: Path) -> None:
    path = tmp_path / "set.txt"
    path.write_text(TINY)

    first, second = capture.load_set(path)

    assert (first.id, len(first.failures), first.prompts[1]) == (
        "a", 2, "No, we start it with docker compose up, never make."
    )  # fmt: skip
    assert first.failures[0]["error"] == "Exit code 2\nmake: *** No rule to make target 'run'."
    assert first.labelled == {first.failures[0]["tool_use_id"], "prompt:1"}
    assert first.secrets == ["ghp_abc"]
    assert first.records[1]["message"]["content"][0]["type"] == "tool_use"
    assert first.records[2]["message"]["content"][0]["is_error"] is True
    assert (second.labelled, second.prompts) == (set(), ["thanks!"])


def test_precision_and_recall_are_pooled_over_the_transcripts() -> None:
    counts = [
        capture.Counts(right=2, captured=4, labelled=2),
        capture.Counts(right=1, captured=1, labelled=4),
    ]
    assert capture.pooled(counts) == (3 / 5, 3 / 6)
    (p_low, p_high), (r_low, r_high) = capture.bootstrap(counts)
    assert p_low <= 3 / 5 <= p_high and r_low <= 3 / 6 <= r_high


def test_a_learning_counts_by_the_event_it_came_from(tmp_path: Path) -> None:
    path = tmp_path / "set.txt"
    path.write_text(TINY)
    [session, _] = capture.load_set(path)
    failure = session.failures[0]["tool_use_id"]
    found = [Learning("error", "x", failure, "f1"), Learning("correction", "y", "prompt:0", "f2")]

    assert capture.count(session, found) == capture.Counts(right=1, captured=2, labelled=2)
    assert capture.count(session, found, "error") == capture.Counts(right=1, captured=1, labelled=1)
    assert capture.count(session, found, "correction") == capture.Counts(right=0, captured=1, labelled=1)


def test_each_committed_set_holds_at_least_30_sessions_with_failures_corrections_and_negatives() -> None:
    for path in capture.SETS.values():
        sessions = capture.load_set(path)
        assert len(sessions) >= 30, path
        assert sum(1 for s in sessions if not s.labelled) >= 10, path
        assert any(s.failures for s in sessions) and any(s.secrets for s in sessions), path
        labelled = {source for s in sessions for source in s.labelled}
        assert any(source.startswith("prompt:") for source in labelled), path
        assert any(not source.startswith("prompt:") for source in labelled), path
        assert len({s.id for s in sessions}) == len(sessions), path


def test_the_held_out_set_is_measured_first_when_it_is_there_and_skipped_when_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    absent = tmp_path / "held_out_v5.txt"
    monkeypatch.setattr(capture, "HELD_OUT_FILE", absent)
    assert list(capture.sets_present().values()) == list(capture.TUNING_SETS.values())

    absent.write_text(TINY)
    present = capture.sets_present()
    assert list(present.values()) == [absent, *capture.TUNING_SETS.values()]
    assert next(iter(present)).startswith("held out")


def test_the_four_tuning_sets_are_the_committed_files() -> None:
    assert [path.name for path in capture.TUNING_SETS.values()] == [
        "held_out_v4.txt", "held_out_v3.txt", "held_out.txt", "transcripts.txt"
    ]  # fmt: skip
    assert all(path.exists() for path in capture.TUNING_SETS.values())
