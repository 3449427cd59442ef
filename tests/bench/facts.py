"""`python -m tests.bench facts`: an exact fact lookup through the API at 100k facts.

One team of SIZE active facts (entities of KEYS_PER_ENTITY keys each; one in ten has a
superseded version too, so the table holds history as a real one does), written by
INSERT ... SELECT. The requests go to one gunicorn server (the deployment's config,
threaded workers, the read budget counted in an embedded Redis as `make run` counts it)
with httpx, one call at a time after a warm-up, each for a different
random `(entity, key)`:

- `GET facts/{entity}/{key}/` right after the load, before anything analyzed the table:
  the planner's statistics do not know the team (none, or an earlier run's team), as
  for a team that imported its facts since autovacuum last ran; autovacuum may run
  meanwhile. Then VACUUM ANALYZE as the owner role (the application role may not: its
  ANALYZE is skipped with a warning), as an operator follows a bulk load, and the rest:
- `GET facts/{entity}/{key}/`: one fact, the lookup the target is about;
- `GET facts/{entity}/`: an entity's facts, one page;
- `PUT facts/{entity}/{key}/` of the value it holds (`unchanged`: the lock, the read, no
  write), for what a repeated set costs;
- the baseline: `GET memories/{key}/` of one memory, the API's own exact read, on the
  same server, so that what the API stack costs on the machine as it is at the time is
  told apart from what facts cost;
- `memories.facts.selectors.get_fact` alone, in the bench's process: the database's part,
  and the plan of its query (the partial unique index on the active versions).

Target: the exact lookup at most 5 ms p95 (docs/facts.md, "Bench"). The time is the
client's, the whole round trip over loopback; the machine may be shared with other work
while it runs, which the figures then include.
"""

from __future__ import annotations

import random
import time
from typing import Any

from tests.bench import harness

TEAM_SLUG = "bench-facts"
SIZE = 100_000
QUICK_SIZE = 20_000
KEYS_PER_ENTITY = 50
CALLS = 500
QUICK_CALLS = 150
WARMUP = 20
INSERT_BATCH = 5_000
TARGET_P95_MS = 5.0
SEED = 20261128


def _seed(size: int) -> tuple[Any, str, list[tuple[str, str]]]:
    """The team, a write token, and the (entity, key) of every active fact. Written by
    two INSERT ... SELECT statements in the team's scope (row-level security checks
    every row): the active versions, then an older superseded one for one pair in ten."""
    from django.db import connection

    from memories.models import IndexState, Memory
    from teams.scope import team_scope
    from teams.services import create_team, create_token

    team = create_team(slug=TEAM_SLUG, name="Bench facts")
    token = create_token(team=team, name="bench", scopes=["read", "write"], actor="test").raw
    columns = (
        "id, team_id, entity, key, value, scope, domains, sensitivity, confidence, is_active, deleted_by, "
        "supersede_reason, updated_by, session, created_at"
    )
    pair = (
        f"'entity-' || lpad((i / {KEYS_PER_ENTITY})::text, 5, '0'), "
        f"'key.' || lpad((i %% {KEYS_PER_ENTITY})::text, 2, '0')"
    )
    with team_scope(team.id), connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO memories_fact ({columns}) SELECT gen_random_uuid(), %s, {pair}, "  # noqa: S608
            "'value ' || md5(i::text), 'team', ARRAY[(ARRAY['payments','infra','people','product'])[1 + i %% 4]], "
            "'normal', 1.0, true, '', '', 'bench-seed', '', now() - interval '1 day' + i * interval '1 ms' "
            "FROM generate_series(0, %s - 1) AS i",
            [team.id, size],
        )
        cursor.execute(
            f"INSERT INTO memories_fact ({columns}) SELECT gen_random_uuid(), %s, {pair}, "  # noqa: S608
            "'an older value', 'team', '{}', 'normal', 1.0, false, '', '', 'bench-seed', '', "
            "now() - interval '2 days' FROM generate_series(0, %s - 1, 10) AS i",
            [team.id, size],
        )
        # The baseline: one memory, read by key through the same server.
        content = "A memory read by its key."
        Memory.objects.create(
            team=team,
            key="baseline",
            content=content,
            updated_by="bench-seed",
            content_hash=Memory.hash_content(content),
            index_state=IndexState.INDEXED,
        )
    pairs = [(f"entity-{i // KEYS_PER_ENTITY:05d}", f"key.{i % KEYS_PER_ENTITY:02d}") for i in range(size)]
    return team, token, pairs


def _lookup_plan(team: Any, entity: str, key: str) -> str:
    """The plan of the exact lookup's query, as the selector sends it."""
    from django.db import connection

    from memories.facts.models import Fact
    from teams.scope import team_scope

    with team_scope(team.id):
        rows = Fact.objects.for_team(team.id).active().filter(entity=entity, key=key)
        sql, params = rows.query.sql_with_params()
        with connection.cursor() as cursor:
            cursor.execute(f"EXPLAIN {sql}", params)
            return "\n".join(row[0] for row in cursor.fetchall())


def _in_process(team: Any, pairs: list[tuple[str, str]], rng: random.Random, calls: int) -> dict[str, float]:
    """The selector alone, in this process: the database's part of a lookup."""
    from memories.facts.selectors import get_fact
    from teams.scope import team_scope

    timings = []
    with team_scope(team.id):
        for entity, key in rng.sample(pairs, calls):
            began = time.perf_counter()
            get_fact(team_id=team.id, entity=entity, key=key, may_see_high=False)
            timings.append((time.perf_counter() - began) * 1000)
    return harness.summarize(timings)


def run(*, quick: bool = False) -> dict[str, Any]:
    import httpx

    size = QUICK_SIZE if quick else SIZE
    calls = QUICK_CALLS if quick else CALLS
    print(f"\n== facts: exact lookups through the API, {size:,} facts, {calls} calls per row ==")
    harness.reset_data()
    started = time.perf_counter()
    team, token, pairs = _seed(size)
    seed_seconds = time.perf_counter() - started
    print(f"seeded {size:,} facts in {seed_seconds:.1f} s")
    rng = random.Random(SEED + 1)
    results: dict[str, dict[str, float]] = {}
    budgets = {"MEMORYHUB_THROTTLE_READ": "1000000/min", "MEMORYHUB_THROTTLE_WRITE": "1000000/min"}
    with (
        # As `make run` serves: the read budget's counts in the embedded Redis.
        harness.embedded_redis() as redis_url,
        harness.api_server(workers=2, REDIS_URL=redis_url, **budgets) as base,
        httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=60) as client,
    ):
        root = f"{base}/api/v1/teams/{team.slug}/facts/"

        def timed(method: str, url: str, **options: Any) -> tuple[float, Any]:
            began = time.perf_counter()
            response = client.request(method, url, **options)
            elapsed = (time.perf_counter() - began) * 1000
            if response.status_code != 200:
                raise RuntimeError(f"{method} {url} answered {response.status_code}: {response.text[:300]}")
            return elapsed, response.json()

        def get_one(entity: str, key: str) -> float:
            return timed("GET", f"{root}{entity}/{key}/")[0]

        def get_entity(entity: str, key: str) -> float:
            elapsed, body = timed("GET", f"{root}{entity}/")
            if len(body["results"]) != KEYS_PER_ENTITY:
                raise RuntimeError(f"an entity page of {len(body['results'])} facts")
            return elapsed

        def put_same(entity: str, key: str) -> float:
            # The GET of the value it holds is not counted.
            value = timed("GET", f"{root}{entity}/{key}/")[1]["value"]
            elapsed, body = timed("PUT", f"{root}{entity}/{key}/", json={"value": value})
            if body["outcome"] != "unchanged":
                raise RuntimeError(f"a PUT of the same value answered {body['outcome']}")
            return elapsed

        def get_memory(entity: str, key: str) -> float:
            return timed("GET", f"{base}/api/v1/teams/{team.slug}/memories/baseline/")[0]

        for entity, key in rng.sample(pairs, WARMUP):
            get_one(entity, key)
        results["get_fact_before_analyze"] = harness.summarize(
            [get_one(e, k) for e, k in rng.sample(pairs, calls)]
        )
        plan_before_analyze = _lookup_plan(team, *pairs[len(pairs) // 3])
        vacuum_seconds = harness.vacuum_analyze("memories_fact")
        print(f"VACUUM ANALYZE memories_fact in {vacuum_seconds:.1f} s")
        rows = (
            ("get_fact", get_one),
            ("get_memory", get_memory),
            ("get_entity", get_entity),
            ("put_unchanged", put_same),
        )
        for name, call in rows:
            for entity, key in rng.sample(pairs, WARMUP):
                call(entity, key)
            results[name] = harness.summarize([call(entity, key) for entity, key in rng.sample(pairs, calls)])
    results["selector"] = _in_process(team, pairs, rng, calls)
    plan = _lookup_plan(team, *pairs[len(pairs) // 2])
    labels = {
        "get_fact_before_analyze": "GET facts/{entity}/{key}/, right after the load",
        "get_fact": "GET facts/{entity}/{key}/",
        "get_memory": "baseline: GET memories/{key}/",
        "selector": "get_fact in process (the database's part)",
        "get_entity": f"GET facts/{{entity}}/ ({KEYS_PER_ENTITY} facts)",
        "put_unchanged": "PUT, the value it holds",
    }
    harness.print_table(
        ["request", "p50 ms", "p95 ms", "p99 ms"],
        [
            (
                label,
                f"{results[name]['p50']:.2f}",
                f"{results[name]['p95']:.2f}",
                f"{results[name]['p99']:.2f}",
            )
            for name, label in labels.items()
        ],
    )
    print(f"plan right after the load:\n{plan_before_analyze}\nplan after VACUUM ANALYZE:\n{plan}")
    p95 = results["get_fact"]["p95"]
    print(
        f"target: exact lookup p95 <= {TARGET_P95_MS:.0f} ms: {'met' if p95 <= TARGET_P95_MS else 'MISSED'}"
    )
    return {
        "facts": size,
        "calls": calls,
        "seed_seconds": round(seed_seconds, 1),
        "vacuum_analyze_seconds": round(vacuum_seconds, 1),
        "lookup_plan_before_analyze": plan_before_analyze,
        "lookup_plan": plan,
        "results_ms": results,
        "target_p95_ms": TARGET_P95_MS,
        "target_met": p95 <= TARGET_P95_MS,
    }
