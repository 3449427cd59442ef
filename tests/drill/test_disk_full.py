"""Fault drill: the disk under PostgreSQL fills up while an agent saves.

The test's own PostgreSQL lives on a tmpfs of a fixed size, which the drill shrinks to
a little more than it uses, then an agent saves 64 KiB memories until the service
refuses. Every refusal is a 503 in the error shape (never a 500), nothing acknowledged
is lost, and once the disk has room again the service takes saves with no manual step
but (when PostgreSQL stopped itself) starting it again. Nothing is corrupted: a backup
afterwards reads every row of every table, with PostgreSQL's data checksums on.

Mounting a tmpfs needs root: as another user this drill fails, saying so.
"""

from __future__ import annotations

import os
import random
import shutil
import string
import subprocess
from collections import Counter
from pathlib import Path

import httpx
import psycopg
import pytest

from tests.drill.record import record
from tests.memoryhub.private_postgres import PrivatePostgres
from tests.web_server import WebServer, manage, server_env
from tests.worker import wait_for

pytestmark = pytest.mark.drill

HEADROOM_BYTES = 24 * 1024 * 1024  # what the disk has left when the saves begin
ROOMY = "1g"
MAX_SAVES = 2_000  # the drill's bound: 24 MiB takes a few hundred 64 KiB saves
REFUSALS_TO_STOP = 5
RECOVERY_SECONDS = 120.0  # hang detector


def mount_tmpfs(folder: Path, size: str) -> None:
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], check=True)  # noqa: S603, S607


def resize_tmpfs(folder: Path, size: str | int) -> None:
    subprocess.run(["mount", "-o", f"remount,size={size}", str(folder)], check=True)  # noqa: S603, S607


def incompressible_text(rng: random.Random, size: int) -> str:
    """Words of random letters: PostgreSQL's compression cannot shrink them much, and
    no credential rule of the scrubber mistakes them for a secret."""
    words: list[str] = []
    length = 0
    while length < size:
        word = "".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 9)))
        words.append(word)
        length += len(word) + 1
    return " ".join(words)[:size]


def test_a_full_disk_answers_503_loses_nothing_acknowledged_and_corrupts_nothing(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.fail("the disk-full drill mounts a size-limited tmpfs, which needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    mount_tmpfs(disk, ROOMY)
    postgres = PrivatePostgres(disk / "data")
    server: WebServer | None = None
    try:
        postgres.start()
        with psycopg.connect(host=postgres.settings["HOST"], user="postgres", dbname="postgres") as conn:
            row = conn.execute("SHOW data_checksums").fetchone()
        assert row is not None and row[0] == "on", "the drill's corruption check relies on data checksums"
        env = server_env(
            postgres.url("memoryhub_app"),
            OPERATOR_DATABASE_URL=postgres.url("memoryhub_operator"),
            MEMORYHUB_DATA_DIR=str(disk / "data"),
            MEMORYHUB_THROTTLE_WRITE="100000/min",
            MEMORYHUB_DB_RETRY_AFTER_SECONDS="2",
        )
        manage({**env, **postgres.urls("memoryhub_owner")}, "migrate", "--noinput")
        manage(env, "create_team", "full", "--name", "Full disk")
        with psycopg.connect(
            host=postgres.settings["HOST"], user="postgres", dbname=postgres.settings["NAME"]
        ) as conn:
            # No embedding: the drill fills the disk, not the CPU (tasks run in the server).
            conn.execute("UPDATE teams_team SET embedding_profile = 'none' WHERE slug = 'full'")
        token = manage(env, "create_token", "full", "--name", "bot", "--scopes", "read,write").split()[-1]
        server = WebServer(env, tmp_path / "gunicorn.log", "--workers", "1").start()
        client = httpx.Client(
            base_url=f"{server.base}/api/v1/teams/full/",
            headers={"Authorization": f"Bearer {token}"},
            timeout=60,
        )

        resize_tmpfs(disk, shutil.disk_usage(disk).used + HEADROOM_BYTES)
        rng = random.Random(14)
        acknowledged: dict[str, str] = {}
        statuses: Counter[int] = Counter()
        refusals = 0
        for n in range(MAX_SAVES):
            content = incompressible_text(rng, 60_000)
            response = client.post(
                "memories/", json={"key": f"big-{n}", "content": content, "allow_duplicate": True}
            )
            statuses[response.status_code] += 1
            assert response.status_code in (201, 503), response.text
            if response.status_code == 201:
                acknowledged[f"big-{n}"] = content
                continue
            assert response.json()["error"] == "database_unavailable"
            assert response.headers["Retry-After"] == "2"
            refusals += 1
            if refusals >= REFUSALS_TO_STOP:
                break
        assert refusals >= REFUSALS_TO_STOP, f"the disk never filled: {dict(statuses)}"
        postgres_survived = bool(postgres.processes())

        resize_tmpfs(disk, ROOMY)
        if not postgres_survived:
            postgres.start()  # crash recovery on the same data, as `make run` would
        wait_for(
            lambda: (
                client.post("memories/", json={"key": "after", "content": "Room again."}).status_code == 201
            ),
            RECOVERY_SECONDS,
            "saves to work again",
        )
        for key, content in acknowledged.items():
            kept = client.get(f"memories/{key}/")
            assert kept.status_code == 200 and kept.json()["content"] == content, key
        # Every row of every table read back (a checksum failure fails the backup).
        manage(env, "backup", "--without-keys", str(tmp_path / "backup"))
    finally:
        if server is not None:
            server.stop()
        postgres.stop()
        subprocess.run(["umount", str(disk)], check=False)  # noqa: S603, S607
    record(
        "disk under PostgreSQL full",
        saves=sum(statuses.values()),
        statuses=dict(sorted(statuses.items())),
        acknowledged=len(acknowledged),
        postgres_stopped_itself=not postgres_survived,
        responses_500=0,
        lost=0,
        corruption="none (full backup read back with data checksums on)",
    )
