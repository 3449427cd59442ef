"""Write throughput and save-to-searchable time with a real broker and worker.

A gunicorn server and one Celery worker (prefork, one process per core as `make run`), both
with the bench's own embedded Redis (emptied first) and the bench data folder. The
client POSTs memories through the API; a second thread polls
`GET /memories/{key}/` until `index_state == "indexed"`. Two phases:

- burst: N memories posted back to back; the worker drains the queue while they
  arrive, so save-to-searchable includes the time spent waiting in the queue;
- one at a time: each memory is posted only after the previous one is searchable and
  the worker has gone quiet again (the contradiction pass and the announcement run after
  an entry is marked indexed), so save-to-searchable is the latency of an idle pipeline.

- batch: N memories posted through `POST memories/batch/` (up to BATCH_SIZE entries a
  request, each request under BATCH_BYTES), one request after the other; the worker
  indexes them in messages of 100 (search.index_memories), so the poller follows the
  last key of each hundred, and every key is checked indexed at the end (untimed).

Reads meanwhile: before the batch phase, with the worker quiet and nothing queued, a
reader (another agent's token, its own client and connection) GETs existing entries one
after the other (the idle baseline); during the batch phase a thread does the same GETs
back to back until the poller has seen the last key indexed. The poller's own GETs are
the bench's instrument and are not counted among the reads.

The embedding cache is emptied first and every text is new, so each chunk is embedded.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.bench import harness
from tests.bench.latency import TextGenerator

TEAM_SLUG = "bench-ingest"
POLL_INTERVAL = 0.01  # seconds between two polls of a pending key
TIMEOUT = 600.0
LONG_SHARE = 0.15  # share of long, multi-chunk memories
IDLE_READS = 300  # GETs of the idle read baseline (--quick: 100)
READ_WARMUP = 5  # untimed GETs that open a reader's connection
WORKER_QUIET_SECONDS = 0.5  # the worker is idle once it spends under 5% of this in CPU


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
    polls: int = 0  # the poller's GETs: the instrument's own load on the server


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
        phase.polls += 1
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
    client: Any,
    poll_client: Any,
    base: str,
    rows: list[Any],
    prefix: str,
    *,
    burst: bool,
    before_each: Callable[[], None] | None = None,
) -> Phase:
    phase = Phase()
    errors: list[str] = []
    poller = threading.Thread(target=_poller, args=(poll_client, base, phase, errors), daemon=True)
    poller.start()
    for i, (memory_type, content, marker, chunks) in enumerate(rows):
        if before_each is not None:
            before_each()
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


class Reader:
    """GETs of existing entries, one after the other, on a client of its own: what an
    agent reading the team waits for. `measure(n)` times n of them in this thread;
    `start()` ... `stop()` times them back to back in a thread of its own."""

    def __init__(self, base: str, token: str, keys: list[str]) -> None:
        import httpx

        self._url = f"{base}/api/v1/teams/{TEAM_SLUG}/memories/"
        self._headers = {"Authorization": f"Bearer {token}"}
        self._keys = list(keys)
        random.Random(17).shuffle(self._keys)
        self._client_class = httpx.Client
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._ms: list[float] = []
        self._errors: list[str] = []
        self.merged_away = 0  # keys that 404ed: merged into a near-duplicate meanwhile

    def _read_all(self, count: int | None) -> list[float]:
        """`count` timed GETs (None: until stopped) on a new client, after its warm-up GETs."""
        ms: list[float] = []
        with self._client_class(headers=self._headers, timeout=60) as client:
            for i in range(READ_WARMUP):
                self._get(client, i)
            i = 0
            while (count is None and not self._stop.is_set()) or (count is not None and len(ms) < count):
                began = time.perf_counter()
                if self._get(client, i):
                    ms.append((time.perf_counter() - began) * 1000)
                i += 1
        return ms

    def _get(self, client: Any, i: int) -> bool:
        """Whether the key's entry was read. A key the batch phase's worker merged into a
        near-duplicate of another key has no active entry any more (404): it leaves the
        rotation, untimed."""
        key = self._keys[i % len(self._keys)]
        response = client.get(f"{self._url}{key}/")
        if response.status_code == 404 and len(self._keys) > 1:
            self._keys.remove(key)
            self.merged_away += 1
            return False
        if response.status_code != 200:
            raise RuntimeError(f"read GET {key}: {response.status_code} {response.text[:300]}")
        return True

    def measure(self, count: int) -> list[float]:
        return self._read_all(count)

    def start(self) -> None:
        def loop() -> None:
            try:
                self._ms = self._read_all(None)
            except Exception as error:  # reported by stop(), in the bench's thread
                self._errors.append(repr(error))

        self._stop.clear()
        self._thread = threading.Thread(target=loop, daemon=True)
        self._thread.start()

    def stop(self) -> list[float]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(TIMEOUT)
        if self._errors:
            raise RuntimeError("; ".join(self._errors))
        return self._ms


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
    client: Any, poll_client: Any, base: str, rows: list[Any], prefix: str, reader: Reader
) -> tuple[dict[str, Any], Phase, list[float]]:
    """POST the rows in batches; the poller follows the last key of each hundred (the
    worker indexes a hundred per message, first in, first out). The reader reads from
    before the first POST until the poller has seen the last key indexed."""
    phase = Phase()
    errors: list[str] = []
    poller = threading.Thread(target=_poller, args=(poll_client, base, phase, errors), daemon=True)
    reader.start()
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
    reads_ms = reader.stop()
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
    return (
        {
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
            "poller_gets": phase.polls,
        },
        phase,
        reads_ms,
    )


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


def _queued(redis_url: str, queue: str) -> int:
    """Messages waiting in the broker's queue (not yet taken by the worker)."""
    import redis

    client = redis.Redis.from_url(redis_url.replace("redis+socket://", "unix://", 1))
    try:
        return int(client.llen(queue))
    finally:
        client.close()


def run(*, quick: bool = False) -> dict[str, Any]:
    import os

    import httpx
    from django.conf import settings

    from teams.services import create_team, create_token
    from tests.bench.capacity import _Processes

    burst_n = 100 if quick else 300
    serial_n = 20 if quick else 50
    batch_n = 500 if quick else 2000
    idle_reads = 100 if quick else IDLE_READS
    queue = getattr(settings, "CELERY_TASK_DEFAULT_QUEUE", None) or "celery"
    print(
        f"\n== ingest: {burst_n} memories in a burst, then {serial_n} one at a time, then {batch_n} "
        "through memories/batch/, through the API =="
    )

    harness.reset_data()
    team = create_team(slug=TEAM_SLUG, name="Bench ingest")
    token = create_token(team=team, name="bench", scopes=["read", "write"], actor="test").raw
    # Another agent of the team: its in-flight slots and rate budget are its own.
    reader_token = create_token(team=team, name="bench-reader", scopes=["read"], actor="test").raw
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
        processes = _Processes()

        def worker_idle() -> None:
            processes.wait_worker_idle(quiet_seconds=WORKER_QUIET_SECONDS)

        serial = _run_phase(
            client, poll_client, base, serial_rows, "serial", burst=False, before_each=worker_idle
        )
        reader = Reader(base, reader_token, [i.key for i in burst.items + serial.items])
        worker_idle()
        queued_before_idle_reads = _queued(redis_url, queue)
        load_before_idle_reads = os.getloadavg()
        idle_reads_ms = reader.measure(idle_reads)
        batch_figures, batch, busy_reads_ms = _run_batch_phase(
            client, poll_client, base, batch_rows, "batch", reader
        )
        load_after_batch = os.getloadavg()
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
        "indexed/s: memories / time from the first POST until the last one was seen indexed "
        "(one_at_a_time: including the waits for a quiet worker before each save).\n"
        f"memories/batch: save p50/p95 are per request of up to {BATCH_SIZE} entries; to searchable "
        f"follows the last key of each {INDEX_MESSAGE} (the worker's indexing message).\n"
        "to searchable: from the 201 to the first GET that shows index_state=indexed "
        f"(polled every {POLL_INTERVAL * 1000:.0f} ms plus one GET; the burst's figure includes queueing).\n"
        f"check: {check['found_first']}/{check['searches']} searches for a memory's unique word "
        "(keyword and hybrid) returned it first.\n"
        f"memories/batch: {figures['memories/batch']['merged_as_near_duplicates']} entries were found, once "
        "indexed, to repeat another and superseded by it (the worker's near-duplicate check)."
    )
    reads: dict[str, Any] = {
        "idle": harness.summarize(idle_reads_ms),
        "while_ingesting": harness.summarize(busy_reads_ms),
        "queued_before_idle_reads": queued_before_idle_reads,
        "load_average_before_idle_reads": [round(x, 2) for x in load_before_idle_reads],
        "load_average_after_batch": [round(x, 2) for x in load_after_batch],
    }
    reads["p95_while_ingesting_to_idle"] = round(reads["while_ingesting"]["p95"] / reads["idle"]["p95"], 2)
    print()
    harness.print_table(
        ["reads (GET memories/<key>/)", "GETs", "p50", "p95", "p99", "max"],
        [
            [
                name,
                str(r["n"]),
                f"{r['p50']:.1f} ms",
                f"{r['p95']:.1f} ms",
                f"{r['p99']:.1f} ms",
                f"{r['max']:.1f} ms",
            ]
            for name, r in (
                ("idle (worker quiet, nothing queued)", reads["idle"]),
                ("while memories/batch is ingesting", reads["while_ingesting"]),
            )
        ],
    )
    print(
        "reads: another token's client and connection, one GET after the other of the burst's and the "
        f"one-at-a-time phase's entries; {READ_WARMUP} untimed GETs first. While ingesting: from before "
        "the first batch POST until the poller saw the last key indexed (the poller's GETs are not counted: "
        f"{figures['memories/batch']['poller_gets']} of them meanwhile, on the same server).\n"
        f"queued before the idle reads: {queued_before_idle_reads}; load average (1, 5, 15 min) before the "
        f"idle reads {reads['load_average_before_idle_reads']}, after the batch phase "
        f"{reads['load_average_after_batch']}.\n"
        f"keys left out of the reads once merged into a near-duplicate by the batch phase (404, untimed): "
        f"{reader.merged_away}."
    )

    batch_rate = figures["memories/batch"]["indexed_per_second"]
    single_rate = figures["burst"]["saved_per_second"] or 0.0
    to_ceiling = batch_rate / ceiling["memories_per_second"]
    read_ratio = reads["p95_while_ingesting_to_idle"]
    serial_p95 = figures["one_at_a_time"]["save_to_searchable_ms"]["p95"]
    targets = [
        ("memories/batch until searchable", f"{batch_rate:.1f}/s", ">= 200/s", batch_rate >= 200),
        (
            "memories/batch until searchable / model's own rate",
            f"{to_ceiling:.0%} ({ceiling['memories_per_second']:.1f}/s)",
            ">= 70%",
            to_ceiling >= 0.70,
        ),
        (
            "reads' p95 while ingesting / idle p95",
            f"{read_ratio:.2f}x ({reads['while_ingesting']['p95']:.0f} / {reads['idle']['p95']:.0f} ms)",
            "<= 2x",
            read_ratio <= 2.0,
        ),
        ("single saves (burst)", f"{single_rate:.1f}/s", ">= 50/s", single_rate >= 50),
        (
            "single save -> searchable p95 (one at a time, idle worker)",
            f"{serial_p95:.0f} ms",
            "<= 1000 ms",
            serial_p95 <= 1000,
        ),
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
        f"{to_ceiling:.0%} of it (with the reader reading meanwhile)."
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
            "one_at_a_time": "each save after the previous one is indexed and the worker's CPU has been "
            f"quiet (under 5%) for {WORKER_QUIET_SECONDS} s",
            "reads": f"GET /memories/{{key}}/ of the burst's and one-at-a-time's entries with another token, "
            f"its own httpx client and connection, one after the other: {idle_reads} before the batch phase "
            "(worker quiet, queue empty), then back to back in a thread from before the first batch POST "
            "until the poller saw the last batch key indexed; the poller's GETs are not counted",
            "batch": f"POST memories/batch/ with up to {BATCH_SIZE} entries and {BATCH_BYTES} bytes a request",
            "texts": f"TextGenerator (latency.py) with a unique marker word; {LONG_SHARE:.0%} are long "
            "(16-41 paragraphs, several chunks); embedding cache emptied first",
            "warm_up": "3 memories saved and indexed one at a time before timing",
        },
        "figures": figures,
        "search_check": check,
        "embedding_ceiling": ceiling,
        "batch_to_embedding_ceiling": round(to_ceiling, 3),
        "reads": reads,
        "targets": [
            {"target": name, "measured": measured, "goal": goal, "met": met}
            for name, measured, goal, met in targets
        ],
    }
