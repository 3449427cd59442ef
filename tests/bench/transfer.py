"""`python -m tests.bench transfer`: export and import throughput at 100k memories, and
the exporting process's peak memory.

One team of 100,000 memories: 90,000 keys, 10,000 of them with a second (superseded)
version, and 5,000 notes. The deployment's gunicorn (2 threaded processes) serves it with
the bench's embedded Redis as the broker and no worker running, so the import's indexing
is only enqueued ("deferred to the workers"), as in production. Both directions go through
the `memoryhub` command, as a user runs them:

- export: `memoryhub export --output FILE` (streamed);
- import: `memoryhub import FILE` into an empty team (posted in batches under the body limit).

Peak memory is the high-water mark of resident memory (VmHWM) of the gunicorn worker
processes, read before and after the export: the process that streamed it.

Targets: export >= 2,000 memories/s, import >= 500 memories/s, exporting process <= 200 MB.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.bench import harness
from tests.bench.latency import TextGenerator

TEAM_SLUG = "bench-transfer"
TARGET_SLUG = "bench-transfer-copy"
SIZE = 100_000
QUICK_SIZE = 10_000
SUPERSEDED_SHARE = 10  # one key in ten has an older version
NOTE_SHARE = 20  # one memory in twenty has a note
INSERT_BATCH = 5_000
TARGET_EXPORT_PER_SECOND = 2_000
TARGET_IMPORT_PER_SECOND = 500
TARGET_PEAK_MB = 200
SEED = 20261123
CLI_SECONDS = 3_600  # a hang detector


def _seed(size: int) -> tuple[Any, str, Any, str]:
    """The source team with `size` memory rows and its notes; an empty target team; an
    admin token for each."""
    from datetime import timedelta

    from django.utils import timezone

    from memories.models import Annotation, IndexState, Memory
    from teams.models import Team
    from teams.scope import team_scope
    from teams.services import create_team, create_token

    source = create_team(slug=TEAM_SLUG, name="Bench transfer")
    target = create_team(slug=TARGET_SLUG, name="Bench transfer copy")
    source_token = create_token(team=source, name="bench", scopes=["admin"], actor="test").raw
    target_token = create_token(team=target, name="bench", scopes=["admin"], actor="test").raw
    generator = TextGenerator(SEED % 1_000)
    then = timezone.now() - timedelta(days=30)
    with team_scope(source.id):
        Team.objects.filter(id=source.id).update(embedding_profile="none")
        made = 0
        while made < size:
            batch: list[Memory] = []
            while len(batch) < INSERT_BATCH and made < size:
                memory_type, content = generator.memory()
                key = f"{memory_type}-{made:06d}"
                common = dict(team=source, key=key, type=memory_type, updated_by="bench-seed")
                if made % SUPERSEDED_SHARE == 0 and made + 1 < size:
                    old = Memory(
                        **common,
                        content=content + " (first draft)",
                        content_hash=Memory.hash_content(content + " (first draft)"),
                        is_active=False,
                        created_at=then,
                        index_state=IndexState.INDEXED,
                    )
                    batch.append(old)
                    made += 1
                batch.append(
                    Memory(
                        **common,
                        content=content,
                        content_hash=Memory.hash_content(content),
                        supersede_reason="corrected" if batch and batch[-1].key == key else "",
                        index_state=IndexState.INDEXED,
                    )
                )
                made += 1
            saved = Memory.objects.bulk_create(batch)
            Annotation.objects.bulk_create(
                Annotation(team=source, memory=memory, note=f"checked by the bench ({i})", created_by="bench")
                for i, memory in enumerate(saved)
                if memory.is_active and i % NOTE_SHARE == 0
            )
    harness.vacuum_analyze("memories_memory")
    return source, source_token, target, target_token


def _worker_memory_mb(port: int) -> dict[int, tuple[float, float]]:
    """Each gunicorn process serving `port`: (resident MB now, peak resident MB)."""
    import psutil

    figures = {}
    for process in psutil.process_iter(["pid", "cmdline"]):
        if f"127.0.0.1:{port}" not in " ".join(process.info["cmdline"] or []):
            continue
        status = Path(f"/proc/{process.info['pid']}/status").read_text()
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        figures[process.info["pid"]] = (
            int(fields["VmRSS"].split()[0]) / 1024,
            int(fields["VmHWM"].split()[0]) / 1024,
        )
    return figures


def _memoryhub(base: str, team: str, token: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("MEMORYHUB_")},
        "MEMORYHUB_URL": base,
        "MEMORYHUB_TEAM": team,
        "MEMORYHUB_TOKEN": token,
        "XDG_CONFIG_HOME": "/nonexistent",
    }
    done = subprocess.run(  # noqa: S603 (our own command)
        [str(harness.BIN / "memoryhub"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=CLI_SECONDS,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    if done.returncode != 0:
        raise RuntimeError(f"memoryhub {' '.join(args)} failed: {done.stderr[-2000:]}")
    return done


def run(*, quick: bool = False) -> dict[str, Any]:
    size = QUICK_SIZE if quick else SIZE
    print(f"\n== transfer: export and import of {size:,} memories through the memoryhub command ==")
    harness.reset_data()
    started = time.perf_counter()
    source, source_token, target, target_token = _seed(size)
    print(f"seeded {size:,} memories in {time.perf_counter() - started:.1f} s")

    with (
        tempfile.TemporaryDirectory() as folder,
        harness.embedded_redis() as redis_url,
        harness.api_server(workers=2, REDIS_URL=redis_url, MEMORYHUB_THROTTLE_WRITE="100000/min") as base,
    ):
        port = int(base.rsplit(":", 1)[1])
        before = _worker_memory_mb(port)
        export_file = Path(folder) / "export.jsonl"
        began = time.perf_counter()
        _memoryhub(base, source.slug, source_token, "export", "--output", str(export_file))
        export_seconds = time.perf_counter() - began
        after = _worker_memory_mb(port)
        trailer = json.loads(export_file.read_bytes().rsplit(b"\n", 2)[-2])
        if trailer.get("memories") != size:
            raise RuntimeError(f"the export holds {trailer.get('memories')} memories, not {size}")
        file_mb = export_file.stat().st_size / 1024 / 1024

        began = time.perf_counter()
        imported = _memoryhub(base, target.slug, target_token, "import", str(export_file))
        import_seconds = time.perf_counter() - began
    print(imported.stdout.strip())

    export_rate = size / export_seconds
    import_rate = size / import_seconds
    rss_before = max(now for now, _ in before.values())
    peak = max(high for _, high in after.values())
    growth = max(after[pid][1] - before.get(pid, (0.0, 0.0))[0] for pid in after)
    rows = [
        [
            "export",
            f"{export_seconds:.1f}",
            f"{export_rate:,.0f}",
            f">= {TARGET_EXPORT_PER_SECOND:,}",
            "met" if export_rate >= TARGET_EXPORT_PER_SECOND else "MISSED",
        ],
        [
            "import (indexing enqueued)",
            f"{import_seconds:.1f}",
            f"{import_rate:,.0f}",
            f">= {TARGET_IMPORT_PER_SECOND:,}",
            "met" if import_rate >= TARGET_IMPORT_PER_SECOND else "MISSED",
        ],
    ]
    harness.print_table(["direction", "seconds", "memories/s", "target", ""], rows)
    print(
        f"export file {file_mb:.1f} MB; gunicorn worker resident memory {rss_before:.0f} MB before the "
        f"export, peak {peak:.0f} MB (grew by at most {growth:.0f} MB); target peak <= {TARGET_PEAK_MB} MB: "
        f"{'met' if peak <= TARGET_PEAK_MB else 'MISSED'}"
    )
    return {
        "section": "transfer",
        "how": (
            f"{size} memory rows ({100 // SUPERSEDED_SHARE}% superseded versions, notes on 1 in {NOTE_SHARE}); "
            "gunicorn with memoryhub.gunicorn_conf (2 processes), embedded Redis as broker, no worker; "
            "the memoryhub command for both directions"
        ),
        "memories": size,
        "export_seconds": round(export_seconds, 2),
        "export_per_second": round(export_rate),
        "import_seconds": round(import_seconds, 2),
        "import_per_second": round(import_rate),
        "export_file_mb": round(file_mb, 1),
        "worker_rss_before_mb": round(rss_before),
        "worker_peak_rss_mb": round(peak),
        "targets": {
            "export_per_second": TARGET_EXPORT_PER_SECOND,
            "import_per_second": TARGET_IMPORT_PER_SECOND,
            "peak_mb": TARGET_PEAK_MB,
        },
        "targets_met": export_rate >= TARGET_EXPORT_PER_SECOND
        and import_rate >= TARGET_IMPORT_PER_SECOND
        and peak <= TARGET_PEAK_MB,
    }
