"""`python -m tests.drill [load|faults] [--seconds N] [--agents N] [--teams N] [--outage N]`
(make drill runs both).

load: the load drill against `make run`'s processes (gunicorn with its default workers, a
Celery worker, the embedded Redis) on the bench's own embedded PostgreSQL; prints its
tables and writes bench-results/drill-load.json (tests.drill.load).

faults: the fault drills, each a test against real processes (`pytest -m drill` and the
outage tests of the suite), with a longer outage than `make test` uses; prints what each
measured and writes bench-results/drill-faults.json.

Exits 1 when a target is missed or a drill fails."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.bench import harness
from tests.drill.load import AgentPlan, failures, run_load
from tests.drill.record import OUTAGE_VARIABLE, RESULTS_VARIABLE

MAX_REQUESTS_PER_AGENT = 5_000  # the drill's bound besides its time
# The drills of `-m drill`, and the suite's own outage tests, which record their figures too.
FAULT_DRILLS = [
    "tests/drill",
    "tests/search/test_celery_worker.py::test_killing_the_worker_mid_batch_leaves_every_memory_indexed_exactly_once",
    "tests/memoryhub/test_database_outage.py",
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.drill", description=__doc__.splitlines()[0])
    parser.add_argument("drill", nargs="?", default="load", choices=["load", "faults"])
    parser.add_argument("--seconds", type=float, default=300.0)
    parser.add_argument("--outage", type=float, default=30.0, help="faults: seconds a component stays down")
    parser.add_argument("--agents", type=int, default=50)
    parser.add_argument("--teams", type=int, default=10)
    args = parser.parse_args(argv)
    if args.agents < args.teams or args.teams < 2:
        parser.error("at least 2 teams, and at least one agent per team")
    if args.drill == "faults":
        return run_faults(args.outage)

    harness.prepare_environment()
    from django.conf import settings

    from teams.services import create_team, create_token

    harness.reset_data()
    plans = []
    for t in range(args.teams):
        team = create_team(slug=f"drill-{t}", name=f"Drill team {t}")
        for a in range(t, args.agents, args.teams):
            token = create_token(team=team, name=f"agent-{a}", scopes=["read", "write"], actor="drill").raw
            plans.append(AgentPlan(team=team.slug, token=token, name=f"agent{a}"))
    queue = getattr(settings, "CELERY_TASK_DEFAULT_QUEUE", None) or "celery"
    print(f"\n== load drill: {args.agents} agents in {args.teams} teams for {args.seconds:.0f} s ==")
    with (
        harness.embedded_redis() as redis_url,
        harness.celery_worker(redis_url=redis_url, queue=queue),
        harness.api_server(workers=None, REDIS_URL=redis_url) as base,
    ):
        report = run_load(base, plans, seconds=args.seconds, max_requests=MAX_REQUESTS_PER_AGENT)
    print_report(report)
    report["how"] = (
        f"{args.agents} agents (a token each) in {args.teams} teams, {args.seconds:.0f} s, mix 60% search, "
        "20% save/supersede, 10% injection, 10% list/get/history, 0-200 ms think time; make run's defaults"
    )
    found = failures(report)
    report["failures"] = found
    harness.write_json("drill-load", {"environment": harness.environment(), **report})
    for failure in found:
        print(f"MISSED: {failure}")
    return 1 if found else 0


def run_faults(outage: float) -> int:
    with tempfile.TemporaryDirectory() as folder:
        results = Path(folder) / "faults.json"
        env = {**os.environ, RESULTS_VARIABLE: str(results), OUTAGE_VARIABLE: str(outage)}
        print(f"\n== fault drills (outages of {outage:.0f} s) ==", flush=True)
        finished = subprocess.run(  # noqa: S603
            [sys.executable, "-m", "pytest", "-m", "drill or not drill", "-q", *FAULT_DRILLS],
            env=env,
            check=False,
        )
        found = json.loads(results.read_text()) if results.exists() else {}
    harness.print_table(
        ["drill", "what it measured"],
        [[name, ", ".join(f"{k} {v}" for k, v in figures.items())] for name, figures in found.items()],
    )
    harness.prepare_environment()
    harness.write_json(
        "drill-faults",
        {"environment": harness.environment(), "passed": finished.returncode == 0, "drills": found},
    )
    return finished.returncode


def print_report(report: dict[str, object]) -> None:
    latency = report["latency_ms"]
    assert isinstance(latency, dict)
    harness.print_table(
        ["operation", "requests", "p50 ms", "p95 ms", "p99 ms"],
        [
            [op, str(fig["requests"]), f"{fig['p50']:.1f}", f"{fig['p95']:.1f}", f"{fig['p99']:.1f}"]
            for op, fig in latency.items()
        ],
    )
    verification = report["verification"]
    assert isinstance(verification, dict)
    print(
        f"{report['requests']} requests in {report['seconds']} s ({report['throughput_per_s']}/s); "
        f"statuses {report['statuses']}; 429 {report['throttled_429']} (apart); "
        f"errors {report['errors']} (rate {report['error_rate']:.4%}); 5xx {report['responses_500']}; "
        f"cross-team reads {len(report['cross_team_reads'])}"  # type: ignore[arg-type]
    )
    print(
        f"verified {verification['acknowledged_writes']} acknowledged writes on {verification['keys_checked']} "
        f"keys: lost {len(verification['lost_or_altered'])}, broken chains {len(verification['broken_chains'])}, "
        f"wrong active {len(verification['wrong_active'])}, duplicate actives {len(verification['duplicate_actives'])}"
    )


if __name__ == "__main__":
    raise SystemExit(main())
