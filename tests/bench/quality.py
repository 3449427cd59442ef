"""Retrieval quality on MADial-Bench (en), scored exactly as ../shared/bench-data/README.md says.

Each of the 160 memories becomes a memory of its user's team (one MemoryHub team per
user, so "search only that user's pool" is the team boundary itself). Each dialogue's
query is the conversation before its first test turn; the top 10 keys are scored
against the gold ids with Recall@k, binary nDCG@k, MRR@10 and Hit@5.

The search runs in-process through `search.run_search.embed_and_search` (not over HTTP):
the quality figures are about ranking, and the selector is what the API calls.

The dialogues are also split into a tune half and a held-out half (split_of:
a stable hash of the dialogue's line number; memories are never split), each half
reported with 95% bootstrap intervals, and the query-time levers of tests/bench/levers.py
are measured one by one against the default hybrid ranking on both halves.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.bench import harness

KS = (1, 3, 5, 10)
METRICS = ("R@1", "R@3", "R@5", "R@10", "nDCG@5", "nDCG@10", "MRR@10", "Hit@5")

# The README's reference rows (en), copied verbatim. The first one is also the scorer's
# self-check: our scorer fed the authors' `top-20-ids` must reproduce it to 4 decimals.
REFERENCE_ROWS: dict[str, dict[str, float]] = {
    "reference: authors' OpenAI embeddings": dict(
        zip(METRICS, (0.3678, 0.5800, 0.6949, 0.8059, 0.6413, 0.6883, 0.7486, 0.9062), strict=True)
    ),
    "reference: plain BM25": dict(
        zip(METRICS, (0.2620, 0.3808, 0.4360, 0.5702, 0.4061, 0.4632, 0.5096, 0.6438), strict=True)
    ),
    "reference: random order": dict(
        zip(METRICS, (0.014, 0.045, 0.073, 0.128, 0.055, 0.077, 0.089, 0.175), strict=True)
    ),
}
SELF_CHECK_ROW = "reference: authors' OpenAI embeddings"

USER_NAMES = {1: "Bart", 2: "Lisa"}
TEAM_SLUGS = {1: "madial-bart", 2: "madial-lisa"}
KEY_PREFIX = "madial-"
# A well-formed speaker prefix such as `<Assistant>: `. Malformed lines (35 of them in
# the en translation) are kept as they are, as the README advises.
SPEAKER_PREFIX = re.compile(r"^<[A-Za-z][A-Za-z .'-]{0,40}>:\s*")


# --------------------------------------------------------------------------- data


def data_dir() -> Path:
    """The madial-bench folder: MEMORYHUB_BENCH_DATA, else <repo>/../shared/bench-data/madial-bench.

    MEMORYHUB_BENCH_DATA may name either the madial-bench folder or the bench-data folder."""
    override = os.environ.get("MEMORYHUB_BENCH_DATA")
    base = Path(override) if override else harness.REPO.parent / "shared" / "bench-data" / "madial-bench"
    if not (base / "en").is_dir() and (base / "madial-bench" / "en").is_dir():
        base = base / "madial-bench"
    return base


def _require(path: Path) -> Path:
    if not path.is_file():
        raise FileNotFoundError(
            f"MADial-Bench data not found: {path} is missing. Expected the shared bench data at "
            f"<repo>/../shared/bench-data/madial-bench (see its README), or set MEMORYHUB_BENCH_DATA."
        )
    return path


def _json_lines(path: Path) -> list[dict[str, Any]]:
    with _require(path).open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


@dataclass(frozen=True)
class BenchMemory:
    id: int
    user_id: int
    time: str
    scene: str
    emotion: str
    event: str


@dataclass(frozen=True)
class Dialogue:
    index: int
    user_id: int
    query: str
    relevant: tuple[int, ...]


def load_memories(base: Path | None = None) -> list[BenchMemory]:
    """The en memory archive. The en file has no user-id: every event names exactly
    one of the two users, so user-id = 1 if "Bart" is in the event, else 2 (Lisa)."""
    rows = _json_lines((base or data_dir()) / "en" / "MADial-Bench-en-memory.json")
    memories = []
    for row in rows:
        ((memory_id, fields),) = row.items()
        memories.append(
            BenchMemory(
                id=int(memory_id),
                user_id=1 if "Bart" in fields["event"] else 2,
                time=fields["time"],
                scene=fields["scene"],
                emotion=fields["emotion"],
                event=fields["event"],
            )
        )
    return memories


def dialogue_query(lines: Sequence[str], first_test_turn: int) -> str:
    """The lines before the first test turn, without <BOD> and without speaker prefixes.
    The test turn and everything after it paraphrase the gold memory and are never used."""
    kept = []
    for line in lines[:first_test_turn]:
        text = line.strip()
        if not text or text in ("<BOD>", "<EOD>"):
            continue
        kept.append(SPEAKER_PREFIX.sub("", text).strip())
    return "\n".join(kept)


def load_dialogues(base: Path | None = None) -> list[Dialogue]:
    rows = _json_lines((base or data_dir()) / "en" / "MADial-Bench-en-dialogue.json")
    return [
        Dialogue(
            index=i,
            user_id=int(row["user-id"]),
            query=dialogue_query(row["dialogue"], row["test-turn"][0]),
            relevant=tuple(int(x) for x in row["relevant-id"]),
        )
        for i, row in enumerate(rows)
    ]


def load_reference_run(base: Path | None = None) -> list[dict[str, Any]]:
    return _json_lines((base or data_dir()) / "en" / "en_openai_top_20_bottom.json")


# --------------------------------------------------------------------------- scorer


def score_one(ranked: Sequence[int], gold: Iterable[int]) -> dict[str, float]:
    """The README's per-dialogue metrics for one ranked list of ids (best first)."""
    gold_set = set(gold)
    if not gold_set:
        raise ValueError("a dialogue without gold ids cannot be scored")
    scores: dict[str, float] = {}
    for k in KS:
        scores[f"R@{k}"] = len(set(ranked[:k]) & gold_set) / len(gold_set)
    for k in (5, 10):
        dcg = sum(1 / math.log2(i + 2) for i, r in enumerate(ranked[:k]) if r in gold_set)
        ideal = sum(1 / math.log2(i + 2) for i in range(min(len(gold_set), k)))
        scores[f"nDCG@{k}"] = dcg / ideal
    first = next((i for i, r in enumerate(ranked[:10]) if r in gold_set), None)
    scores["MRR@10"] = 0.0 if first is None else 1 / (first + 1)
    scores["Hit@5"] = 1.0 if set(ranked[:5]) & gold_set else 0.0
    return scores


def mean_scores(per_dialogue: Sequence[dict[str, float]]) -> dict[str, float]:
    """Plain mean over dialogues, metric by metric."""
    return {m: sum(s[m] for s in per_dialogue) / len(per_dialogue) for m in METRICS}


# --------------------------------------------------------------------------- split and intervals

TUNE, HELD_OUT = "tune", "held-out"
SPLIT_SALT = "madial-en-split-v1"
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 15


def split_of(dialogue_index: int) -> str:
    """The half a dialogue belongs to, from a stable hash of its id (its line number in
    the en dialogue file, which has no id field): the first byte of
    sha256("madial-en-split-v1:<index>") even → tune, odd → held-out. The memories are
    not split: every user's whole pool stays searchable from both halves."""
    digest = hashlib.sha256(f"{SPLIT_SALT}:{dialogue_index}".encode()).digest()
    return TUNE if digest[0] % 2 == 0 else HELD_OUT


def bootstrap_interval(
    values: Sequence[float], *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> tuple[float, float]:
    """The 95% percentile bootstrap interval of the mean of `values` (one per dialogue),
    resampling dialogues with replacement; deterministic for a given seed. For a paired
    difference pass the per-dialogue differences."""
    if not values:
        raise ValueError("no values to resample")
    rng = random.Random(seed)
    n = len(values)
    means = sorted(sum(values[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    return means[int(0.025 * resamples)], means[min(resamples - 1, int(0.975 * resamples))]


def self_check(base: Path | None = None) -> tuple[bool, dict[str, float]]:
    """Score the authors' published ranking; True when it reproduces the README's first
    reference row to 4 decimals (the README: otherwise the scorer is wrong)."""
    rows = load_reference_run(base)
    got = mean_scores([score_one(row["top-20-ids"], row["relevant-id"]) for row in rows])
    expected = REFERENCE_ROWS[SELF_CHECK_ROW]
    ok = len(rows) == 160 and all(f"{got[m]:.4f}" == f"{expected[m]:.4f}" for m in METRICS)
    return ok, got


# --------------------------------------------------------------------------- runs


@dataclass(frozen=True)
class RunConfig:
    name: str
    mode: str
    diversify: bool
    decay: bool
    note: str = ""


RUNS = (
    RunConfig("keyword only", "keyword", diversify=False, decay=False),
    RunConfig("vector only", "vector", diversify=False, decay=False),
    RunConfig("hybrid (no MMR)", "hybrid", diversify=False, decay=False),
    RunConfig("hybrid + MMR", "hybrid", diversify=True, decay=False),
    RunConfig(
        "hybrid + MMR + decay (production default)",
        "hybrid",
        diversify=True,
        decay=True,
        note="memories are dated 2012-2024 and queries carry no time: decay only reorders by age here",
    ),
)
TOP_K = 10


def _ingest(memories: list[BenchMemory]) -> dict[str, Any]:
    """One team per user; each memory saved through the service (which indexes it
    in-process after commit, since the bench process has no broker), then its
    created_at backdated to the memory's date."""
    from memories.models import IndexState, Memory
    from memories.writes import save_memory
    from search.models import Chunk, ChunkEmbedding
    from search.services import index_memory
    from teams.models import Team
    from teams.scope import team_scope
    from teams.services import create_team

    teams = {
        uid: create_team(slug=TEAM_SLUGS[uid], name=f"MADial-Bench {name}")
        for uid, name in USER_NAMES.items()
    }
    started = time.perf_counter()
    for memory in memories:
        team = teams[memory.user_id]
        with team_scope(team.id):  # as the API does for a request
            saved = save_memory(
                team=team,
                key=f"{KEY_PREFIX}{memory.id}",
                content=memory.event,
                updated_by="bench",
                type_name="context",
                metadata={"scene": memory.scene, "emotion": memory.emotion},
                # Every dataset item is its own memory, however close to another one.
                allow_duplicate=True,
            )
        # Indexing already ran after commit; calling it again is idempotent and makes
        # sure every memory is indexed whatever the task routing.
        index_memory(team_id=team.id, memory_id=saved.memory.id)
        with team_scope(team.id):
            stamp = datetime.strptime(memory.time, "%Y-%m-%d").replace(hour=12, tzinfo=UTC)
            Memory.objects.for_team(team.id).filter(id=saved.memory.id).update(created_at=stamp)
    seconds = time.perf_counter() - started

    counts: dict[str, Any] = {"seconds": round(seconds, 2), "teams": {}}
    for uid, team in teams.items():
        with team_scope(team.id):
            memories_of_team = Memory.objects.for_team(team.id)
            counts["teams"][team.slug] = {
                "memories": memories_of_team.count(),
                "indexed": memories_of_team.filter(index_state=IndexState.INDEXED).count(),
                "chunks": Chunk.objects.filter(team_id=team.id).count(),
                "embeddings": ChunkEmbedding.objects.filter(team_id=team.id).count(),
                "expected": sum(1 for m in memories if m.user_id == uid),
            }
    teams_by_user = {uid: Team.objects.get(id=team.id) for uid, team in teams.items()}
    return {"teams": teams_by_user, "report": counts}


def _run(config: RunConfig, dialogues: list[Dialogue], teams: dict[int, Any]) -> dict[str, Any]:
    from search.run_search import embed_and_search
    from teams.scope import team_scope

    per_dialogue = []
    rankings: list[list[int]] = []
    returned = []
    modes: dict[str, int] = {}
    timings = []
    for dialogue in dialogues:
        team = teams[dialogue.user_id]
        started = time.perf_counter()
        with team_scope(team.id):
            outcome = embed_and_search(
                team=team,
                query=dialogue.query,
                max_results=TOP_K,
                mode=config.mode,
                diversify=config.diversify,
                decay=config.decay,
            )
        timings.append((time.perf_counter() - started) * 1000)
        modes[outcome.search_mode] = modes.get(outcome.search_mode, 0) + 1
        ranked = []
        for result in outcome.results:
            if not result.key.startswith(KEY_PREFIX):
                raise RuntimeError(f"unexpected key {result.key!r} in team {team.slug}")
            ranked.append(int(result.key.removeprefix(KEY_PREFIX)))
        returned.append(len(ranked))
        per_dialogue.append(score_one(ranked, dialogue.relevant))
        rankings.append(ranked)
    return {
        "rankings": rankings,
        "per_dialogue": per_dialogue,
        "name": config.name,
        "mode": config.mode,
        "diversify": config.diversify,
        "decay": config.decay,
        "note": config.note,
        "search_mode_returned": modes,
        "mean_results_returned": round(sum(returned) / len(returned), 2),
        "dialogues_with_fewer_than_10": sum(1 for n in returned if n < TOP_K),
        "in_process_ms": harness.summarize(timings),
        "metrics": {m: round(v, 4) for m, v in mean_scores(per_dialogue).items()},
    }


def run(*, quick: bool = False) -> dict[str, Any]:
    """The quality section. `quick` leaves out the turns-as-memories task (its ingest
    of about 1,400 lines takes minutes)."""
    ok, got = self_check()
    print("\n== quality: MADial-Bench (en), 160 dialogues ==")
    if not ok:
        raise SystemExit(
            "scorer self-check FAILED: the authors' top-20-ids scored "
            + ", ".join(f"{m}={got[m]:.4f}" for m in METRICS)
            + " instead of the README's first row; refusing to report quality figures"
        )
    print("scorer self-check: OK (authors' top-20-ids reproduce the README's first row to 4 decimals)")

    harness.reset_data()
    memories = load_memories()
    dialogues = load_dialogues()
    ingested = _ingest(memories)
    report = ingested["report"]
    for slug, counts in report["teams"].items():
        if counts["memories"] != counts["expected"] or counts["indexed"] != counts["expected"]:
            raise SystemExit(f"ingest incomplete for {slug}: {counts}")
    print(
        f"ingested {len(memories)} memories into 2 teams in {report['seconds']:.1f} s "
        f"(saved + indexed in-process; created_at backdated to each memory's date)"
    )
    lengths = sorted(len(d.query) for d in dialogues)
    print(
        f"queries: {len(dialogues)} dialogue contexts, {lengths[0]}-{lengths[-1]} characters "
        f"(median {lengths[len(lengths) // 2]}); searched in-process with embed_and_search, top {TOP_K}"
    )

    runs = [_run(config, dialogues, ingested["teams"]) for config in RUNS]

    headers = ["run", *METRICS, "avg n", "ms p50"]
    rows: list[list[str]] = []
    for result in runs:
        rows.append(
            [
                result["name"],
                *(f"{result['metrics'][m]:.4f}" for m in METRICS),
                f"{result['mean_results_returned']:.1f}",
                f"{result['in_process_ms']['p50']:.1f}",
            ]
        )
    for name, ref in REFERENCE_ROWS.items():
        # The README gives the random row to 3 decimals; show it as given.
        decimals = 3 if name == "reference: random order" else 4
        rows.append([name, *(f"{ref[m]:.{decimals}f}" for m in METRICS), "", ""])
    harness.print_table(headers, rows, separator_before=len(runs))
    print(
        "headline: nDCG@5 and R@5. 95% bootstrap interval on R@5 is about +-0.065: differences under 0.05 are noise."
    )
    for result in runs:
        if result["note"]:
            print(f"note ({result['name']}): {result['note']}")
        if set(result["search_mode_returned"]) != {result["mode"]}:
            print(
                f"warning ({result['name']}): asked for {result['mode']}, got {result['search_mode_returned']}"
            )

    halves = _half_report(dialogues, runs)
    lever_rows = _lever_report(
        dialogues, ingested["teams"], next(r for r in runs if r["name"] == "hybrid + MMR")
    )
    from tests.bench.tasks import run_tasks

    task_report = run_tasks(ingested["teams"], quick=quick, max_results=TOP_K)

    payload = {
        "section": "quality",
        "benchmark": "MADial-Bench en (He et al., NAACL 2025), MIT",
        "data_dir": str(data_dir()),
        "how": {
            "ingest": "one team per user (madial-bart, madial-lisa); key madial-<id>, content = event, "
            "type context, metadata {scene, emotion}, created_at backdated to `time` (12:00 UTC)",
            "query": "dialogue lines before test-turn[0], <BOD> dropped, <Name>: prefixes stripped, joined by newlines",
            "search": f"search.run_search.embed_and_search in-process, the user's team only, max_results={TOP_K}, "
            "min_score left at the selector's default",
            "metrics": "README definitions, mean over 160 dialogues; missing results count as misses",
        },
        "scorer_self_check": {"ok": ok, "got": {m: round(v, 4) for m, v in got.items()}},
        "ingest": report,
        "runs": [{k: v for k, v in r.items() if k not in ("per_dialogue", "rankings")} for r in runs],
        "reference_rows": REFERENCE_ROWS,
        "split": {
            "how": f"sha256('{SPLIT_SALT}:<dialogue line index>') first byte even: tune, odd: held-out",
            "bootstrap": f"{BOOTSTRAP_RESAMPLES} resamples of dialogues, seed {BOOTSTRAP_SEED}, 95% percentile",
            "halves": halves,
        },
        "levers": lever_rows,
        "tasks": task_report,
    }
    return payload


# The default hybrid ranking is "hybrid + MMR": the decay row only ranks by the backdated age.
HALF_RUNS = ("keyword only", "vector only", "hybrid + MMR")
HALF_METRICS = ("R@1", "R@5", "nDCG@5", "MRR@10")


def _interval_cell(values: Sequence[float]) -> str:
    low, high = bootstrap_interval(values)
    return f"{sum(values) / len(values):.3f} [{low:.3f}, {high:.3f}]"


def _half_report(dialogues: list[Dialogue], runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per half: R@1/R@5/nDCG@5/MRR@10 with 95% bootstrap intervals for keyword-only,
    vector-only and the production default."""
    halves: dict[str, Any] = {}
    for half in (TUNE, HELD_OUT):
        members = [i for i, d in enumerate(dialogues) if split_of(d.index) == half]
        print(f"\n-- {half} half: {len(members)} dialogues (95% bootstrap intervals, dialogues resampled)")
        rows = []
        halves[half] = {"dialogues": len(members), "runs": {}}
        for result in runs:
            if result["name"] not in HALF_RUNS:
                continue
            cells = {}
            for metric in HALF_METRICS:
                values = [result["per_dialogue"][i][metric] for i in members]
                low, high = bootstrap_interval(values)
                cells[metric] = {
                    "mean": round(sum(values) / len(values), 4),
                    "ci95": [round(low, 4), round(high, 4)],
                }
            halves[half]["runs"][result["name"]] = cells
            rows.append(
                [
                    result["name"],
                    *(_interval_cell([result["per_dialogue"][i][m] for i in members]) for m in HALF_METRICS),
                ]
            )
        harness.print_table(["run", *HALF_METRICS], rows)
    return halves


# Each lever's decision, written after measuring it (docs/search.md, "Levers measured and dropped").
LEVER_DECISIONS: dict[str, str] = {
    "question-phrase removal (keyword path)": "dropped: no effect on either half "
    "(the english text-search configuration already drops the question words)",
    "reciprocal rank fusion (k=60) instead of weighted sum": "dropped: worse R@5 on tune, "
    "held-out change within noise, and scores would lose the meaning min_score relies on",
    "entity/name boosting (+0.05 per exact name or quoted phrase, max 3)": "kept (default on): better on "
    "tune, held-out R@5 and nDCG@5 up with intervals at or above 0",
    "multiple query embeddings (max over 4-line windows, at most 8)": "dropped: R@5 down on tune, nDCG@5 flat, "
    "held-out within noise; the windows help vector-only, but in hybrid the keyword path already finds what they "
    "add, and the query's embedding costs about 4x",
    "pseudo-relevance feedback, keyword path (RM3: 5 entries, 20 terms, weight 0.3)": "dropped: tune gain within "
    "noise, held-out R@5 and nDCG@5 down",
    "query windows + pseudo-relevance feedback together": "dropped: down on both halves",
    "relative fusion (the vector path min-max scaled over the candidates, times the evidence)": "kept (default on): "
    "up on both halves, held-out R@5 and nDCG@5 intervals above 0; raw cosines of one query sit in a narrow band, so "
    "the raw sum let the keyword path outweigh its 0.3; evidence keeps min_score absolute",
}


def _lever_report(
    dialogues: list[Dialogue], teams: dict[int, Any], default_run: dict[str, Any]
) -> list[dict[str, Any]]:
    """Each lever alone against the production default, on both halves: R@5 and nDCG@5
    without and with it, the paired delta with its 95% bootstrap interval."""
    from search.run_search import embed_query
    from teams.scope import team_scope
    from tests.bench import levers

    per_lever: dict[str, list[dict[str, float]]] = {}
    mismatches = 0
    for number, dialogue in enumerate(dialogues):
        team = teams[dialogue.user_id]
        with team_scope(team.id):
            vector, _ = embed_query(team=team, query=dialogue.query)
            windows = levers.embed_windows(team=team, query=dialogue.query)
            for lever in (levers.BASELINE, *levers.LEVERS):
                ranked = levers.ranked_keys(
                    team=team,
                    query=dialogue.query,
                    vector=vector,
                    lever=lever,
                    max_results=TOP_K,
                    key_prefix=KEY_PREFIX,
                    windows=windows,
                )
                if lever is levers.PRODUCT_DEFAULT and ranked != default_run["rankings"][number]:
                    mismatches += 1
                per_lever.setdefault(lever.name, []).append(score_one(ranked, dialogue.relevant))
    print(
        f"\n-- levers, each alone against the default hybrid ranking, hybrid + MMR: the first ones without any lever, "
        f"the later ones (marked 'on top of') against the default of their time (the bench's pipeline with the kept "
        f"levers reproduces embed_and_search for {len(dialogues) - mismatches} of {len(dialogues)} dialogues)"
    )
    rows: list[dict[str, Any]] = []
    table = []
    for lever in levers.LEVERS:
        base = per_lever[(lever.against or levers.BASELINE).name]
        scores = per_lever[lever.name]
        row: dict[str, Any] = {
            "lever": lever.name,
            "against": (lever.against or levers.BASELINE).name,
            "decision": LEVER_DECISIONS.get(lever.name, "not decided"),
        }
        for half in (TUNE, HELD_OUT):
            members = [i for i, d in enumerate(dialogues) if split_of(d.index) == half]
            for metric in ("R@5", "nDCG@5"):
                without = [base[i][metric] for i in members]
                with_it = [scores[i][metric] for i in members]
                diffs = [w - b for w, b in zip(with_it, without, strict=True)]
                low, high = bootstrap_interval(diffs)
                row[f"{half} {metric}"] = {
                    "without": round(sum(without) / len(without), 4),
                    "with": round(sum(with_it) / len(with_it), 4),
                    "delta": round(sum(diffs) / len(diffs), 4),
                    "delta_ci95": [round(low, 4), round(high, 4)],
                }
        rows.append(row)
        for half in (TUNE, HELD_OUT):
            cells = []
            for metric in ("R@5", "nDCG@5"):
                cell = row[f"{half} {metric}"]
                cells.append(
                    f"{cell['without']:.3f} -> {cell['with']:.3f} "
                    f"({cell['delta']:+.3f} [{cell['delta_ci95'][0]:+.3f}, {cell['delta_ci95'][1]:+.3f}])"
                )
            against = f"on top of: {lever.against.name.split(' (')[0]}" if lever.against else ""
            table.append(
                [
                    lever.name if half == TUNE else against,
                    half,
                    *cells,
                    row["decision"] if half == HELD_OUT else "",
                ]
            )
    harness.print_table(
        ["lever", "half", "R@5 without -> with (delta [95% CI])", "nDCG@5 ...", "decision"], table
    )
    return rows
