"""`python -m tests.bench [quality|latency|ingest|injection|hardening|mcp|transfer|freshness|contradictions|extraction|all] [--quick]` (make bench).

Runs against its own embedded PostgreSQL in .memoryhub/bench, prints a table per
section and writes bench-results/<section>.json with the environment it ran on.
"""

from __future__ import annotations

import argparse
import importlib
import time

from tests.bench import harness

SECTIONS = (
    "quality",
    "latency",
    "ingest",
    "injection",
    "hardening",
    "mcp",
    "transfer",
    "freshness",
    "contradictions",
    "extraction",
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench", description=__doc__.splitlines()[0])
    parser.add_argument("section", nargs="?", default="all", choices=[*SECTIONS, "all"])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="latency at 10k only, 100 memories for ingest, 50 calls per row for injection: a few minutes",
    )
    args = parser.parse_args(argv)

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
        payload = module.run(quick=args.quick)
        payload["environment"] = env
        payload["section_seconds"] = round(time.perf_counter() - started, 1)
        harness.write_json(name, payload)
        print(f"{name} took {payload['section_seconds']:.0f} s")
    print(f"\nbench finished in {time.perf_counter() - began:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
