"""`python -m tests.bench unified`: search latency with sources memories only, then
memories, facts and conversations together, on one seeded team.

The team holds MEMORIES memories (latency.py's generated texts, chunked and embedded by
the local model, seeded as latency.py seeds them), FACTS active facts (entities are the
texts' services, keys their topics, values drawn from the same vocabulary), and
CONVERSATIONS conversations of LINES_PER_CONVERSATION lines each, stored through
store_conversation (scrubbed) and indexed by search.conversation_index (chunked into
windows of lines and embedded). latency.py's 50 queries (paraphrases and rare keywords)
go to one gunicorn server (2 workers) as `POST search/` in hybrid mode at max_results
10, the two source sets taking turns on every query, in alternating order, after a
warm-up of two passes.

Target: all three sources at most 1.5x memories only, at p95 (docs/search.md,
"Unified search").
"""

from __future__ import annotations

import os
import random
import time
from typing import Any

from tests.bench import harness

TEAM_SLUG = "bench-unified"
MEMORIES = 2_000
FACTS = 500
CONVERSATIONS = 200
LINES_PER_CONVERSATION = 12
QUICK_SCALE = 4  # --quick: a quarter of each
REQUESTS = 200
WARMUP_PASSES = 2
MAX_RESULTS = 10
TARGET_RATIO = 1.5
SEED = 20261128
ALL_SOURCES = ["memories", "facts", "conversations"]


def _seed(
    memories: int, facts: int, conversations: int
) -> tuple[Any, list[dict[str, str]], dict[str, float]]:
    from django.db import connection

    from memories.conversations.services import Line, store_conversation
    from search import conversation_index
    from teams.scope import team_scope
    from tests.bench import latency

    timings: dict[str, float] = {}
    began = time.perf_counter()
    (seed_team,) = latency._setup_teams(1)
    embedder = latency._Embedder()
    own = latency.TextGenerator(team_seed=0)
    latency._seed([seed_team], {0: memories}, embedder, own, latency.NeighbourPool(), label="memories")
    embedder.save()
    timings["memories_seconds"] = round(time.perf_counter() - began, 1)
    team = seed_team.team
    rng = random.Random(SEED)

    began = time.perf_counter()
    topics = [
        "owner",
        "runtime",
        "database",
        "queue",
        "region",
        "oncall",
        "dashboard",
        "budget",
        "sla",
        "vendor",
    ]
    with team_scope(team.id), connection.cursor() as cursor:
        rows = []
        for i in range(facts):
            service = latency.SERVICES[i % len(latency.SERVICES)]
            key = f"{topics[(i // len(latency.SERVICES)) % len(topics)]}.{i}"
            value = f"{rng.choice(latency.TECH)} in {rng.choice(latency.ENVIRONMENTS)}, ask {rng.choice(latency.PEOPLE)}"
            rows.append((team.id, service, key, value))
        cursor.executemany(
            "INSERT INTO memories_fact (id, team_id, entity, key, value, scope, domains, sensitivity, confidence, "
            "is_active, deleted_by, supersede_reason, updated_by, session, created_at) VALUES "
            "(gen_random_uuid(), %s, %s, %s, %s, 'team', '{}', 'normal', 1.0, true, '', '', 'bench', '', now())",
            rows,
        )
    timings["facts_seconds"] = round(time.perf_counter() - began, 1)

    began = time.perf_counter()
    talk = latency.TextGenerator(team_seed=7)
    stored = []
    for n in range(conversations):
        lines = []
        for i in range(LINES_PER_CONVERSATION):
            role = "user" if i % 2 == 0 else "assistant"
            text = (
                talk.memory()[1]
                if role == "assistant"
                else rng.choice(latency.PARAPHRASES).format(**talk._fields())
            )
            lines.append(Line(role, text))
        with team_scope(team.id):
            stored.append(store_conversation(team=team, lines=lines, actor="bench", title=f"session {n}"))
    # Indexed here, one after the other, as the worker would (the bench runs no worker).
    for conversation in stored:
        conversation_index.index_conversation(team_id=team.id, conversation_id=conversation.id)
    from teams.roles import as_owner

    with as_owner(connection), connection.cursor() as cursor:
        for table in ("memories_fact", "memories_conversation", "search_conversationchunk"):
            cursor.execute(f"VACUUM ANALYZE {table}")
    timings["conversations_seconds"] = round(time.perf_counter() - began, 1)

    sample = [text for _, text in latency.memory_texts(0, min(memories, 2_000))]
    return seed_team, latency.build_queries(sample), timings


def run(*, quick: bool = False) -> dict[str, Any]:
    import httpx

    from memories.conversations.models import Conversation
    from search.models import ConversationChunk
    from teams.scope import team_scope

    scale = QUICK_SCALE if quick else 1
    memories, facts, conversations = MEMORIES // scale, FACTS // scale, CONVERSATIONS // scale
    requests = REQUESTS // (2 if quick else 1)
    print(
        f"\n== unified: search latency, sources memories vs all three; {memories:,} memories, {facts} facts, "
        f"{conversations} conversations =="
    )
    harness.reset_data()
    seed_team, queries, timings = _seed(memories, facts, conversations)
    with team_scope(seed_team.team.id):
        windows = ConversationChunk.objects.filter(team=seed_team.team).count()
        indexed = Conversation.objects.filter(team=seed_team.team, index_state="indexed").count()
    print(
        f"seeded in {sum(timings.values()):.0f} s; {windows} conversation windows, {indexed} conversations indexed"
    )
    samples: dict[str, list[float]] = {"memories": [], "all": []}
    hits: dict[str, dict[str, int]] = {"memories": {}, "all": {}}
    load_before = os.getloadavg()[0]
    budgets = {"MEMORYHUB_THROTTLE_READ": "1000000/min"}
    with (
        harness.api_server(workers=2, **budgets) as base,
        httpx.Client(headers={"Authorization": f"Bearer {seed_team.token}"}, timeout=120) as client,
    ):
        url = f"{base}/api/v1/teams/{seed_team.slug}/search/"

        def one(name: str, query: str) -> float:
            body = {"query": query, "max_results": MAX_RESULTS, "mode": "hybrid"}
            body["sources"] = ["memories"] if name == "memories" else ALL_SOURCES
            began = time.perf_counter()
            response = client.post(url, json=body)
            elapsed = (time.perf_counter() - began) * 1000
            if response.status_code != 200:
                raise RuntimeError(f"search answered {response.status_code}: {response.text[:300]}")
            for result in response.json()["results"]:
                hits[name][result["origin"]] = hits[name].get(result["origin"], 0) + 1
            return elapsed

        for request in range(WARMUP_PASSES * len(queries) + requests):
            measured = request >= WARMUP_PASSES * len(queries)
            query = queries[request % len(queries)]["query"]
            for name in ("memories", "all") if request % 2 == 0 else ("all", "memories"):
                elapsed = one(name, query)
                if measured:
                    samples[name].append(elapsed)
    results = {name: harness.summarize(values) for name, values in samples.items()}
    ratio_p50 = results["all"]["p50"] / results["memories"]["p50"]
    ratio_p95 = results["all"]["p95"] / results["memories"]["p95"]
    harness.print_table(
        ["sources", "p50 ms", "p95 ms", "p99 ms"],
        [
            (
                label,
                f"{results[name]['p50']:.1f}",
                f"{results[name]['p95']:.1f}",
                f"{results[name]['p99']:.1f}",
            )
            for name, label in (("memories", "memories"), ("all", "memories + facts + conversations"))
        ],
    )
    met = ratio_p95 <= TARGET_RATIO
    print(f"all / memories: p50 {ratio_p50:.2f}x, p95 {ratio_p95:.2f}x; target p95 <= {TARGET_RATIO}x: "
          f"{'met' if met else 'MISSED'}")  # fmt: skip
    print(f"results by origin (all three): {hits['all']}")
    return {
        "memories": memories,
        "facts": facts,
        "conversations": conversations,
        "conversation_windows": windows,
        "queries": len(queries),
        "requests_per_row": requests,
        "max_results": MAX_RESULTS,
        "seeding": timings,
        "results_ms": results,
        "ratio_p50": round(ratio_p50, 3),
        "ratio_p95": round(ratio_p95, 3),
        "hits_by_origin": hits,
        "target_ratio_p95": TARGET_RATIO,
        "target_met": met,
        "load_average_1min": {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)},
    }
