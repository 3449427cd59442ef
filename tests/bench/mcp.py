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
The searches go to `/mcp/full/`, whose `memory_search` takes `mode` as REST does; the
core list's leaves it out.

Then what a session costs a model's context, on the same server (docs/agents.md, "Tool
surfaces"): the server's instructions, the tool definitions (`tools/list`'s result as
sent, compact JSON) of the core list and of the full one, and the session-start context
the Claude Code hook prints (the injection block at the default budget and the hook's
guide), in bytes and in tokens, for a team of its own: SESSION_TEAM_SIZE memories with
the injection section's mix of types (a handful of identity entries, which the block
never drops, then lessons, decisions, context...), enough to fill the default budget;
and the size of a save's answer (brief, with `return_entry`, and REST's 201 body).
Tokens are counted two ways: the bundled all-MiniLM-L6-v2 WordPiece tokenizer
(search.tokens, the one the injection budget is counted with) and chars/4, the usual
approximation for the models agents run on, whose tokenizers are not available offline.
Target: the core list's definitions at most 8 KiB.
"""

from __future__ import annotations

import random
import time
from typing import Any

from tests.bench import harness
from tests.bench.latency import TextGenerator

TEAM_SLUG = "bench-mcp"
SESSION_TEAM_SLUG = "bench-mcp-session"
SESSION_TEAM_SIZE = 1_000
SIZE = 10_000
QUICK_SIZE = 2_000
CALLS = 300
QUICK_CALLS = 100
WARMUP = 10
INSERT_BATCH = 2_000
TARGET_ADDED_P50_MS = 5.0
TARGET_CORE_LIST_BYTES = 8192
SEED = 20261123


def _seed(size: int) -> tuple[Any, str, list[str]]:
    """The team (keyword-only), a read token, and queries: three words of random entries."""

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
    harness.vacuum_analyze("memories_memory", "search_chunk")
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
                response = client.post(f"{base}/mcp/full/", json=message, headers=rpc_headers)
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
                Client(streamable_http_client(f"{base}/mcp/full/", http_client=http)) as session,
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
        session = _session_cost(base)

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
    _print_session_cost(session)
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
        "session": session,
        "session_how": (
            "tools/list results as sent (compact JSON); session-start context = the injection block "
            "(GET injection/, the team's default budget) + the Claude Code hook's guide; tokens by the "
            "bundled all-MiniLM-L6-v2 WordPiece tokenizer and by chars/4"
        ),
    }


def _seed_session_team() -> Any:
    """A team whose memories have the mix of types of tests/bench/injection.py."""
    from memories.models import IndexState, Memory
    from teams.scope import team_scope
    from teams.services import create_team
    from tests.bench.injection import IDENTITY_COUNT, TYPE_SHARES

    team = create_team(slug=SESSION_TEAM_SLUG, name="Bench MCP session")
    rng = random.Random(SEED)
    generator = TextGenerator(SEED % 997)
    others = rng.choices(
        list(TYPE_SHARES), weights=list(TYPE_SHARES.values()), k=SESSION_TEAM_SIZE - IDENTITY_COUNT
    )
    memories = [
        Memory(
            team=team,
            key=f"{memory_type}-{i:04d}",
            content=generator.memory()[1],
            type=memory_type,
            updated_by="bench-seed",
            content_hash="",
            index_state=IndexState.INDEXED,
        )
        for i, memory_type in enumerate(["identity"] * IDENTITY_COUNT + others)
    ]
    for memory in memories:
        memory.content_hash = Memory.hash_content(memory.content)
    with team_scope(team.id):
        Memory.objects.bulk_create(memories)
    return team


def _size(text: str) -> dict[str, int]:
    from search.tokens import count_tokens

    return {
        "bytes": len(text.encode()),
        "chars": len(text),
        "wordpiece_tokens": count_tokens(text),
        "chars_over_4": round(len(text) / 4),
    }


def _session_cost(base: str) -> dict[str, Any]:
    """What one agent session puts in a model's context, measured on the running server."""
    import json

    import httpx

    from memoryhub_client.claude_code_hooks import GUIDE
    from teams.services import create_token

    team = _seed_session_team()
    token = create_token(team=team, name="bench-writer", scopes=["read", "write"], actor="test").raw
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
    }

    def rpc(client: httpx.Client, path: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
        message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        response = client.post(f"{base}{path}", json=message)
        if response.status_code != 200 or "result" not in response.json():
            raise RuntimeError(f"MCP {method} answered {response.status_code}: {response.text[:300]}")
        result: dict[str, Any] = response.json()["result"]
        return result

    def compact(value: Any) -> str:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)

    with httpx.Client(headers=headers, timeout=300) as client:
        initialize = {"protocolVersion": "2025-11-25", "capabilities": {},
                      "clientInfo": {"name": "bench", "version": "1"}}  # fmt: skip
        instructions = rpc(client, "/mcp/", "initialize", initialize).get("instructions") or ""
        core = rpc(client, "/mcp/", "tools/list", {})
        full = rpc(client, "/mcp/full/", "tools/list", {})
        injection = client.get(f"{base}/api/v1/teams/{team.slug}/injection/")
        if injection.status_code != 200:
            raise RuntimeError(f"injection answered {injection.status_code}: {injection.text[:300]}")
        block = injection.json()["text"]
        # What the session-start hook prints: the block, a blank line, the guide.
        start_context = f"{block.rstrip()}\n\n{GUIDE}"
        saves = {}
        for name, extra in (("brief", {}), ("return_entry", {"return_entry": True})):
            arguments = {"key": f"bench-save-{name}", "content": "Deploys wait for a green canary.", **extra}
            answer = rpc(client, "/mcp/", "tools/call", {"name": "memory_save", "arguments": arguments})
            saves[name] = len(answer["content"][0]["text"].encode())
        rest = client.post(
            f"{base}/api/v1/teams/{team.slug}/memories/",
            json={"key": "bench-save-rest", "content": "Deploys wait for a green canary, by REST."},
        )
        saves["rest_201"] = len(rest.content)

    parts = {
        "instructions": _size(instructions),
        "tools_core": _size(compact(core)),
        "tools_full": _size(compact(full)),
        "session_start_context": _size(start_context),
    }
    per_session = {
        kind: {
            measure: sum(parts[part][measure] for part in ("instructions", kind, "session_start_context"))
            for measure in ("bytes", "wordpiece_tokens", "chars_over_4")
        }
        for kind in ("tools_core", "tools_full")
    }
    return {
        **parts,
        "tool_counts": {"core": len(core["tools"]), "full": len(full["tools"])},
        "per_session_core": per_session["tools_core"],
        "per_session_full": per_session["tools_full"],
        "injection_entries": injection.json()["counts"]["included"],
        "save_answer_bytes": saves,
        "target_core_list_bytes": TARGET_CORE_LIST_BYTES,
        "core_list_target_met": parts["tools_core"]["bytes"] <= TARGET_CORE_LIST_BYTES,
    }


def _print_session_cost(session: dict[str, Any]) -> None:
    rows = [
        [name, f"{part['bytes']:,}", f"{part['wordpiece_tokens']:,}", f"{part['chars_over_4']:,}"]
        for name, part in (
            ("server instructions", session["instructions"]),
            (f"tools/list, core ({session['tool_counts']['core']} tools)", session["tools_core"]),
            (f"tools/list, full ({session['tool_counts']['full']} tools)", session["tools_full"]),
            (
                f"session-start context ({session['injection_entries']} entries + guide)",
                session["session_start_context"],
            ),
            ("per session, core list", session["per_session_core"]),
            ("per session, full list", session["per_session_full"]),
        )
    ]
    harness.print_table(["what a session puts in context", "bytes", "WordPiece tokens", "chars/4"], rows)
    saves = session["save_answer_bytes"]
    met = "met" if session["core_list_target_met"] else "MISSED"
    print(
        f"core tool list {session['tools_core']['bytes']:,} bytes (target <= {TARGET_CORE_LIST_BYTES:,}: {met}); "
        f"a save answers {saves['brief']} bytes ({saves['return_entry']} with return_entry; REST's 201 body "
        f"{saves['rest_201']})"
    )
