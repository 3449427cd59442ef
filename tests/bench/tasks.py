"""The quality bench's tasks: MADial's own (a whole conversation as the query), two
keyword-leaning tasks built from MADial's files, and a no-relevant-answer task.

- `madial`: the dialogue before its first test turn against the user's memories
  (tests/bench/quality.py), vector-leaning.
- `recall turn`: the recall turn itself ("Do you remember dancing at last year's
  Christmas party?") against the user's memories, gold = the dialogue's relevant ids.
  Short questions that name what they ask about: keyword-leaning.
- `turns as memories`: every conversation line (not <BOD>/<EOD>) is a memory of its
  user (about 700 each), and each memory event named in a dialogue's gold list is a
  query whose gold is the recall turns (test turns) of those dialogues: evidence of one
  or more turns, short chat lines against a one-sentence query, keyword-leaning.
- `no relevant answer`: MADial's queries with their gold memories archived (out of
  search) for the length of the query, rolled back after it: how often at most one
  result comes back.
- `identifiers`: every MADial memory again, in teams of their own, each with one
  made-up identifier appended (`ingestmark00042`, `ERR_4042`, `INC-20042`,
  `zq-marker-42`, `billingSvcV42`, `sync_job_042`: one shape per memory, by its id),
  and each identifier as the query, its memory the gold: whether an identifier-like
  query (search.retrieval.identifiers) finds the one entry holding it first (R@1).
  Every memory holds an identifier of its shape family, so to the model they all look
  alike, as the ingest bench's markers did.

Every task is split into a tune and a held-out half by a stable hash of the query's
id, and reported with 95% bootstrap intervals (tests/bench/quality.py). Each query's
candidates are gathered once, through the product's own first step, and each ranking
under comparison (tests/bench/levers.py, `RANKINGS`) is computed over them; the bench
checks that the default ranking returns what `embed_and_search` returns.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.bench import quality

TURN_TEAM_SLUGS = {1: "madial-turns-bart", 2: "madial-turns-lisa"}
TURN_KEY_PREFIX = "turn-"
# A turn's id: its dialogue's line number times this, plus its line in the dialogue.
TURN_ID_BASE = 1000
TURNS_SPLIT_SALT = "madial-turns-split-v1"
TASK_METRICS = ("R@5", "nDCG@5", "MRR@10")
IDENTIFIER_TEAM_SLUGS = {1: "madial-ids-bart", 2: "madial-ids-lisa"}
IDENTIFIER_KEY_PREFIX = "ident-"
IDENTIFIERS_SPLIT_SALT = "madial-identifiers-split-v1"


@dataclass(frozen=True)
class TaskQuery:
    id: int  # stable: the split hashes it
    user_id: int
    text: str
    gold: tuple[int, ...]


@dataclass(frozen=True)
class Task:
    name: str
    queries: list[TaskQuery]
    key_prefix: str
    split_salt: str
    # Gold memories archived while the query runs: the no-relevant-answer task.
    without_gold: bool = False
    metrics: tuple[str, ...] = TASK_METRICS


@dataclass(frozen=True)
class TurnMemory:
    id: int
    user_id: int
    text: str


def split_of(query_id: int, salt: str) -> str:
    """As quality.split_of, with the task's salt (MADial's own for its dialogues)."""
    digest = hashlib.sha256(f"{salt}:{query_id}".encode()).digest()
    return quality.TUNE if digest[0] % 2 == 0 else quality.HELD_OUT


def _dialogue_rows(base: Path | None = None) -> list[dict[str, Any]]:
    return quality._json_lines((base or quality.data_dir()) / "en" / "MADial-Bench-en-dialogue.json")


def _line_text(line: str) -> str:
    return quality.SPEAKER_PREFIX.sub("", line.strip()).strip().strip('"').strip()


def madial_queries(base: Path | None = None) -> list[TaskQuery]:
    return [
        TaskQuery(id=d.index, user_id=d.user_id, text=d.query, gold=d.relevant)
        for d in quality.load_dialogues(base)
    ]


def recall_turn_queries(base: Path | None = None) -> list[TaskQuery]:
    """The first test turn of each dialogue, prefix and quotes stripped, as the query."""
    return [
        TaskQuery(
            id=i,
            user_id=int(row["user-id"]),
            text=_line_text(row["dialogue"][row["test-turn"][0]]),
            gold=tuple(int(x) for x in row["relevant-id"]),
        )
        for i, row in enumerate(_dialogue_rows(base))
    ]


def turn_memories(base: Path | None = None) -> list[TurnMemory]:
    """Every utterance line of every dialogue, as a memory of the dialogue's user."""
    turns = []
    for i, row in enumerate(_dialogue_rows(base)):
        for j, line in enumerate(row["dialogue"]):
            text = _line_text(line)
            if text and line.strip() not in ("<BOD>", "<EOD>"):
                turns.append(TurnMemory(id=i * TURN_ID_BASE + j, user_id=int(row["user-id"]), text=text))
    return turns


def turn_queries(base: Path | None = None) -> list[TaskQuery]:
    """Each memory named in some dialogue's gold list, its event as the query; gold:
    the test turns of every dialogue that names it."""
    events = {m.id: m for m in quality.load_memories(base)}
    gold: dict[int, set[int]] = {}
    for i, row in enumerate(_dialogue_rows(base)):
        for memory_id in row["relevant-id"]:
            gold.setdefault(int(memory_id), set()).update(i * TURN_ID_BASE + t for t in row["test-turn"])
    return [
        TaskQuery(
            id=memory_id,
            user_id=events[memory_id].user_id,
            text=events[memory_id].event,
            gold=tuple(sorted(g)),
        )
        for memory_id, g in sorted(gold.items())
    ]


def identifier_of(memory_id: int) -> str:
    """The made-up identifier appended to a memory in the identifiers task: one of six
    shapes by its id."""
    shapes = (
        f"ingestmark{memory_id:05d}",
        f"ERR_{4000 + memory_id}",
        f"INC-{20000 + memory_id}",
        f"zq-marker-{memory_id}",
        f"billingSvcV{memory_id}",
        f"sync_job_{memory_id:03d}",
    )
    return shapes[memory_id % len(shapes)]


def identifier_memories(base: Path | None = None) -> list[TurnMemory]:
    """Every MADial memory's event with its identifier appended, as the ingest bench's
    marker word was."""
    return [
        TurnMemory(id=m.id, user_id=m.user_id, text=f"{m.event} Tag {identifier_of(m.id)}.")
        for m in quality.load_memories(base)
    ]


def identifier_queries(base: Path | None = None) -> list[TaskQuery]:
    return [
        TaskQuery(id=m.id, user_id=m.user_id, text=identifier_of(m.id), gold=(m.id,))
        for m in quality.load_memories(base)
    ]


IDENTIFIERS_TASK = "identifiers"


def all_tasks(base: Path | None = None) -> list[Task]:
    madial = madial_queries(base)
    return [
        Task("madial", madial, quality.KEY_PREFIX, quality.SPLIT_SALT),
        Task("recall turn", recall_turn_queries(base), quality.KEY_PREFIX, quality.SPLIT_SALT),
        Task("turns as memories", turn_queries(base), TURN_KEY_PREFIX, TURNS_SPLIT_SALT),
        Task("no relevant answer", madial, quality.KEY_PREFIX, quality.SPLIT_SALT, without_gold=True),
        Task(
            IDENTIFIERS_TASK,
            identifier_queries(base),
            IDENTIFIER_KEY_PREFIX,
            IDENTIFIERS_SPLIT_SALT,
            metrics=("R@1", "MRR@10", "R@5"),
        ),
    ]


def ingest_turns(
    turns: Sequence[TurnMemory], slugs: dict[int, str] = TURN_TEAM_SLUGS, key_prefix: str = TURN_KEY_PREFIX
) -> dict[int, Any]:
    """One team per user holding its dialogues' lines (or the identifiers task's
    memories), saved and indexed as the MADial memories are (quality._ingest); no
    backdating (decay is off in the comparison)."""
    from memories.writes import save_memory
    from search.services import index_memory
    from teams.models import Team
    from teams.scope import team_scope
    from teams.services import create_team

    teams = {uid: create_team(slug=slug, name=f"MADial {slug}") for uid, slug in slugs.items()}
    for turn in turns:
        team = teams[turn.user_id]
        with team_scope(team.id):
            saved = save_memory(
                team=team,
                key=f"{key_prefix}{turn.id}",
                content=turn.text,
                updated_by="bench",
                type_name="context",
                allow_duplicate=True,
            )
        index_memory(team_id=team.id, memory_id=saved.memory.id)
    return {uid: Team.objects.get(id=team.id) for uid, team in teams.items()}


# --------------------------------------------------------------------------- gathering


@dataclass
class Gathered:
    """One query's candidates (the product's first step, every version), their
    memories, and what embed_and_search returned for it (the default's keys)."""

    query: TaskQuery
    found: dict[uuid.UUID, Any]
    memories: dict[uuid.UUID, Any]
    product: list[int] = field(default_factory=list)


def gather(task: Task, teams: dict[int, Any], *, max_results: int) -> list[Gathered]:
    """Each query's candidates, and the product's answer (decay off, as in the lever
    comparison). For `without_gold`, inside a transaction that archives the query's
    gold memories first and is rolled back after."""
    from django.db import transaction

    from memories.models import Memory
    from search.retrieval.candidates import SearchFilters, gather_candidates
    from search.run_search import embed_and_search, embed_query
    from teams.scope import team_scope

    out = []
    for q in task.queries:
        team = teams[q.user_id]
        with team_scope(team.id), transaction.atomic():
            if task.without_gold:
                keys = [f"{task.key_prefix}{g}" for g in q.gold]
                Memory.objects.for_team(team.id).filter(key__in=keys).update(
                    is_active=False, archived_at=datetime.now(UTC)
                )
            vector, _ = embed_query(team=team, query=q.text)
            filters = SearchFilters(team_id=team.id, types=None, project=None, include_superseded=True)
            found = gather_candidates(
                query=q.text, vector=vector, filters=filters, mode="hybrid", limit=max(max_results * 4, 40)
            )
            memories = {m.id: m for m in Memory.objects.for_team(team.id).filter(id__in=list(found))}
            outcome = embed_and_search(team=team, query=q.text, max_results=max_results, decay=False)
            product = [int(r.key.removeprefix(task.key_prefix)) for r in outcome.results]
            transaction.set_rollback(True)
        out.append(Gathered(q, found, memories, product))
    return out


def timed_ingest(turns: Sequence[TurnMemory]) -> tuple[dict[int, Any], float]:
    started = time.perf_counter()
    teams = ingest_turns(turns)
    return teams, time.perf_counter() - started


# --------------------------------------------------------------------------- rankings


def _scored(g: Gathered, team: Any, **options: Any) -> list[Any]:
    from django.utils import timezone

    from search.retrieval.entities import query_entities
    from search.retrieval.scoring import Weights, score_candidates

    return score_candidates(
        g.found.values(),
        g.memories,
        mode="hybrid",
        weights=Weights(vector=team.hybrid_vector_weight, keyword=team.hybrid_keyword_weight),
        half_life_days=team.decay_half_life_days,
        now=timezone.now(),
        decay=False,
        entities=query_entities(g.query.text),
        **options,
    )


def _picked(g: Gathered, scored: list[Any], prefix: str, max_results: int) -> list[int]:
    from search.retrieval.mmr import diversify

    picked = diversify(scored, {m.id: m.content for m in g.memories.values()}, max_results)
    return [int(g.memories[s.candidate.memory_id].key.removeprefix(prefix)) for s in picked]


MAIN_DEFAULT = "main's default (relative fusion, no floor)"
FLOORED = "relevance floor 0.2"
IDENTIFIER_LEAD = "+ identifier queries: keyword leads (the default now)"
ADAPTIVE = "adaptive fusion (weights by separation, top 5)"
SALIENCE = "salience: simulated access counts (+5% per doubling, cap +25%)"
RANKINGS = (MAIN_DEFAULT, FLOORED, IDENTIFIER_LEAD, ADAPTIVE, SALIENCE)
# The ranking embed_and_search gives, which the bench checks it reproduces.
DEFAULT_NOW = IDENTIFIER_LEAD


def identifier_rule_fires(g: Gathered) -> bool:
    """The query is identifier-like and the keyword path found a candidate: the
    keyword path leads for it (search.retrieval.scoring)."""
    from search.retrieval.identifiers import is_identifier_query

    return is_identifier_query(g.query.text) and any(c.keyword_rank > 0 for c in g.found.values())


def rankings_of(
    task: Task, gathered: Sequence[Gathered], teams: dict[int, Any], max_results: int
) -> dict[str, list[list[int]]]:
    """Every ranking of RANKINGS for every query of `task`."""
    from dataclasses import replace as replaced

    from search.retrieval.identifiers import is_identifier_query
    from search.selectors import RELEVANCE_FLOOR
    from tests.bench.levers import salience_factor

    p = task.key_prefix
    out: dict[str, list[list[int]]] = {name: [] for name in RANKINGS}
    base_scored = [_scored(g, teams[g.query.user_id]) for g in gathered]
    for g, scored in zip(gathered, base_scored, strict=True):
        team = teams[g.query.user_id]
        out[MAIN_DEFAULT].append(_picked(g, scored, p, max_results))
        out[FLOORED].append(_picked(g, _scored(g, team, relevance_floor=RELEVANCE_FLOOR), p, max_results))
        leads = is_identifier_query(g.query.text)
        out[IDENTIFIER_LEAD].append(
            _picked(g, _scored(g, team, relevance_floor=RELEVANCE_FLOOR, keyword_leads=leads), p, max_results)
        )
        out[ADAPTIVE].append(_picked(g, _scored(g, team, fusion="adaptive"), p, max_results))
    # Access counts of the other half: what the default's top 5 showed there.
    accesses: dict[str, dict[int, int]] = {quality.TUNE: {}, quality.HELD_OUT: {}}
    for g, ranked in zip(gathered, out[MAIN_DEFAULT], strict=True):
        other = quality.HELD_OUT if split_of(g.query.id, task.split_salt) == quality.TUNE else quality.TUNE
        for memory_key in ranked[:5]:
            accesses[other][memory_key] = accesses[other].get(memory_key, 0) + 1
    for g, scored in zip(gathered, base_scored, strict=True):
        counts = accesses[split_of(g.query.id, task.split_salt)]
        boosted = [
            replaced(
                s,
                score=s.score
                * salience_factor(counts.get(int(g.memories[s.candidate.memory_id].key.removeprefix(p)), 0)),
            )
            for s in scored
        ]
        boosted.sort(key=lambda s: (-s.score, str(s.candidate.memory_id)))
        out[SALIENCE].append(_picked(g, boosted, p, max_results))
    return out


# --------------------------------------------------------------------------- report


def _cell(values: Sequence[float]) -> dict[str, Any]:
    low, high = quality.bootstrap_interval(values)
    return {"mean": round(sum(values) / len(values), 4), "ci95": [round(low, 4), round(high, 4)]}


def _text(cell: dict[str, Any], signed: bool = False) -> str:
    f = "+.3f" if signed else ".3f"
    return f"{cell['mean']:{f}} [{cell['ci95'][0]:{f}}, {cell['ci95'][1]:{f}}]"


def report_task(
    task: Task, gathered: Sequence[Gathered], rankings: dict[str, list[list[int]]]
) -> dict[str, Any]:
    """Per half and ranking: the metrics with intervals and the paired delta against
    main's default; for the no-relevant-answer task, the share of queries answered
    with at most one result."""
    from tests.bench import harness

    halves = {
        half: [i for i, g in enumerate(gathered) if split_of(g.query.id, task.split_salt) == half]
        for half in (quality.TUNE, quality.HELD_OUT)
    }
    mismatches = sum(1 for r, g in zip(rankings[DEFAULT_NOW], gathered, strict=True) if r != g.product)
    fired = sum(1 for g in gathered if identifier_rule_fires(g))
    changed = sum(1 for a, b in zip(rankings[FLOORED], rankings[IDENTIFIER_LEAD], strict=True) if a != b)
    result: dict[str, Any] = {
        "queries": len(gathered),
        "default_mismatches": mismatches,
        "identifier_rule_fired": fired,
        "identifier_rule_changed_rankings": changed,
        "halves": {},
    }
    print(
        f"\n-- task {task.name}: {len(gathered)} queries ({', '.join(f'{h} {len(m)}' for h, m in halves.items())}); "
        f"the default ranking here reproduces embed_and_search for {len(gathered) - mismatches} of {len(gathered)}; "
        f"the identifier rule fired on {fired} and changed {changed} rankings"
    )
    rows = []
    for half, members in halves.items():
        result["halves"][half] = {}
        for name in RANKINGS:
            ranked = rankings[name]
            if task.without_gold:
                at_most_one = [1.0 if len(ranked[i]) <= 1 else 0.0 for i in members]
                cells = {
                    "at most 1 result": _cell(at_most_one),
                    "mean results": round(sum(len(ranked[i]) for i in members) / len(members), 2),
                }
                rows.append([name, half, _text(cells["at most 1 result"]), f"{cells['mean results']:.1f}"])
            else:
                cells = {}
                texts = []
                for metric in task.metrics:
                    values = [quality.score_one(ranked[i], gathered[i].query.gold)[metric] for i in members]
                    base = [
                        quality.score_one(rankings[MAIN_DEFAULT][i], gathered[i].query.gold)[metric]
                        for i in members
                    ]
                    cells[metric] = _cell(values)
                    cells[f"{metric} delta"] = _cell([v - b for v, b in zip(values, base, strict=True)])
                    texts.append(
                        _text(cells[metric])
                        + ("" if name == MAIN_DEFAULT else f" ({_text(cells[f'{metric} delta'], True)})")
                    )
                rows.append([name, half, *texts])
            result["halves"][half][name] = cells
    if task.without_gold:
        harness.print_table(["ranking", "half", "share with <= 1 result [95% CI]", "mean results"], rows)
    else:
        harness.print_table(["ranking", "half", *(f"{m} (delta vs main)" for m in task.metrics)], rows)
    return result


def run_tasks(madial_teams: dict[int, Any], *, quick: bool, max_results: int) -> dict[str, Any]:
    """Every task of all_tasks (quick: without the turns task, whose ingest takes
    minutes), gathered, ranked and reported."""
    turns_teams: dict[int, Any] = {}
    report: dict[str, Any] = {"rankings": list(RANKINGS), "tasks": {}}
    identifier_teams = ingest_turns(identifier_memories(), IDENTIFIER_TEAM_SLUGS, IDENTIFIER_KEY_PREFIX)
    if not quick:
        turns_teams, seconds = timed_ingest(turn_memories())
        report["turns_ingest_seconds"] = round(seconds, 1)
        print(f"\nturns task: ingested {len(turn_memories())} conversation lines in {seconds:.0f} s")
    for task in all_tasks():
        if task.key_prefix == TURN_KEY_PREFIX and quick:
            continue
        teams = {TURN_KEY_PREFIX: turns_teams, IDENTIFIER_KEY_PREFIX: identifier_teams}.get(
            task.key_prefix, madial_teams
        )
        gathered = gather(task, teams, max_results=max_results)
        report["tasks"][task.name] = report_task(
            task, gathered, rankings_of(task, gathered, teams, max_results)
        )
    return report
