"""The connection pool and the 503 for a database that is down (docs/operations.md, "Why a
pool"), in this process: a pooled connection handed back carries no role and no team scope
to the next request, switching logins switches pools, the real settings build the pool, and
a dead database answers 503 with Retry-After.

The suite runs without the pool (memoryhub/settings_test.py says why); these tests turn
it on for the test's connection. test_database_outage.py kills a real server instead."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.contrib.auth import get_user_model
from django.db import close_old_connections, connection
from django.test import Client
from prometheus_client import REGISTRY
from psycopg_pool import ConnectionPool

from core.database_pool import check_lent_connection
from teams.roles import APP_ROLE, OPERATOR_ROLE, OWNER_ROLE, log_in_as, log_in_as_owner
from teams.scope import TEAM_SETTING
from tests.conftest import Agent

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def pool_of_one() -> Iterator[None]:
    """The test's connection draws from a pool of one connection, checked as it is lent
    as a server's is (memoryhub/settings.py)."""
    db = connection.settings_dict
    saved = db["CONN_MAX_AGE"], db["OPTIONS"]
    connection.close()
    db["CONN_MAX_AGE"] = 0
    db["OPTIONS"] = {**saved[1], "pool": {"min_size": 1, "max_size": 1, "timeout": 10}}
    try:
        yield
    finally:
        connection.close()
        connection.close_pool()
        db["CONN_MAX_AGE"], db["OPTIONS"] = saved


def session_state() -> dict[str, Any]:
    """Who the pooled connection is and what it carries, read outside any transaction."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_backend_pid(), current_user, current_setting('role'), current_setting(%s, true)",
            [TEAM_SETTING],
        )
        pid, user, role, team = cursor.fetchone()
    return {"pid": pid, "user": user, "role": role, "team": team or ""}


def hand_back() -> None:
    """What the end of every request does (request_finished): with the pool, the
    connection goes back to it. The test client leaves that signal out."""
    close_old_connections()
    assert connection.connection is None, "the connection was not handed back to the pool"


def test_a_pooled_connection_carries_no_role_and_no_team_scope_into_the_next_request(
    pool_of_one: None, member: Agent, save: Any
) -> None:
    operator = get_user_model().objects.create_user("ops", password="pw", is_staff=True, is_superuser=True)
    before = session_state()
    assert before["user"] == APP_ROLE
    hand_back()

    # An operator path: the admin runs its request as the operator role. (The service
    # runs it on the operator's own login and pool; the test process's one connection plays
    # both logins and switches its role for the request's transaction: memoryhub/settings_test.)
    admin = Client()
    admin.force_login(operator)
    hand_back()
    assert admin.get("/admin/teams/team/").status_code == 200
    after_operator = session_state()
    hand_back()

    # A plain agent request: bound to its team for the request's transaction.
    save(member, "pool-probe", "Written through a pool of one connection.")
    hand_back()
    assert member.client.get(member.url("memories/pool-probe/")).status_code == 200
    after_agent = session_state()

    # One physical connection served every request (a pool of one, never replaced) ...
    assert after_operator["pid"] == after_agent["pid"] == before["pid"]
    # ... and came back from each as the application role (its session's), bound to no team.
    clean = {"user": APP_ROLE, "role": APP_ROLE, "team": ""}
    assert {key: after_operator[key] for key in clean} == clean
    assert {key: after_agent[key] for key in clean} == clean
    assert OPERATOR_ROLE not in {after_operator["user"], after_agent["user"]}


def test_a_lent_connection_costs_no_round_trip_and_one_the_server_ended_is_replaced(
    pool_of_one: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    checked_with_a_round_trip: list[int] = []
    round_trip_check = ConnectionPool.check_connection

    def recorded(lent: psycopg.Connection) -> None:
        checked_with_a_round_trip.append(lent.info.backend_pid)
        round_trip_check(lent)

    monkeypatch.setattr(ConnectionPool, "check_connection", staticmethod(recorded))
    first = session_state()["pid"]
    assert connection.pool._check is check_lent_connection  # the backend's swap took
    hand_back()
    assert session_state()["pid"] == first
    hand_back()
    assert checked_with_a_round_trip == []  # a quiet socket: lent as it is

    # The server ends the idle pooled connection (a restart or pg_terminate_backend does).
    db = connection.settings_dict
    login = {"host": db["HOST"], "port": db["PORT"], "user": db["USER"], "password": db["PASSWORD"]}
    with psycopg.connect(dbname=db["NAME"], autocommit=True, **login) as other:
        assert other.execute("SELECT pg_terminate_backend(%s, 5000)", [first]).fetchone() == (True,)

    # The next request gets a working connection: the goodbye was read, checked, replaced.
    replaced = session_state()
    assert replaced["pid"] != first and replaced["user"] == APP_ROLE
    assert checked_with_a_round_trip == [first]


def test_switching_logins_switches_pools(pool_of_one: None) -> None:
    """`manage.py migrate` and the test database setup log in as the owner: the pool made
    for the application role must not lend them its connections, nor the reverse."""
    assert session_state()["user"] == APP_ROLE
    previous = log_in_as_owner(connection)
    assert previous is not None
    try:
        assert session_state()["user"] == OWNER_ROLE
    finally:
        log_in_as(connection, previous)
    assert session_state()["user"] == APP_ROLE


@pytest.fixture
def dead_database(tmp_path: Path) -> Iterator[None]:
    """Point the test's connection at a socket folder where no server listens."""
    db = connection.settings_dict
    saved_host = db["HOST"]
    connection.close()
    db["HOST"] = str(tmp_path)
    try:
        yield
    finally:
        connection.close()
        db["HOST"] = saved_host


def test_a_dead_database_answers_503_with_retry_after_and_logs_it_once(
    member: Agent, dead_database: None, caplog: pytest.LogCaptureFixture, settings: Any
) -> None:
    client = Client(raise_request_exception=False, HTTP_AUTHORIZATION=f"Bearer {member.token}")
    with caplog.at_level(logging.INFO):
        api = client.get(member.url("memories/"))
    assert api.status_code == 503, api.content
    assert api["Retry-After"] == str(settings.DB_UNAVAILABLE_RETRY_AFTER_SECONDS)
    body = api.json()
    assert body == {
        "error": "database_unavailable",
        "detail": "the database is temporarily unavailable; retry later",
        "retry_after": settings.DB_UNAVAILABLE_RETRY_AFTER_SECONDS,
    }
    # Logged once, by us, with the cause; never as Django's "Internal Server Error".
    records = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.name for r in records] == ["memoryhub.database"], [r.getMessage() for r in records]
    assert "OperationalError" in records[0].getMessage()

    # The dashboard (sign-in checks the password against the database): a plain page.
    page = Client(raise_request_exception=False).post("/login/", {"username": "someone", "password": "pw"})
    assert page.status_code == 503
    assert page["Content-Type"].startswith("text/html")
    assert page["Retry-After"] == str(settings.DB_UNAVAILABLE_RETRY_AFTER_SECONDS)
    assert b"try again" in page.content
    assert str(connection.settings_dict["HOST"]).encode() not in page.content + api.content


def test_a_bug_still_answers_500(member: Agent, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the database being unavailable turns into 503."""

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr("memories.api.MemoryViewSet.list", broken)
    client = Client(raise_request_exception=False, HTTP_AUTHORIZATION=f"Bearer {member.token}")
    response = client.get(member.url("memories/"))
    assert response.status_code == 500
    assert response.json() == {"error": "server_error", "detail": "internal error"}
    assert "Retry-After" not in response


POOL_VARIABLES = {
    "MEMORYHUB_DB_POOL_MAX",
    "MEMORYHUB_DB_POOL_MIN",
    "MEMORYHUB_DB_POOL_TIMEOUT",
    "MEMORYHUB_WEB_THREADS",
    "MEMORYHUB_DB_PREPARE_THRESHOLD",
    "CONN_MAX_AGE",
}


def real_database_settings(**env: str) -> dict[str, Any]:
    """DATABASES as memoryhub.settings builds it from `env` (each alias without TEST)."""
    script = (
        "import json; from django.conf import settings; print(json.dumps({a: {k: v for k, v in d.items() "
        "if k != 'TEST'} for a, d in settings.DATABASES.items()}))"
    )
    result = subprocess.run(  # noqa: S603
        [sys.executable, "-c", script],
        cwd=REPO,
        env={
            **{k: v for k, v in os.environ.items() if k not in POOL_VARIABLES},
            "DJANGO_SETTINGS_MODULE": "memoryhub.settings",
            "DATABASE_URL": "postgres://memoryhub_app@db.invalid:5432/memoryhub",
            "OPERATOR_DATABASE_URL": "postgres://memoryhub_operator@db.invalid:5432/memoryhub",
            **env,
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    settings: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return settings


@pytest.mark.slow
def test_the_real_settings_pool_connections_per_process_within_the_configured_budget() -> None:
    databases = real_database_settings(
        MEMORYHUB_DB_POOL_MAX="6", MEMORYHUB_DB_POOL_MIN="2", MEMORYHUB_DB_POOL_TIMEOUT="3.5"
    )
    pooled = databases["default"]
    assert pooled["OPTIONS"]["pool"] == {"min_size": 2, "max_size": 6, "timeout": 3.5}
    assert pooled["CONN_MAX_AGE"] == 0  # Django's pool refuses persistent connections
    assert pooled["CONN_HEALTH_CHECKS"] is True
    # Whose pool checks what it lends without a round trip (core.database_pool).
    assert {database["ENGINE"] for database in databases.values()} == {"core.postgres_backend"}
    # The operator login has a small pool of its own, empty while idle.
    operator = databases["operator"]
    assert operator["USER"] == OPERATOR_ROLE and pooled["USER"] == APP_ROLE
    assert operator["OPTIONS"]["pool"] == {"min_size": 0, "max_size": 1, "timeout": 3.5}
    assert (operator["CONN_MAX_AGE"], operator["CONN_HEALTH_CHECKS"]) == (0, True)
    operators = real_database_settings(MEMORYHUB_OPERATOR_DB_POOL_MAX="3")["operator"]
    assert operators["OPTIONS"]["pool"]["max_size"] == 3

    # By default, one connection per web thread: no thread of a web process waits for one.
    threads = real_database_settings(MEMORYHUB_WEB_THREADS="3")
    assert threads["default"]["OPTIONS"]["pool"]["max_size"] == 3

    # The hot reads' statements are prepared (core.prepared_statements), unless turned off
    # for a pooler that cannot keep them.
    assert pooled["OPTIONS"]["prepare_threshold"] == 5
    unprepared = real_database_settings(MEMORYHUB_DB_PREPARE_THRESHOLD="0")["default"]
    assert unprepared["OPTIONS"]["prepare_threshold"] is None

    unpooled = real_database_settings(MEMORYHUB_DB_POOL_MAX="0", CONN_MAX_AGE="30")
    for alias in ("default", "operator"):
        assert "pool" not in unpooled[alias]["OPTIONS"]
        assert unpooled[alias]["CONN_MAX_AGE"] == 30


@pytest.mark.slow
def test_a_database_url_without_the_operators_login_is_refused_at_start() -> None:
    result = subprocess.run(
        [sys.executable, "-c", "from django.conf import settings; settings.DATABASES"],
        cwd=REPO,
        env={
            **{k: v for k, v in os.environ.items() if k != "OPERATOR_DATABASE_URL"},
            "DJANGO_SETTINGS_MODULE": "memoryhub.settings",
            "DATABASE_URL": "postgres://memoryhub_app@db.invalid:5432/memoryhub",
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "OPERATOR_DATABASE_URL is not" in result.stderr


def test_the_pools_gauges_are_written_when_its_numbers_change(
    pool_of_one: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memoryhub import metrics_endpoint

    monkeypatch.setattr(metrics_endpoint, "_written_pool_samples", {})
    writes: list[dict[str, str]] = []
    labels = metrics_endpoint.DB_POOL_CONNECTIONS.labels

    def counted(**names: str) -> Any:
        writes.append(names)
        return labels(**names)

    monkeypatch.setattr(metrics_endpoint.DB_POOL_CONNECTIONS, "labels", counted)
    connection.ensure_connection()  # lent: none idle
    metrics_endpoint.sample_pool_usage()
    lent = len(writes)
    metrics_endpoint.sample_pool_usage()
    unchanged = len(writes) - lent
    hand_back()  # one idle again
    metrics_endpoint.sample_pool_usage()

    assert lent == 3  # open, idle, max of the default alias
    assert unchanged == 0
    assert writes[-1] == {"alias": "default", "state": "max"} and len(writes) == 6
    idle = REGISTRY.get_sample_value("memoryhub_db_pool_connections", {"alias": "default", "state": "idle"})
    assert idle == 1
