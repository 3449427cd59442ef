"""`python -m tests.bench contradictions`: contradiction nudges through the whole save
flow, on the contradiction set (tests/bench/contradiction_set).

For each labelled pair, a team of its own: save `old`, save `new` (memories.use_cases.
save_entry, the use case REST and MCP run: the scrub, the duplicate check, the insert,
then indexing and the contradiction pass after commit, in process as the broker-less
default runs them), then look whether a `contradiction` nudge opened. A pair whose new
text the duplicate check refused opens none, as for a user. Precision and recall are
of "a nudge opened", with 95% Wilson intervals, for the held-out split (reported) and
the tune split (what the rules were adjusted on).

Two more rows: 100 template-like entries about different subjects saved one at a time,
and 150 near-identical entries of one template in one batch (memories/batch/'s use
case); both should open no nudge. Also the judge alone on every pair (no database), and
the rows of the old set (tests/freshness/contradiction_pairs.jsonl).
"""

from __future__ import annotations

import time
from typing import Any

from tests.bench import harness

TEAM_PREFIX = "bench-contra"
BATCH_SIZE = 150


def _team(slug: str) -> Any:
    from teams.services import create_team

    return create_team(slug=slug, name=slug)


def _nudge_count(team: Any) -> tuple[int, list[float]]:
    from freshness.models import Nudge, NudgeKind
    from teams.scope import team_scope

    with team_scope(team.id):
        rows = list(
            Nudge.objects.filter(team=team, kind=NudgeKind.CONTRADICTION).values_list("confidence", flat=True)
        )
    return len(rows), [r for r in rows if r is not None]


def _save(team: Any, key: str, content: str) -> str:
    """One save as the doors make it; its indexing and contradiction pass run after commit."""
    from memories.inputs import SaveArguments
    from memories.use_cases import save_entry
    from teams.scope import team_scope

    with team_scope(team.id):
        result = save_entry(team=team, arguments=SaveArguments(key=key, content=content), updated_by="bench")
    return "saved" if result.saved else "refused as a duplicate"


def _save_flow(pairs: list[Any]) -> tuple[dict[str, tuple[bool, str]], float]:
    flagged: dict[str, tuple[bool, str]] = {}
    started = time.perf_counter()
    for number, pair in enumerate(pairs):
        team = _team(f"{TEAM_PREFIX}-{number}")
        _save(team, pair.old_key, pair.old)
        outcome = _save(team, pair.new_key, pair.new)
        count, confidences = _nudge_count(team)
        why = outcome if count == 0 else f"{count} nudge(s), confidence {confidences}"
        flagged[pair.id] = (count > 0, why)
    return flagged, time.perf_counter() - started


def _templates_one_at_a_time(count: int) -> dict[str, Any]:
    from tests.bench.contradiction_set import template_entries

    team = _team(f"{TEAM_PREFIX}-templates")
    started = time.perf_counter()
    outcomes = [_save(team, key, text) for key, text in template_entries(count)]
    nudges, _ = _nudge_count(team)
    return {
        "entries": count,
        "saved": outcomes.count("saved"),
        "nudges": nudges,
        "seconds": round(time.perf_counter() - started, 1),
    }


def _near_identical_batch(count: int) -> dict[str, Any]:
    from memories.inputs import SaveArguments
    from memories.use_cases import batch_entry
    from memories.writes import save_batch
    from teams.scope import team_scope

    team = _team(f"{TEAM_PREFIX}-batch")
    # One template, one subject per entry, values that differ a little: what a script
    # importing a table row by row saves.
    texts = [
        (
            f"nightly-export-{i}",
            f"Nightly export run {i}: {1000 + 37 * i} rows written to the warehouse in {3 + i % 5} minutes, "
            f"status {'ok' if i % 7 else 'retried'}.",
        )
        for i in range(count)
    ]
    started = time.perf_counter()
    with team_scope(team.id):
        entries = [
            batch_entry(team=team, index=i, arguments=SaveArguments(key=key, content=text))
            for i, (key, text) in enumerate(texts)
        ]
        outcomes = save_batch(team=team, entries=entries, updated_by="bench")
    nudges, _ = _nudge_count(team)
    return {
        "entries": count,
        "saved": sum(1 for o in outcomes if o.result is not None and o.result.saved),
        "nudges": nudges,
        "seconds": round(time.perf_counter() - started, 1),
    }


def _judge_alone(pairs: list[Any]) -> dict[str, tuple[bool, str]]:
    from freshness.contradictions import Label, judge_pair
    from tests.freshness.labelled_pairs import bundled_embedder

    texts = sorted({text for pair in pairs for text in (pair.old, pair.new)})
    vectors = dict(zip(texts, bundled_embedder().embed_documents(texts), strict=True))
    flagged = {}
    for pair in pairs:
        similarity = sum(a * b for a, b in zip(vectors[pair.new], vectors[pair.old], strict=True))
        verdict = judge_pair(pair.new, pair.old, similarity)
        flagged[pair.id] = (verdict.label == Label.CONTRADICTING, f"{verdict.rule}: {verdict.reason}")
    return flagged


def _per_rule(pairs: list[Any], judged: dict[str, tuple[bool, str]]) -> dict[str, dict[str, Any]]:
    """Each rule's right and wrong calls on `pairs`, and the lower end of the 95% Wilson
    interval of its precision: what freshness.contradictions.RULE_CONFIDENCE holds."""
    from tests.bench import contradiction_set as cs

    counts: dict[str, list[int]] = {}
    for pair in pairs:
        hit, why = judged[pair.id]
        if hit:
            counts.setdefault(why.split(":", 1)[0], [0, 0])[0 if pair.contradicts else 1] += 1
    return {
        rule: {"right": right, "wrong": wrong, "precision_low": round(cs.wilson(right, right + wrong)[0], 3)}
        for rule, (right, wrong) in sorted(counts.items())
    }


def _row(name: str, scored: Any, target: bool) -> list[str]:
    from tests.bench import contradiction_set as cs

    low, high = scored.precision_interval()
    r_low, r_high = scored.recall_interval()
    meets = scored.precision >= cs.TARGET_PRECISION and scored.recall >= cs.TARGET_RECALL
    return [
        name,
        str(scored.true_positives + scored.false_positives + scored.false_negatives + scored.true_negatives),
        f"{scored.precision:.3f} [{low:.3f}, {high:.3f}]",
        f"{scored.recall:.3f} [{r_low:.3f}, {r_high:.3f}]",
        f"{scored.true_positives}/{scored.false_positives}/{scored.false_negatives}",
        ("yes" if meets else "NO") if target else "-",
    ]


def run(*, quick: bool = False) -> dict[str, Any]:
    """`quick` saves the held-out pairs only (the tune split is judged without saving)."""
    from tests.bench import contradiction_set as cs

    pairs = cs.load_pairs()
    held_out = [p for p in pairs if p.split == cs.HELD_OUT]
    tune = [p for p in pairs if p.split == cs.TUNE]
    print(
        f"\n== contradictions: {len(pairs)} labelled pairs of team memory ({len(held_out)} held out, "
        f"{len(tune)} tune; {sum(p.contradicts for p in pairs)} contradicting), saved through the "
        f"save flow, target precision >= {cs.TARGET_PRECISION} at recall >= {cs.TARGET_RECALL} =="
    )
    harness.reset_data()
    flow_pairs = held_out if quick else held_out + tune
    flagged, seconds = _save_flow(flow_pairs)
    judged = _judge_alone(pairs)

    scores = {
        "save flow, held out": cs.score(held_out, flagged),
        "judge alone, held out": cs.score(held_out, judged),
        "judge alone, tune": cs.score(tune, judged),
    }
    if not quick:
        scores["save flow, tune"] = cs.score(tune, flagged)
    rows = [_row(name, scored, name == "save flow, held out") for name, scored in scores.items()]
    harness.print_table(["row", "pairs", "precision [95%]", "recall [95%]", "tp/fp/fn", "target"], rows)
    print(f"saved {2 * len(flow_pairs)} entries in {len(flow_pairs)} teams in {seconds:.0f} s")

    rules = _per_rule(tune, judged)
    print(
        "\nper rule on the tune split (judge alone): "
        + ", ".join(
            f"{rule} {r['right']} right / {r['wrong']} wrong (precision >= {r['precision_low']})"
            for rule, r in rules.items()
        )
    )
    templates = _templates_one_at_a_time(100)
    batch = _near_identical_batch(BATCH_SIZE)
    harness.print_table(
        ["bulk row", "entries", "saved", "contradiction nudges", "seconds"],
        [
            [
                "template-like entries, one save each",
                *(str(templates[k]) for k in ("entries", "saved", "nudges", "seconds")),
            ],
            [
                "near-identical entries, one batch",
                *(str(batch[k]) for k in ("entries", "saved", "nudges", "seconds")),
            ],
        ],
    )
    mistakes = scores["save flow, held out"].mistakes
    if mistakes:
        print("\nheld-out mistakes of the save flow:")
        for m in mistakes:
            print(
                f"  {'FP' if m['flagged'] else 'FN'} {m['id']}: {m['old'][:80]!r} / {m['new'][:80]!r} ({m['why']})"
            )
    return {
        "pairs": len(pairs),
        "held_out": len(held_out),
        "tune": len(tune),
        "target": {"precision": cs.TARGET_PRECISION, "recall": cs.TARGET_RECALL},
        "rows": {name: scored.as_dict() for name, scored in scores.items()},
        "rules_on_tune": rules,
        "templates_one_at_a_time": templates,
        "near_identical_batch": batch,
        "save_flow_seconds": round(seconds, 1),
    }
