"""`python -m tests.bench capture`: the capture rules (memoryhub_client/capture*.py) on the
labelled sessions of tests/bench/capture_set/ (its README: the format, the labelling rule
and the files: the first set, written after rules v1; the second, written after v2 was
frozen; the third, written after v3 was frozen; the fourth, written after v4 was frozen;
all four are the tuning sets of rules v5; and the fifth, `held_out_v5.txt`, written after
v5 was frozen: v5's honest figure, measured when the file is there and skipped when it
is not). Each set gets its own rows; the held-out set's come first.
`python -m tests.bench.capture_folds` estimates v5 by leave-one-set-out on the four.

Two paths, as the hooks run them:
- hooks: each failed call as PostToolUseFailure gives it (no knowledge of what follows)
  and each prompt as UserPromptSubmit gives it, with the transcript up to it (the hook
  reads its tail when the prompt reads as a correction: was it an answer?);
- pre-compact: the whole transcript as Claude Code's JSON Lines records (a flake, the
  same call succeeding at once, is left out).
A captured learning is right when the event it came from (a failed call, a prompt) is
labelled `@learn`. precision = right / captured, recall = right / labelled, pooled over
the transcripts, with 95% percentile bootstrap intervals (transcripts resampled, 2000
times, fixed seed). Targets: precision >= 0.85, recall >= 0.6.

Then each captured learning goes the server's way in-process (prepare_transcript, the
offline draft rules): it must become exactly one lesson candidate, and no `secret:`
planted in its transcript may survive. No database, no network.
"""

from __future__ import annotations

import json
import random
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tests.bench import harness

SET_DIR = harness.REPO / "tests" / "bench" / "capture_set"
SET_FILE = SET_DIR / "transcripts.txt"
SECOND_SET_FILE = SET_DIR / "held_out.txt"
THIRD_SET_FILE = SET_DIR / "held_out_v3.txt"
FOURTH_SET_FILE = SET_DIR / "held_out_v4.txt"
HELD_OUT_FILE = SET_DIR / "held_out_v5.txt"
TUNING_SETS = {
    "fourth set (written after v4; v5 tuned on it)": FOURTH_SET_FILE,
    "third set (v4 and v5 tuned on it)": THIRD_SET_FILE,
    "second set (v3, v4 and v5 tuned on it)": SECOND_SET_FILE,
    "first set (v2 to v5 tuned on it)": SET_FILE,
}


def sets_present() -> dict[str, Path]:
    """The held-out set first when it is there (it is written after the rules it measures
    were frozen), then the tuning sets."""
    held_out = {"held out (written after v5)": HELD_OUT_FILE} if HELD_OUT_FILE.exists() else {}
    return {**held_out, **TUNING_SETS}


SETS = sets_present()
LABEL = " @learn"
RESAMPLES = 2000
SEED = 31
TARGET_PRECISION = 0.85
TARGET_RECALL = 0.6
INTERRUPTED = "[Request interrupted by user for tool use]"


@dataclass
class Session:
    id: str
    title: str
    records: list[dict[str, Any]] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)  # PostToolUseFailure inputs
    prompts: list[str] = field(default_factory=list)
    prompt_records: list[int] = field(default_factory=list)  # each prompt's index in records
    labelled: set[str] = field(default_factory=set)  # sources of the events labelled @learn
    secrets: list[str] = field(default_factory=list)
    events: dict[str, str] = field(default_factory=dict)  # source -> the line, for the listing


def load_set(path: Path = SET_FILE) -> list[Session]:
    sessions: list[Session] = []
    call: tuple[str, str, Any] | None = None
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        if not raw.strip():
            continue
        if raw.startswith("### "):
            ident, _, title = raw[4:].partition(": ")
            sessions.append(Session(ident, title))
            continue
        session = sessions[-1]
        labelled = raw.endswith(LABEL)
        line = raw.removesuffix(LABEL)
        kind, _, rest = line.partition(" " if line.startswith("call ") else ":")
        text = rest.strip().replace("\\n", "\n")
        if kind == "user":
            source = f"prompt:{len(session.prompts)}"
            session.prompts.append(text)
            session.prompt_records.append(len(session.records))
            session.records.append(_record("user", text))
        elif kind == "assistant":
            session.records.append(_record("assistant", [{"type": "text", "text": text}]))
            source = ""
        elif kind == "call":
            tool, _, given = rest.strip().partition(" ")  # JSON keeps its own escapes
            tool_input = json.loads(given) if tool != "Bash" else {"command": given}
            call = (f"toolu_{session.id}_{len(session.events)}_{number}", tool, tool_input)
            part = {"type": "tool_use", "id": call[0], "name": tool, "input": tool_input}
            session.records.append(_record("assistant", [part]))
            source = ""
        elif kind in ("ok", "fail", "interrupt"):
            assert call is not None, f"line {number}: a result without a call"
            call_id, tool, tool_input = call
            failed = kind != "ok"
            content = INTERRUPTED if kind == "interrupt" else text
            result = {"type": "tool_result", "tool_use_id": call_id, "content": content}
            session.records.append(_record("user", [{**result, "is_error": True} if failed else result]))
            if failed:
                session.failures.append(
                    {
                        "tool_name": tool,
                        "tool_input": tool_input,
                        "tool_use_id": call_id,
                        "error": content,
                        "is_interrupt": kind == "interrupt",
                    }
                )
            source, call = (call_id if failed else ""), None
        elif kind == "secret":
            session.secrets.append(text)
            continue
        else:
            raise ValueError(f"{path.name} line {number}: unknown line {raw!r}")
        if source:
            session.events[source] = line
        if labelled:
            assert source, f"line {number}: only a failure or a prompt can be a learning"
            session.labelled.add(source)
    return sessions


def _record(role: str, content: Any) -> dict[str, Any]:
    return {"type": role, "message": {"role": role, "content": content}}


# --------------------------------------------------------------------------- the two paths


def hook_learnings(session: Session) -> list[Any]:
    from memoryhub_client.capture import failure_learning
    from memoryhub_client.capture_hooks import prompt_learning

    found = []
    for failure in session.failures:
        learning = failure_learning(
            failure["tool_name"],
            failure["tool_input"],
            failure["error"],
            is_interrupt=failure["is_interrupt"],
            source=failure["tool_use_id"],
        )
        if learning is not None:
            found.append(learning)
    with tempfile.TemporaryDirectory() as folder:
        for index, prompt in enumerate(session.prompts):
            # The transcript as UserPromptSubmit finds it: every record up to the prompt's.
            transcript = Path(folder) / f"{index}.jsonl"
            records = session.records[: session.prompt_records[index] + 1]
            transcript.write_text("\n".join(json.dumps(record) for record in records) + "\n")
            learning = prompt_learning(prompt, str(transcript))
            if learning is not None:
                found.append(replace(learning, source=f"prompt:{index}"))
    return found


def pre_compact_learnings(session: Session) -> list[Any]:
    from memoryhub_client.capture_transcripts import transcript_learnings

    # Through JSON text and back, as the hook reads the file.
    return transcript_learnings(json.loads(json.dumps(record)) for record in session.records)


@dataclass(frozen=True)
class Counts:
    right: int
    captured: int
    labelled: int


def count(session: Session, learnings: Sequence[Any], kind: str | None = None) -> Counts:
    def wanted(source: str) -> bool:
        is_prompt = source.startswith("prompt:")
        return kind is None or (kind == "correction") == is_prompt

    captured = {learning.source for learning in learnings if wanted(learning.source)}
    labelled = {source for source in session.labelled if wanted(source)}
    return Counts(len(captured & labelled), len(captured), len(labelled))


def pooled(counts: Sequence[Counts]) -> tuple[float, float]:
    right = sum(c.right for c in counts)
    captured = sum(c.captured for c in counts)
    labelled = sum(c.labelled for c in counts)
    return (right / captured if captured else 1.0), (right / labelled if labelled else 1.0)


def bootstrap(counts: Sequence[Counts]) -> tuple[tuple[float, float], tuple[float, float]]:
    """95% percentile intervals of pooled precision and recall, transcripts resampled."""
    rng = random.Random(SEED)
    precisions, recalls = [], []
    for _ in range(RESAMPLES):
        sample = [counts[rng.randrange(len(counts))] for _ in counts]
        precision, recall = pooled(sample)
        precisions.append(precision)
        recalls.append(recall)
    precisions.sort()
    recalls.sort()
    low, high = int(0.025 * RESAMPLES), min(RESAMPLES - 1, int(0.975 * RESAMPLES))
    return (precisions[low], precisions[high]), (recalls[low], recalls[high])


# --------------------------------------------------------------------------- the server's way


def drafted(session: Session, learnings: Sequence[Any]) -> tuple[int, list[str]]:
    """How many learnings become exactly one lesson candidate, and every planted secret
    that survives into one."""
    from freshness.draft_extraction import extract_candidates, prepare_transcript

    one_lesson, leaks = 0, []
    for learning in learnings:
        candidates = extract_candidates(prepare_transcript(learning.as_draft_text()))
        if len(candidates) == 1 and candidates[0].type.value == "lesson":
            one_lesson += 1
        text = " ".join(c.content + c.why for c in candidates)
        leaks += [f"{session.id}: {secret[:6]}…" for secret in session.secrets if secret in text]
    return one_lesson, leaks


# --------------------------------------------------------------------------- the section


def run(*, quick: bool = False) -> dict[str, Any]:
    """The capture section. `quick` changes nothing: it takes well under a second."""
    from memoryhub_client.capture import RULES_VERSION

    print(f"\n== capture: rules v{RULES_VERSION} ==")
    payload: dict[str, Any] = {
        "rules_version": RULES_VERSION,
        "targets": {"precision": TARGET_PRECISION, "recall": TARGET_RECALL},
        "sets": {},
    }
    for name, path in sets_present().items():
        payload["sets"][name] = measure_set(name, load_set(path))
    return payload


def measure_set(name: str, sessions: list[Session]) -> dict[str, Any]:
    labelled = sum(len(s.labelled) for s in sessions)
    events = sum(len(s.events) for s in sessions)
    print(
        f"\n-- {name}: {len(sessions)} sessions ({events} failures and prompts, {labelled} of them "
        "learnings; 95% bootstrap intervals, sessions resampled)"
    )
    started = time.perf_counter()
    paths = {"hooks": hook_learnings, "pre-compact": pre_compact_learnings}
    found = {path_name: [path(s) for s in sessions] for path_name, path in paths.items()}
    elapsed_ms = (time.perf_counter() - started) * 1000
    rows, figures = [], {}
    for path_name in paths:
        for kind in (None, "error", "correction"):
            counts = [count(s, f, kind) for s, f in zip(sessions, found[path_name], strict=True)]
            precision, recall = pooled(counts)
            (p_low, p_high), (r_low, r_high) = bootstrap(counts)
            label = f"{path_name}, {kind or 'all'}"
            figures[label] = {
                "captured": sum(c.captured for c in counts),
                "labelled": sum(c.labelled for c in counts),
                "right": sum(c.right for c in counts),
                "precision": round(precision, 3),
                "precision_95": [round(p_low, 3), round(p_high, 3)],
                "recall": round(recall, 3),
                "recall_95": [round(r_low, 3), round(r_high, 3)],
            }
            rows.append(
                [
                    label,
                    str(figures[label]["captured"]),
                    str(figures[label]["labelled"]),
                    str(figures[label]["right"]),
                    f"{precision:.3f} [{p_low:.3f}, {p_high:.3f}]",
                    f"{recall:.3f} [{r_low:.3f}, {r_high:.3f}]",
                ]
            )
    harness.print_table(
        ["path, kind", "captured", "labelled", "right", "precision [95%]", "recall [95%]"],
        rows,
    )
    print(f"targets: precision >= {TARGET_PRECISION}, recall >= {TARGET_RECALL} (the 'all' rows)")
    print(f"in-process: {elapsed_ms:.0f} ms for both paths over the set")
    transcript_mistakes = _mistakes(sessions, found["pre-compact"])
    mistakes = transcript_mistakes | {
        f"hooks only: {m}" for m in _mistakes(sessions, found["hooks"]) - transcript_mistakes
    }
    for mistake in sorted(mistakes):
        print(f"  {mistake}")
    as_drafts = [drafted(s, f) for s, f in zip(sessions, found["pre-compact"], strict=True)]
    captured = sum(len(f) for f in found["pre-compact"])
    one_lesson = sum(n for n, _ in as_drafts)
    leaks = [leak for _, found_leaks in as_drafts for leak in found_leaks]
    planted = sum(len(s.secrets) for s in sessions)
    print(
        f"the server's way: {one_lesson} of {captured} captured learnings become one lesson draft; "
        f"planted secrets ({planted}) surviving into a draft: {len(leaks)} {leaks or ''}"
    )
    return {
        "sessions": len(sessions),
        "events": events,
        "labelled": labelled,
        "figures": figures,
        "mistakes": sorted(mistakes),
        "one_lesson_draft": one_lesson,
        "captured_pre_compact": captured,
        "planted_secrets": planted,
        "secrets_surviving": leaks,
        "in_process_ms": round(elapsed_ms, 1),
    }


def _mistakes(sessions: Sequence[Session], found: Sequence[Sequence[Any]]) -> set[str]:
    listed = set()
    for session, learnings in zip(sessions, found, strict=True):
        captured = {learning.source for learning in learnings}
        for source in sorted(captured - session.labelled):
            listed.add(f"false positive {session.id}: {session.events.get(source, source)[:100]}")
        for source in sorted(session.labelled - captured):
            listed.add(f"missed {session.id}: {session.events.get(source, source)[:100]}")
    return listed
