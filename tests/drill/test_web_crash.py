"""Fault drill: the web server is killed (SIGKILL, every process) while agents
supersede the same keys. Afterwards each key has exactly one active entry (the old or
the new version, never both, never none), every supersede answered 201 is in the key's
history, and each version supersedes the one before it; a new server serves at once."""

from __future__ import annotations

import itertools
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from memories.models import Memory
from teams.services import create_team, create_token
from tests.conftest import operator_view
from tests.drill.record import record
from tests.search.conftest import free_port
from tests.web_server import WebServer, server_env
from tests.worker import database_url, wait_for

pytestmark = [pytest.mark.drill, pytest.mark.django_db(transaction=True)]

REPO = Path(__file__).resolve().parents[2]
GUNICORN = str(Path(sys.executable).parent / "gunicorn")
KEYS = ("fact-a", "fact-b")
WRITERS_PER_KEY = 3
MAX_WRITES = 200  # each writer's bound
SERVER_START_SECONDS = 90.0  # hang detectors, not speed targets


def start_server(port: int, log: Path) -> WebServer:
    # Six writers share one token, all in flight at once: past the guard's default cap.
    env = server_env(
        database_url(), MEMORYHUB_THROTTLE_WRITE="100000/min", MEMORYHUB_IN_FLIGHT_PER_CLIENT="8"
    )
    return WebServer(env, log, "--workers", "2", "--threads", "4", port=port).start()


class Superseder(threading.Thread):
    """Supersedes one key again and again, recording each text answered 201."""

    def __init__(self, base: str, token: str, key: str, writer: int) -> None:
        super().__init__(daemon=True)
        self.base, self.token, self.key, self.writer = base, token, key, writer
        self.acknowledged: list[str] = []
        self.cut_off = False  # met the crash: in flight, or its next request refused

    def run(self) -> None:
        headers = {"Authorization": f"Bearer {self.token}"}
        with httpx.Client(base_url=self.base, headers=headers, timeout=30) as client:
            for n in range(MAX_WRITES):
                content = f"Version {n} of {self.key} by writer {self.writer}."
                body = {"key": self.key, "content": content, "supersede_reason": "the drill learned more"}
                try:
                    response = client.post("memories/", json=body)
                except httpx.TransportError:
                    self.cut_off = True
                    return
                if response.status_code == 201:
                    self.acknowledged.append(content)


def test_killing_the_web_server_mid_supersede_leaves_one_active_version_per_key(tmp_path: Path) -> None:
    team = create_team(slug="crash", name="Crash")
    token = create_token(team=team, name="bot", scopes=["read", "write"], actor="test").raw
    log = tmp_path / "gunicorn.log"
    port = free_port()
    base = f"http://127.0.0.1:{port}/api/v1/teams/crash/"
    server = start_server(port, log)
    try:
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=30) as client:
            for key in KEYS:
                assert (
                    client.post(
                        "memories/", json={"key": key, "content": f"First {key}.", "allow_duplicate": True}
                    ).status_code
                    == 201
                )

        writers = [Superseder(base, token, key, writer) for key in KEYS for writer in range(WRITERS_PER_KEY)]
        for writer in writers:
            writer.start()
        wait_for(lambda: sum(len(w.acknowledged) for w in writers) >= 30, 60, "supersedes before the crash")
        server.kill()
        for writer in writers:
            writer.join(60)
        assert not any(writer.is_alive() for writer in writers)
        assert all(writer.cut_off for writer in writers), (
            "every writer was still writing when the server died"
        )
    finally:
        server.kill()

    # Whatever was in flight was rolled back or committed whole.
    with operator_view():
        for key in KEYS:
            versions = list(Memory.objects.filter(team=team, key=key).order_by("created_at", "id"))
            assert [m.id for m in versions if m.is_active] == [versions[-1].id], key
            assert versions[0].supersedes_id is None
            for older, newer in itertools.pairwise(versions):
                assert newer.supersedes_id == older.id, key
            held = {m.content for m in versions}
            acknowledged = [text for w in writers if w.key == key for text in w.acknowledged]
            assert acknowledged and set(acknowledged) <= held, key

    # A new server answers with the active version at once, no manual step.
    restarting = time.monotonic()
    server = start_server(port, log)
    try:
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=30) as client:
            for key in KEYS:
                response = client.get(f"memories/{key}/")
                assert response.status_code == 200
                with operator_view():
                    active = Memory.objects.get(team=team, key=key, is_active=True)
                assert response.json()["id"] == str(active.id)
            after = client.post(
                "memories/",
                json={"key": KEYS[0], "content": "After the crash.", "supersede_reason": "recovered"},
            )
            assert after.status_code == 201, after.text
            restarted_in = time.monotonic() - restarting
    finally:
        server.kill()
    record(
        "web server killed mid-supersede",
        keys=len(KEYS),
        writers=len(writers),
        acknowledged_supersedes=sum(len(w.acknowledged) for w in writers),
        active_versions_per_key=1,
        chains_unbroken=True,
        lost=0,
        serving_again_seconds=round(restarted_in, 1),
    )
