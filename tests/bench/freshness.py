"""`python -m tests.bench freshness`: a full freshness pass over 100k memories.

Ten teams of 10,000 active memories each (100,000 in all), every one last confirmed 200
days ago and never read, so every job has the most to do: every entry but identity is
due, and every one is a prune candidate. A full pass is the due job run until it has
flagged everything (MEMORYHUB_FRESHNESS_DUE_BATCH entries per run, going on from the team
where the last run stopped), then the prune job the same way: what beat would spread over
several runs, back to back.

Target: a full pass <= 60 s on this machine.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from tests.bench import harness
from tests.bench.latency import TextGenerator

TEAMS = 10
PER_TEAM = 10_000
QUICK_PER_TEAM = 1_000
INSERT_BATCH = 5_000
AGE_DAYS = 200
TARGET_SECONDS = 60.0
SEED = 20261123
MAX_RUNS = 1_000  # a runaway detector


def _seed(per_team: int) -> int:
    from django.db import connection
    from django.utils import timezone

    from memories.models import IndexState, Memory
    from teams.roles import as_owner
    from teams.scope import team_scope
    from teams.services import create_team

    generator = TextGenerator(SEED % 1_000)
    then = timezone.now() - timedelta(days=AGE_DAYS)
    made = 0
    for t in range(TEAMS):
        team = create_team(slug=f"bench-fresh-{t}", name=f"Bench freshness {t}")
        with team_scope(team.id):
            for start in range(0, per_team, INSERT_BATCH):
                batch = []
                for i in range(start, min(start + INSERT_BATCH, per_team)):
                    memory_type, content = generator.memory()
                    batch.append(
                        Memory(
                            team=team,
                            key=f"{memory_type}-{i:06d}",
                            content=content,
                            type=memory_type,
                            updated_by="bench-seed",
                            content_hash=Memory.hash_content(content),
                            index_state=IndexState.INDEXED,
                            last_confirmed_at=then,
                        )
                    )
                Memory.objects.bulk_create(batch)
                made += len(batch)
            # created_at is auto_now_add: set after the insert.
            Memory.objects.filter(team=team).update(created_at=then)
    # As autovacuum would have by then: the UPDATE above left a dead row for every entry.
    with as_owner(connection), connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE memories_memory")
    return made


def _until_done(job: Any) -> tuple[float, int, int, int]:
    """Run `job(start_after_team=…)` until a run finds nothing: (seconds, runs, found, opened)."""
    began = time.perf_counter()
    runs = found = opened = 0
    cursor = 0
    while runs < MAX_RUNS:
        run = job(start_after_team=cursor)
        runs += 1
        if run.checked == 0:
            break
        found += run.checked
        opened += getattr(run, "flagged", 0) or getattr(run, "proposed", 0)
        cursor = run.resume_after_team
    return time.perf_counter() - began, runs, found, opened


def run(*, quick: bool = False) -> dict[str, Any]:
    from freshness.services import mark_due_entries, propose_prunes

    per_team = QUICK_PER_TEAM if quick else PER_TEAM
    print(f"\n== freshness: a full pass of the due and prune jobs over {TEAMS * per_team:,} memories ==")
    harness.reset_data()
    started = time.perf_counter()
    size = _seed(per_team)
    print(f"seeded {size:,} memories in {TEAMS} teams in {time.perf_counter() - started:.1f} s")

    due_seconds, due_runs, due_found, due_opened = _until_done(mark_due_entries)
    prune_seconds, prune_runs, prune_found, prune_opened = _until_done(propose_prunes)
    total = due_seconds + prune_seconds
    met = total <= TARGET_SECONDS
    harness.print_table(
        ["job", "runs", "entries found", "nudges opened", "seconds", "entries/s"],
        [
            ["due", str(due_runs), f"{due_found:,}", f"{due_opened:,}", f"{due_seconds:.1f}",
             f"{due_found / due_seconds:,.0f}"],
            ["prune", str(prune_runs), f"{prune_found:,}", f"{prune_opened:,}", f"{prune_seconds:.1f}",
             f"{prune_found / prune_seconds:,.0f}"],
        ],
    )  # fmt: skip
    print(f"full pass {total:.1f} s (target <= {TARGET_SECONDS:.0f} s: {'met' if met else 'MISSED'})")
    return {
        "section": "freshness",
        "how": (
            f"{TEAMS} teams x {per_team} active memories confirmed {AGE_DAYS} days ago, never read; "
            "each job run back to back from its resume cursor until a run finds nothing"
        ),
        "memories": size,
        "due": {"runs": due_runs, "found": due_found, "opened": due_opened, "seconds": round(due_seconds, 2)},
        "prune": {
            "runs": prune_runs,
            "found": prune_found,
            "opened": prune_opened,
            "seconds": round(prune_seconds, 2),
        },
        "full_pass_seconds": round(total, 2),
        "target_seconds": TARGET_SECONDS,
        "target_met": met,
    }
