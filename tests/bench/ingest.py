"""Write throughput and save-to-searchable time with a real broker and worker.

A gunicorn server and one Celery worker (prefork, one process per core as `make run`), both
with the bench's own embedded Redis (emptied first) and the bench data folder. The
client POSTs memories through the API; a second thread polls
`GET /memories/{key}/` until `index_state == "indexed"`. Two phases:

- burst: N memories posted back to back; the worker drains the queue while they
  arrive, so save-to-searchable includes the time spent waiting in the queue;
- one at a time: each memory is posted only after the previous one is searchable,
  so save-to-searchable is the latency of an idle pipeline.

- batch: N memories posted through `POST memories/batch/` (up to BATCH_SIZE entries a
  request, each request under BATCH_BYTES), one request after the other; the worker
  indexes them in messages of 100 (search.index_memories), so the poller follows the
  last key of each hundred, and every key is checked indexed at the end (untimed).

The embedding cache is emptied first and every text is new, so each chunk is embedded.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from tests.bench import harness
from tests.bench.latency import TextGenerator

TEAM_SLUG = "bench-ingest"
POLL_INTERVAL = 0.01  # seconds between two polls of a pending key
TIMEOUT = 600.0
LONG_SHARE = 0.15  # share of long, multi-chunk memories


@dataclass
class Posted:
    key: str
    posted_at: float = 0.0  # request sent
    saved_at: float = 0.0  # 201 received (the transaction has committed)
    indexed_at: float | None = None
    state_in_response: str = ""
    chunks_expected: int = 0
    marker: str = ""


@dataclass
class Phase:
    items: list[Posted] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)


def _texts(count: int, offset: int) -> list[tuple[str, str, str, int]]:
    """(type, content, marker, chunks) with a unique marker word per memory, some of them long."""
    from search.chunking import chunk_text

    generator = TextGenerator(1_000 + offset)
    rows = []
    for i in range(count):
        marker = f"ingestmark{offset + i:05d}"
        memory_type, content = generator.memory()
        if generator.rng.random() < LONG_SHARE:
            paragraphs = [generator.memory()[1] for _ in range(generator.rng.randint(15, 40))]
            content = "\n\n".join([content, *paragraphs])
        content = f"{content} Tag {marker}."
        rows.append((memory_type, content, marker, len(chunk_text(content))))
    return rows


def _poller(client: Any, base: str, phase: Phase, errors: list[str]) -> None:
    """Follow the posted keys in order: the one worker takes tasks first in, first out,
    so the oldest pending key is the next one to become searchable."""
    index = 0
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        if index >= len(phase.items):
            if phase.done.is_set():
                return
            time.sleep(POLL_INTERVAL)
            continue
        item = phase.items[index]
        if not item.saved_at:
            time.sleep(POLL_INTERVAL / 2)
            continue
        response = client.get(f"{base}/api/v1/teams/{TEAM_SLUG}/memories/{item.key}/")
        if response.status_code != 200:
            errors.append(f"GET {item.key}: {response.status_code}")
            return
        state = response.json()["index_state"]
        if state == "indexed":
            item.indexed_at = time.perf_counter()
            index += 1
        elif state == "failed":
            errors.append(f"{item.key}: index_state failed")
            return
        else:
            time.sleep(POLL_INTERVAL)
    errors.append("timed out waiting for indexing")


def _post(client: Any, base: str, item: Posted, memory_type: str, content: str) -> None:
    item.posted_at = time.perf_counter()
    response = client.post(
        f"{base}/api/v1/teams/{TEAM_SLUG}/memories/",
        json={"key": item.key, "content": content, "type": memory_type},
    )
    if response.status_code != 201:
        raise RuntimeError(f"POST {item.key}: {response.status_code} {response.text[:300]}")
    item.state_in_response = response.json().get("index_state", "")
    item.saved_at = time.perf_counter()


def _run_phase(
    client: Any, poll_client: Any, base: str, rows: list[Any], prefix: str, *, burst: bool
) -> Phase:
    phase = Phase()
    errors: list[str] = []
    poller = threading.Thread(target=_poller, args=(poll_client, base, phase, errors), daemon=True)
    poller.start()
    for i, (memory_type, content, marker, chunks) in enumerate(rows):
        item = Posted(key=f"{prefix}-{i:05d}", chunks_expected=chunks, marker=marker)
        phase.items.append(item)
        _post(client, base, item, memory_type, content)
        if not burst:
            while item.indexed_at is None and not errors and poller.is_alive():
                time.sleep(POLL_INTERVAL / 4)
    phase.done.set()
    poller.join(TIMEOUT)
    if errors:
        raise RuntimeError("; ".join(errors))
    return phase


BATCH_SIZE = 500  # entries per POST memories/batch/, the endpoint's limit
BATCH_BYTES = 900 * 1024  # and each request's body under MEMORYHUB_MAX_BODY_BYTES (1 MiB)
INDEX_MESSAGE = 100  # entries per indexing message (search.tasks.INDEX_BATCH_SIZE)


def _batches(rows: list[Any], prefix: str) -> list[list[dict[str, str]]]:
    """The rows as batch requests of at most BATCH_SIZE entries and BATCH_BYTES."""
    import json

    batches: list[list[dict[str, str]]] = [[]]
    size = 0
    for i, (memory_type, content, _marker, _chunks) in enumerate(rows):
        entry = {"key": f"{prefix}-{i:05d}", "content": content, "type": memory_type}
        entry_size = len(json.dumps(entry).encode()) + 2
        if batches[-1] and (len(batches[-1]) >= BATCH_SIZE or size + entry_size > BATCH_BYTES):
            batches.append([])
            size = 0
        batches[-1].append(entry)
        size += entry_size
    return batches


def _merged_after_indexing(client: Any, base: str, key: str) -> bool:
    """Whether the key's history holds its entry, no longer active."""
    response = client.get(f"{base}/api/v1/teams/{TEAM_SLUG}/memories/{key}/history/")
    if response.status_code != 200:
        return False
    history = response.json()["history"]
    return bool(history) and not any(event["memory"]["is_active"] for event in history)


def _run_batch_phase(
    client: Any, poll_client: Any, base: str, rows: list[Any], prefix: str
) -> tuple[dict[str, Any], Phase]:
    """POST the rows in batches; the poller follows the last key of each hundred (the
    worker indexes a hundred per message, first in, first out)."""
    phase = Phase()
    errors: list[str] = []
    poller = threading.Thread(target=_poller, args=(poll_client, base, phase, errors), daemon=True)
    poller.start()
    request_ms: list[float] = []
    markers = {f"{prefix}-{i:05d}": row[2] for i, row in enumerate(rows)}
    first = time.perf_counter()
    for batch in _batches(rows, prefix):
        followed = [
            Posted(key=e["key"], marker=markers[e["key"]])
            for n, e in enumerate(batch, 1)
            if n % INDEX_MESSAGE == 0 or n == len(batch)
        ]
        posted_at = time.perf_counter()
        response = client.post(f"{base}/api/v1/teams/{TEAM_SLUG}/memories/batch/", json={"entries": batch})
        saved_at = time.perf_counter()
        if response.status_code != 200:
            raise RuntimeError(f"POST memories/batch/: {response.status_code} {response.text[:300]}")
        counts = response.json()["counts"]
        if counts["created"] != len(batch):
            raise RuntimeError(f"POST memories/batch/: not all created: {counts}")
        request_ms.append((saved_at - posted_at) * 1000)
        for item in followed:
            item.posted_at, item.saved_at = posted_at, saved_at
        phase.items.extend(followed)
    last_saved = time.perf_counter()
    phase.done.set()
    poller.join(TIMEOUT)
    if errors:
        raise RuntimeError("; ".join(errors))
    last_indexed = max(i.indexed_at or 0 for i in phase.items)
    not_indexed, merged = [], []
    for key in (f"{prefix}-{i:05d}" for i in range(len(rows))):
        response = client.get(f"{base}/api/v1/teams/{TEAM_SLUG}/memories/{key}/")
        if response.status_code == 404 and _merged_after_indexing(client, base, key):
            # The worker's near-duplicate check found it repeats another entry and
            # superseded it (docs/write-path.md, "Near duplicates after indexing (batch saves)").
            merged.append(key)
        elif response.status_code != 200:
            raise RuntimeError(f"GET {key}: {response.status_code} {response.text[:300]}")
        elif response.json()["index_state"] != "indexed":
            not_indexed.append(key)
    if not_indexed:
        raise RuntimeError(f"{len(not_indexed)} batch memories not indexed, e.g. {not_indexed[0]}")
    return {
        "memories": len(rows),
        "merged_as_near_duplicates": len(merged),
        "chunks": sum(r[3] for r in rows),
        "multi_chunk_memories": sum(1 for r in rows if r[3] > 1),
        "requests": len(request_ms),
        "saved_per_second": round(len(rows) / (last_saved - first), 1),
        "indexed_per_second": round(len(rows) / (last_indexed - first), 1),
        "seconds_until_all_saved": round(last_saved - first, 2),
        "seconds_until_all_indexed": round(last_indexed - first, 2),
        "save_request_ms": harness.summarize(request_ms),
        "save_to_searchable_ms": harness.summarize(
            [(i.indexed_at - i.saved_at) * 1000 for i in phase.items if i.indexed_at is not None]
        ),
    }, phase


def _phase_figures(phase: Phase, *, burst: bool) -> dict[str, Any]:
    items = phase.items
    save_ms = [(i.saved_at - i.posted_at) * 1000 for i in items]
    searchable_ms = [(i.indexed_at - i.saved_at) * 1000 for i in items if i.indexed_at is not None]
    first, last_saved = items[0].posted_at, max(i.saved_at for i in items)
    last_indexed = max(i.indexed_at or 0 for i in items)
    return {
        "memories": len(items),
        "chunks": sum(i.chunks_expected for i in items),
        "multi_chunk_memories": sum(1 for i in items if i.chunks_expected > 1),
        # One at a time, each save waited for the previous indexing: that is no save rate.
        "saved_per_second": round(len(items) / (last_saved - first), 1) if burst else None,
        "indexed_per_second": round(len(items) / (last_indexed - first), 1),
        "seconds_until_all_saved": round(last_saved - first, 2),
        "seconds_until_all_indexed": round(last_indexed - first, 2),
        "save_request_ms": harness.summarize(save_ms),
        "save_to_searchable_ms": harness.summarize(searchable_ms),
        "pending_in_save_response": sum(1 for i in items if i.state_in_response == "pending"),
    }


def _embedding_ceiling(rows: list[Any]) -> dict[str, Any]:
    """The local model alone on the batch phase's chunks, on as many threads as the
    worker has processes (one onnxruntime thread each): the most memories a second any
    pipeline could index on this machine with this model, whatever it does besides."""
    from concurrent.futures import ThreadPoolExecutor

    from core.settings_env import default_processes
    from search.chunking import chunk_text
    from search.embeddings.profiles import provider_for

    provider = provider_for("local")
    if provider is None:
        raise RuntimeError("the 'local' embedding profile has no provider")
    texts = [piece.text for _type, content, _marker, _chunks in rows for piece in chunk_text(content)]
    threads = default_processes()
    share = -(-len(texts) // threads)
    provider.embed_documents(["warm up"])
    began = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(provider.embed_documents, [texts[i : i + share] for i in range(0, len(texts), share)]))
    seconds = time.perf_counter() - began
    return {
        "memories": len(rows),
        "chunks": len(texts),
        "threads": threads,
        "seconds": round(seconds, 2),
        "memories_per_second": round(len(rows) / seconds, 1),
    }


def _check_searchable(client: Any, base: str, items: list[Posted]) -> dict[str, int]:
    """Search for the unique marker word of some memories: each must come back first."""
    checked = found = 0
    for item in items[:: max(1, len(items) // 20)]:
        for mode in ("keyword", "hybrid"):
            response = client.post(
                f"{base}/api/v1/teams/{TEAM_SLUG}/search/",
                json={"query": item.marker, "max_results": 5, "mode": mode},
            )
            checked += 1
            results = response.json().get("results", []) if response.status_code == 200 else []
            found += bool(results) and results[0]["key"] == item.key
    return {"searches": checked, "found_first": found}


def run(*, quick: bool = False) -> dict[str, Any]:
    import httpx
    from django.conf import settings

    from teams.services import create_team, create_token

    burst_n = 100 if quick else 300
    serial_n = 20 if quick else 50
    batch_n = 500 if quick else 2000
    queue = getattr(settings, "CELERY_TASK_DEFAULT_QUEUE", None) or "celery"
    print(
        f"\n== ingest: {burst_n} memories in a burst, then {serial_n} one at a time, then {batch_n} "
        "through memories/batch/, through the API =="
    )

    harness.reset_data()
    team = create_team(slug=TEAM_SLUG, name="Bench ingest")
    token = create_token(team=team, name="bench", scopes=["read", "write"], actor="test").raw
    burst_rows = _texts(burst_n, 0)
    serial_rows = _texts(serial_n, 50_000)
    batch_rows = _texts(batch_n, 60_000)

    headers = {"Authorization": f"Bearer {token}"}
    with (
        harness.embedded_redis() as redis_url,
        harness.celery_worker(redis_url=redis_url, queue=queue),
        # One client measuring throughput, not the token's rate budgets (the poller alone
        # reads far more than 600 a minute).
        harness.api_server(
            workers=2,
            REDIS_URL=redis_url,
            MEMORYHUB_THROTTLE_READ="1000000/min",
            MEMORYHUB_THROTTLE_WRITE="100000/min",
        ) as base,
        httpx.Client(headers=headers, timeout=60) as client,
        httpx.Client(headers=headers, timeout=60) as poll_client,
    ):
        # One throwaway memory first, so that the worker and both web workers have
        # loaded the model and opened their connections before anything is timed.
        warm = _run_phase(client, poll_client, base, _texts(3, 90_000), "warmup", burst=False)
        del warm
        burst = _run_phase(client, poll_client, base, burst_rows, "burst", burst=True)
        serial = _run_phase(client, poll_client, base, serial_rows, "serial", burst=False)
        batch_figures, batch = _run_batch_phase(client, poll_client, base, batch_rows, "batch")
        check = _check_searchable(client, base, burst.items + serial.items + batch.items)
    # Measured after the phases, on the machine the bench no longer loads.
    ceiling = _embedding_ceiling(batch_rows)

    figures: dict[str, dict[str, Any]] = {
        "burst": _phase_figures(burst, burst=True),
        "one_at_a_time": _phase_figures(serial, burst=False),
        "memories/batch": batch_figures,
    }
    headers_row = [
        "phase", "memories", "chunks", "saved/s", "indexed/s", "save p50", "save p95",
        "to searchable p50", "to searchable p95",
    ]  # fmt: skip
    rows = []
    for name, f in figures.items():
        rows.append(
            [
                name,
                str(f["memories"]),
                str(f["chunks"]),
                f"{f['saved_per_second']:.1f}" if f["saved_per_second"] else "-",
                f"{f['indexed_per_second']:.1f}",
                f"{f['save_request_ms']['p50']:.0f} ms",
                f"{f['save_request_ms']['p95']:.0f} ms",
                f"{f['save_to_searchable_ms']['p50']:.0f} ms",
                f"{f['save_to_searchable_ms']['p95']:.0f} ms",
            ]
        )
    print()
    harness.print_table(headers_row, rows)
    print(
        "saved/s: burst memories / time from the first POST to the last 201 (one client, sequential).\n"
        "indexed/s: memories / time from the first POST until the last one was seen indexed.\n"
        f"memories/batch: save p50/p95 are per request of up to {BATCH_SIZE} entries; to searchable "
        f"follows the last key of each {INDEX_MESSAGE} (the worker's indexing message).\n"
        "to searchable: from the 201 to the first GET that shows index_state=indexed "
        f"(polled every {POLL_INTERVAL * 1000:.0f} ms plus one GET; the burst's figure includes queueing).\n"
        f"check: {check['found_first']}/{check['searches']} searches for a memory's unique word "
        "(keyword and hybrid) returned it first.\n"
        f"memories/batch: {figures['memories/batch']['merged_as_near_duplicates']} entries were found, once "
        "indexed, to repeat another and superseded by it (the worker's near-duplicate check)."
    )
    batch_rate = figures["memories/batch"]["indexed_per_second"]
    single_rate = figures["burst"]["saved_per_second"] or 0.0
    targets = [
        ("memories/batch until searchable", f"{batch_rate:.1f}/s", ">= 200/s", batch_rate >= 200),
        ("single saves (burst)", f"{single_rate:.1f}/s", ">= 50/s", single_rate >= 50),
        (
            "memories/batch save -> searchable p95",
            f"{figures['memories/batch']['save_to_searchable_ms']['p95']:.0f} ms",
            "<= 1000 ms",
            figures["memories/batch"]["save_to_searchable_ms"]["p95"] <= 1000,
        ),
    ]
    print()
    harness.print_table(
        ["target", "measured", "target", ""],
        [[name, measured, goal, "met" if met else "missed"] for name, measured, goal, met in targets],
    )
    print(
        f"embedding ceiling: the local model alone embeds the batch phase's {ceiling['chunks']} chunks "
        f"({ceiling['memories']} memories) in {ceiling['seconds']:.1f} s on {ceiling['threads']} threads: "
        f"{ceiling['memories_per_second']:.1f} memories/s; memories/batch reached "
        f"{batch_rate / ceiling['memories_per_second']:.0%} of it."
    )
    for name, f in figures.items():
        if "pending_in_save_response" in f and f["pending_in_save_response"] != f["memories"]:
            print(
                f"warning ({name}): {f['memories'] - f['pending_in_save_response']} saves were already "
                "indexed when the POST answered: the broker was not used for them"
            )

    return {
        "section": "ingest",
        "quick": quick,
        "how": {
            "server": "gunicorn memoryhub.wsgi, 2 workers, the bench's embedded Redis, rate limits raised",
            "worker": f"celery -A memoryhub worker --pool prefork -Q {queue} (make run's concurrency: "
            "one process per core)",
            "embedding_ceiling": "provider_for('local').embed_documents over the batch phase's chunks, split "
            "over one thread per worker process, after the phases",
            "client": "httpx, one POST at a time; a second thread polls GET /memories/{key}/",
            "batch": f"POST memories/batch/ with up to {BATCH_SIZE} entries and {BATCH_BYTES} bytes a request",
            "texts": f"TextGenerator (latency.py) with a unique marker word; {LONG_SHARE:.0%} are long "
            "(16-41 paragraphs, several chunks); embedding cache emptied first",
            "warm_up": "3 memories saved and indexed one at a time before timing",
        },
        "figures": figures,
        "search_check": check,
        "embedding_ceiling": ceiling,
        "targets": [
            {"target": name, "measured": measured, "goal": goal, "met": met}
            for name, measured, goal, met in targets
        ],
    }
