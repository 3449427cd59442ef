"""`python -m tests.bench.capture_folds`: how well rules v5's changes generalise, by
leave-one-set-out over the capture sets (tests/bench/capture_set/, docs/agents.md,
"Capture figures"). Rules v5 were tuned on all four sets; this asks what tuning on three
would have given on the fourth.

Each v5 change (CHANGES, as marked in the docstrings of memoryhub_client/capture.py,
capture_corrections.py and capture_transcripts.py) can be taken out of the rules
in-process. For each set left out, a change is kept when, added alone to
rules v4, it does more good than harm on the other three sets (learnings gained minus
false learnings added, both paths summed, > 0); the rules v4 plus the kept changes are
then measured on the set left out, with the capture bench's own counting and bootstrap.

What it cannot undo: the changes were drafted by someone who had read all four sets, and
rules v4 were tuned on the first three, so the folds that leave out one of those three
start from rules already fitted to it; the fold that leaves out the fourth set is the
fairest of the four.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from memoryhub_client import capture as rules
from memoryhub_client import capture_corrections as prompt_rules
from memoryhub_client import capture_hooks
from memoryhub_client import capture_transcripts as transcript_rules
from tests.bench import capture as bench

NEVER = re.compile(r"(?!)")
TUNING_SETS = {
    "first set": bench.SET_FILE,
    "second set": bench.SECOND_SET_FILE,
    "third set": bench.THIRD_SET_FILE,
    "fourth set": bench.FOURTH_SET_FILE,
}


@contextmanager
def _patched(module: Any, name: str, value: Any) -> Iterator[None]:
    old = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, old)


def _without(pattern: re.Pattern[str], *parts: str) -> re.Pattern[str]:
    text = pattern.pattern
    for part in parts:
        assert part in text, part
        text = text.replace(part, "")
    return re.compile(text)


def _v4_read_probe(command: str, error: str) -> bool:
    # Rules v4's reading: options were cut at their last "/" before being set aside.
    program = rules.program_of(command)
    words = [word.rsplit("/", 1)[-1] for word in command.split()]
    if program not in words:
        return False
    rest = [word for word in words[words.index(program) + 1 :] if not word.startswith("-")][:2]
    return any(word in rules.READ_SUBCOMMANDS for word in rest) and bool(rules._NOT_THERE.search(error))


def _v4_correction_learning(prompt: Any, *, source: str = "", answers_a_question: bool = False) -> Any:
    return prompt_rules.correction_learning(prompt, source=source)


# Each v5 change and how to take it out (a list of (module, attribute, v4 value) makers).
CHANGES: dict[str, Callable[[], list[tuple[Any, str, Any]]]] = {
    "transient: a held lock, a socket error, an unresponsive device": lambda: [
        (rules, "_TRANSIENT_V5", NEVER)
    ],
    "read-only subcommand past `-opt=a/b`": lambda: [(rules, "_is_read_probe", _v4_read_probe)],
    "a near name offered (did you mean)": lambda: [(rules, "_NEAR_NAME", NEVER)],
    "a name the command gave is not there": lambda: [(rules, "_NAME_NOT_THERE", NEVER)],
    "any linter or validator's diagnostics": lambda: [(rules, "_LINT_RUN", NEVER)],
    "transcript: a constraint fixed by an edit stays": lambda: [(transcript_rules, "_CONSTRAINT", NEVER)],
    "correction: where a thing goes or comes from": lambda: [(prompt_rules, "_PRACTICE_CUES", _cues_without("_PLACEMENT"))],
    "correction: nobody, only ever, everywhere": lambda: [(prompt_rules, "_PRACTICE_CUES", _cues_without("_UNIVERSAL"))],
    "correction: we <verb> as a habit": lambda: [(prompt_rules, "_PRACTICE_CUES", _cues_without("_WE_PRACTICE"))],
    "correction: in this repo/team": lambda: [(prompt_rules, "_PRACTICE_CUES", _cues_without("_PROJECT_SCOPE"))],
    "correction: `stop.` opener, `whoa` aside": lambda: [
        (prompt_rules, "_NEGATION_OPENER", _without(prompt_rules._NEGATION_OPENER, r"|stop[.!]")),
        (prompt_rules, "_INTERJECTION", _without(prompt_rules._INTERJECTION, "|whoa|woah|hey")),
    ],
    "correction: a wait on someone else's work is one-off": lambda: [(prompt_rules, "_TEMPORARY", NEVER)],
    "an answer to the agent's question": lambda: [
        (transcript_rules, "correction_learning", _v4_correction_learning),
        (capture_hooks, "correction_learning", _v4_correction_learning),
    ],
}  # fmt: skip


def _cues_without(name: str) -> tuple[re.Pattern[str], ...]:
    return tuple(cue for cue in prompt_rules._PRACTICE_CUES if cue is not getattr(prompt_rules, name))


@contextmanager
def rules_with(kept: Sequence[str]) -> Iterator[None]:
    """Rules v4 plus the named v5 changes: every other change taken out."""
    with ExitStack() as stack:
        # Take out one change at a time, each from the rules as they stand.
        for name, undo in CHANGES.items():
            if name in kept:
                continue
            for module, attribute, value in undo():
                stack.enter_context(_patched(module, attribute, value))
        yield


def outcomes(sessions: Sequence[bench.Session]) -> list[dict[str, bench.Counts]]:
    """Per session, the counts of both paths."""
    return [
        {
            "hooks": bench.count(session, bench.hook_learnings(session)),
            "pre-compact": bench.count(session, bench.pre_compact_learnings(session)),
        }
        for session in sessions
    ]


def _net(base: list[dict[str, bench.Counts]], changed: list[dict[str, bench.Counts]]) -> int:
    """Right learnings gained minus false ones added, both paths summed."""
    net = 0
    for before, after in zip(base, changed, strict=True):
        for path in before:
            gained = after[path].right - before[path].right
            false_added = (after[path].captured - after[path].right) - (
                before[path].captured - before[path].right
            )
            net += gained - false_added
    return net


def selected_changes(training: Sequence[bench.Session]) -> list[str]:
    with rules_with([]):
        base = outcomes(training)
    kept = []
    for name in CHANGES:
        with rules_with([name]):
            if _net(base, outcomes(training)) > 0:
                kept.append(name)
    return kept


def _row(label: str, counts: list[dict[str, bench.Counts]]) -> list[str]:
    cells = [label]
    for path in ("hooks", "pre-compact"):
        per_session = [c[path] for c in counts]
        precision, recall = bench.pooled(per_session)
        (p_low, p_high), (r_low, r_high) = bench.bootstrap(per_session)
        right = sum(c.right for c in per_session)
        captured = sum(c.captured for c in per_session)
        labelled = sum(c.labelled for c in per_session)
        cells.append(
            f"{right}/{captured}/{labelled} P {precision:.3f} [{p_low:.3f}, {p_high:.3f}] "
            f"R {recall:.3f} [{r_low:.3f}, {r_high:.3f}]"
        )
    return cells


def main() -> None:
    sets = {name: bench.load_set(path) for name, path in TUNING_SETS.items()}
    rows, pooled_folds = [], []
    for left_out, held in sets.items():
        training = [session for name, sessions in sets.items() if name != left_out for session in sessions]
        kept = selected_changes(training)
        with rules_with(kept):
            fold = outcomes(held)
        pooled_folds += fold
        rows.append(_row(f"{left_out} left out ({len(kept)} of {len(CHANGES)} changes kept)", fold))
        print(f"{left_out} left out: kept {kept or 'none'}; not kept {[c for c in CHANGES if c not in kept]}")
    rows.append(_row("the four folds pooled", pooled_folds))
    everything = [session for sessions in sets.values() for session in sessions]
    with rules_with(list(CHANGES)):
        rows.append(_row("rules v5 (tuned on all four), all four sets", outcomes(everything)))
        for name, sessions in sets.items():
            rows.append(_row(f"rules v5, {name}", outcomes(sessions)))
    with rules_with([]):
        rows.append(_row("rules v4, all four sets", outcomes(everything)))
    print("\nright/captured/labelled, precision and recall with 95% bootstrap intervals (sessions resampled)")
    bench.harness.print_table(["fold", "hooks", "pre-compact"], rows)


if __name__ == "__main__":
    assert Path(bench.FOURTH_SET_FILE).exists()
    main()
