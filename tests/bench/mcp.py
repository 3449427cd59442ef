"""`python -m tests.bench mcp`: what the MCP layer adds to a search.

One team of 10,000 active memories, chunked for keyword search (no vectors: both paths
run the same selector, so the difference is the protocol, not the ranking). The same
queries go to one gunicorn server (the deployment's config: threaded workers, /mcp/
served inside them) two ways, one call at a time after a warm-up:

- REST: `POST /api/v1/teams/{team}/search/` with httpx;
- MCP: the `memory_search` tool through the official SDK's client over Streamable HTTP,
  one session for all calls (as an agent keeps its connection);
- MCP, plain JSON-RPC: the same `tools/call` message posted with httpx, as REST is, so
  the difference to REST is what the server's MCP layer adds, and the difference to the
  SDK row is what the SDK's client adds on the agent's side.

Target: MCP adds at most 5 ms to the REST p50 (the server's layer: the plain JSON-RPC row).
"""

from __future__ import annotations

import random
import time
from typing import Any

from tests.bench import harness
from tests.bench.latency import TextGenerator

TEAM_SLUG = "bench-mcp"
SIZE = 10_000
QUICK_SIZE = 2_000
CALLS = 300
QUICK_CALLS = 100
WARMUP = 10
INSERT_BATCH = 2_000
TARGET_ADDED_P50_MS = 5.0
SEED = 20261123


def _seed(size: int) -> tuple[Any, str, list[str]]:
    """The team (keyword-only), a read token, and queries: three words of random entries."""
    from django.db import connection

    from memories.models import IndexState, Memory
    from search.chunking import chunk_text
    from search.models import Chunk
    from teams.models import Team
    from teams.scope import team_scope
    from teams.services import create_team, create_token

    team = create_team(slug=TEAM_SLUG, name="Bench MCP")
    token = create_token(team=team, name="bench", scopes=["read"], actor="test").raw
    generator = TextGenerator(SEED % 1_000)
    memories = []
    for i in range(size):
        memory_type, content = generator.memory()
        memories.append(
            Memory(
                team=team,
                key=f"{memory_type}-{i:05d}",
                content=content,
                type=memory_type,
                updated_by="bench-seed",
                content_hash=Memory.hash_content(content),
                index_state=IndexState.INDEXED,
            )
        )
    with team_scope(team.id):
        Team.objects.filter(id=team.id).update(embedding_profile="none")
        for start in range(0, size, INSERT_BATCH):
            batch = Memory.objects.bulk_create(memories[start : start + INSERT_BATCH])
            Chunk.objects.bulk_create(
                Chunk(
                    team=team,
                    memory=memory,
                    chunk_index=piece.index,
                    text=piece.text,
                    token_count=piece.token_count,
                    content_hash=piece.content_hash,
                )
                for memory in batch
                for piece in chunk_text(memory.content)
            )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memories_memory")
        cursor.execute("ANALYZE search_chunk")
    rng = random.Random(SEED)
    queries = []
    for memory in rng.sample(memories, 50):
        words = [w.strip(".,;:") for w in memory.content.split() if len(w) > 3]
        queries.append(" ".join(rng.sample(words, min(3, len(words)))))
    return team, token, queries


def run(*, quick: bool = False) -> dict[str, Any]:
    import anyio
    import httpx
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    size = QUICK_SIZE if quick else SIZE
    calls = QUICK_CALLS if quick else CALLS
    print(
        f"\n== mcp: memory_search over MCP vs the same search over REST, {size:,} memories, {calls} calls =="
    )
    harness.reset_data()
    started = time.perf_counter()
    team, token, queries = _seed(size)
    print(f"seeded {size:,} memories in {time.perf_counter() - started:.1f} s")
    body = {"max_results": 5, "mode": "keyword"}
    headers = {"Authorization": f"Bearer {token}"}

    # Both ways count against the same read budget: the bench measures, it is not limited.
    with harness.api_server(workers=2, MEMORYHUB_THROTTLE_READ="100000/min") as base:
        with httpx.Client(headers=headers, timeout=300) as client:

            def rest(query: str) -> None:
                response = client.post(
                    f"{base}/api/v1/teams/{team.slug}/search/", json={"query": query, **body}
                )
                if response.status_code != 200:
                    raise RuntimeError(f"REST search answered {response.status_code}: {response.text[:300]}")

            rpc_headers = {
                "Accept": "application/json, text/event-stream",
                "MCP-Protocol-Version": "2025-06-18",
            }

            def plain_mcp(query: str) -> None:
                message = {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "tools/call",
                    "params": {"name": "memory_search", "arguments": {"query": query, **body}},
                }
                response = client.post(f"{base}/mcp/", json=message, headers=rpc_headers)
                if response.status_code != 200 or response.json()["result"].get("isError"):
                    raise RuntimeError(
                        f"MCP memory_search answered {response.status_code}: {response.text[:300]}"
                    )

            # Interleaved, so that a slow spell of the machine falls on both alike.
            for i in range(WARMUP):
                rest(queries[i % len(queries)])
                plain_mcp(queries[i % len(queries)])
            rest_ms, plain_ms = [], []
            for i in range(calls):
                for run_one, timings in ((rest, rest_ms), (plain_mcp, plain_ms)):
                    began = time.perf_counter()
                    run_one(queries[i % len(queries)])
                    timings.append((time.perf_counter() - began) * 1000)

        async def over_mcp() -> list[float]:
            async with (
                httpx2.AsyncClient(headers=headers, timeout=60) as http,
                Client(streamable_http_client(f"{base}/mcp/", http_client=http)) as session,
            ):

                async def search(query: str) -> None:
                    result = await session.call_tool("memory_search", {"query": query, **body})
                    if result.is_error:
                        raise RuntimeError(f"MCP memory_search failed: {result.content}")

                for i in range(WARMUP):
                    await search(queries[i % len(queries)])
                timings = []
                for i in range(calls):
                    began = time.perf_counter()
                    await search(queries[i % len(queries)])
                    timings.append((time.perf_counter() - began) * 1000)
                return timings

        mcp_ms = anyio.run(over_mcp)

    rest_figures, mcp_figures = harness.summarize(rest_ms), harness.summarize(mcp_ms)
    plain_figures = harness.summarize(plain_ms)
    added = plain_figures["p50"] - rest_figures["p50"]
    client_added = mcp_figures["p50"] - plain_figures["p50"]
    met = added <= TARGET_ADDED_P50_MS
    harness.print_table(
        ["search (keyword, 5 results)", "p50 ms", "p95 ms", "p99 ms"],
        [
            [name, f"{f['p50']:.1f}", f"{f['p95']:.1f}", f"{f['p99']:.1f}"]
            for name, f in (
                ("REST", rest_figures),
                ("MCP memory_search, plain JSON-RPC", plain_figures),
                ("MCP memory_search, SDK client session", mcp_figures),
            )
        ],
    )
    print(
        f"the server's MCP layer adds {added:.1f} ms at p50 (target <= {TARGET_ADDED_P50_MS:.0f} ms: "
        f"{'met' if met else 'MISSED'}); the SDK's client adds {client_added:.1f} ms more on the agent's side"
    )
    return {
        "section": "mcp",
        "how": (
            f"{size} memories, keyword mode; gunicorn with memoryhub.gunicorn_conf (2 processes); "
            f"{calls} sequential calls each way after {WARMUP} warm-up calls, REST and plain JSON-RPC "
            "interleaved; then the SDK's Streamable HTTP client in one session"
        ),
        "rest_ms": rest_figures,
        "mcp_plain_ms": plain_figures,
        "mcp_ms": mcp_figures,
        "mcp_added_p50_ms": round(added, 2),
        "sdk_client_added_p50_ms": round(client_added, 2),
        "target_added_p50_ms": TARGET_ADDED_P50_MS,
        "target_met": met,
    }
