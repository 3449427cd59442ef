"""`python -m tests.bench [quality|latency|request_path|capacity|ingest|injection|hardening|mcp|transfer|freshness|contradictions|extraction|scrubber|tokens|capture|facts|unified|all] [--quick] [--scale]` (make bench).

Runs against its own embedded PostgreSQL in .memoryhub/bench, prints a table per
section and writes bench-results/<section>.json with the environment it ran on.
"""

from __future__ import annotations

import argparse
import importlib
import time

from tests.bench import harness
from tests.bench.latency import SCALE_MEMORIES, SCALE_TEAM_SIZE, SCALE_TEAMS

SECTIONS = (
    "quality",
    "latency",
    "request_path",
    "capacity",
    "ingest",
    "injection",
    "hardening",
    "mcp",
    "transfer",
    "freshness",
    "contradictions",
    "extraction",
    "scrubber",
    "tokens",
    "capture",
    "facts",
    "unified",
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench", description=__doc__.splitlines()[0])
    parser.add_argument("section", nargs="?", default="all", choices=[*SECTIONS, "all"])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="latency at 10k only, 100 memories for ingest, 50 calls per row for injection: a few minutes",
    )
    parser.add_argument(
        "--scale",
        action="store_true",
        help=f"latency also measures a {SCALE_TEAM_SIZE:,}-memory team alone, then in a database of "
        "--scale-memories memories over --scale-teams teams: long (seeds and indexes 500k memories by default)",
    )
    parser.add_argument("--scale-memories", type=int, default=SCALE_MEMORIES, help="with --scale")
    parser.add_argument("--scale-teams", type=int, default=SCALE_TEAMS, help="with --scale")
    args = parser.parse_args(argv)
    if args.scale and (args.scale_teams < 2 or args.scale_memories <= SCALE_TEAM_SIZE):
        parser.error(f"--scale needs at least 2 teams and more than {SCALE_TEAM_SIZE:,} memories")
    if args.scale and args.section not in ("latency", "all"):
        parser.error("--scale belongs to the latency section")

    # The environment must point at the bench data folder before Django reads settings.
    harness.prepare_environment()
    env = harness.environment()
    print(
        f"{env['date']}  {env['cpu_count']} CPUs  Python {env['python']}  PostgreSQL {env['postgres']}  "
        f"pgvector {env['pgvector']}  model {env['embedding_model']}  commit {env['git_commit'][:10]}"
        + (" (dirty)" if env["git_dirty"] else "")
    )
    began = time.perf_counter()
    for name in SECTIONS if args.section == "all" else (args.section,):
        module = importlib.import_module(f"tests.bench.{name}")
        started = time.perf_counter()
        options = {"scale": (args.scale_memories, args.scale_teams) if args.scale else None}
        payload = module.run(quick=args.quick, **(options if name == "latency" else {}))
        payload["environment"] = env
        payload["section_seconds"] = round(time.perf_counter() - started, 1)
        harness.write_json(name, payload)
        print(f"{name} took {payload['section_seconds']:.0f} s")
    print(f"\nbench finished in {time.perf_counter() - began:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
