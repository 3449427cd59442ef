"""Operator paths on the service's two logins (docs/tenancy.md, "The operator's login"), in
real processes with the real settings: the web server, workers and commands log in as the
application role for everything a team does and as the operator for what spans teams.
(The test process itself runs both on one connection: memoryhub/settings_test.py.)

- in this process, with a second alias logged in as the operator (the service's layout):
  the bypass runs its block on that connection, a team's scope inside it narrows there,
  and it refuses to start inside a transaction of the application's connection;
- the admin of a real web server shows several teams' rows, and its "Shut down selected
  teams" action (a team's scope inside the operator's transaction) deletes one team;
- a beat job across teams (the session sweep) runs on a real worker, whose logins are
  the application role and the operator, neither of which may change the audit trail;
- `manage.py shutdown_team` deletes a team and keeps its audit trail; `manage.py
  bootstrap` lists the teams left and their owners, read on the operator's login."""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.db import connection, connections, transaction
from django.utils import timezone

from agents.models import AgentSession
from agents.sessions import boot_session
from memories import writes
from memoryhub.celery import app as celery_app
from teams import memberships, services
from teams.models import AuditEvent, Membership, Team
from teams.roles import APP_ROLE, OPERATOR_ROLE
from teams.scope import dangerously_bypass_team_scope, team_scope
from tests.conftest import operator_view
from tests.db_roles import connect_as, service_login
from tests.web_server import WebServer, manage, server_env
from tests.worker import CeleryProcess, TaskRoute, database_url, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

REPO = Path(__file__).resolve().parents[2]
SWITCHED = "operator_in_this_process"
STAFF_PASSWORD = "a staff password for the test"
SWEEP_SECONDS = 60.0  # a hang detector


@pytest.fixture(scope="module")
def _operator_alias(django_db_setup: None, django_db_blocker: Any) -> Iterator[str]:
    """A second alias of the test database, logged in as the operator, as
    memoryhub.settings configures OPERATOR_DATABASE (defined before the test starts:
    Django checks a test's databases then)."""
    primary = connection.settings_dict
    user, password = service_login(OPERATOR_ROLE)
    alias_settings = {**primary, "USER": user, "PASSWORD": password, "TEST": {"MIRROR": "default"}}
    configured = connections.configure_settings({"default": dict(primary), SWITCHED: alias_settings})
    connections.settings[SWITCHED] = configured[SWITCHED]
    try:
        yield SWITCHED
    finally:
        with django_db_blocker.unblock(), contextlib.suppress(Exception):
            connections[SWITCHED].close()
        with contextlib.suppress(Exception):
            del connections[SWITCHED]
        connections.settings.pop(SWITCHED, None)


@pytest.fixture
def operator_connection(_operator_alias: str, settings: Any) -> str:
    """The service's layout in this process: `default` runs as the application role, and
    the bypass switches to the operator's own connection."""
    settings.OPERATOR_DATABASE = _operator_alias
    return _operator_alias


with_operator_connection = pytest.mark.django_db(transaction=True, databases=["default", SWITCHED])


def who() -> tuple[str, str, int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_user, session_user, pg_backend_pid()")
        user, session, pid = cursor.fetchone()
    return str(user), str(session), int(pid)


@with_operator_connection
def test_the_bypass_switches_to_the_operators_connection_for_its_block(
    operator_connection: str, teams: list[Team]
) -> None:
    outside = who()
    with dangerously_bypass_team_scope(reason="switch test", actor="test"):
        inside = who()
        assert connection.alias == operator_connection
        assert sorted(Team.objects.values_list("slug", flat=True)) == ["alpha", "bravo", "charlie"]
        with operator_view():  # nested: the same connection
            assert who() == inside
        assert AuditEvent.objects.filter(action="vault.set").count() == 3
        with team_scope(teams[0].id):
            # Narrowed on the operator's own connection, in its transaction.
            assert who() == (APP_ROLE, OPERATOR_ROLE, inside[2])
            assert list(AuditEvent.objects.values_list("team_id", flat=True)) == [teams[0].id]
        assert who() == inside
    assert inside[:2] == (OPERATOR_ROLE, OPERATOR_ROLE) and inside[2] != outside[2]
    assert who() == outside and connection.alias == "default"
    with team_scope(teams[0].id):
        assert AuditEvent.objects.count() == 1


@with_operator_connection
def test_the_bypass_refuses_to_start_inside_a_transaction_of_the_applications_login(
    operator_connection: str, teams: list[Team]
) -> None:
    with transaction.atomic():
        with pytest.raises(RuntimeError, match="inside a transaction of the application"):
            with dangerously_bypass_team_scope(reason="switch test", actor="test"):
                pass
        assert connection.alias == "default"


def make_team(slug: str) -> Team:
    team = services.create_team(slug=slug, name=slug.title())
    with team_scope(team.id):
        writes.save_memory(
            team=team, key=f"{slug}-note", content=f"The {slug} team's note.", updated_by="test"
        )
        services.set_vault_entry(
            team=team, key=f"{slug}-host", value="db.internal", is_secret=False, actor="t"
        )
    return team


@pytest.fixture
def teams() -> list[Team]:
    return [make_team(slug) for slug in ("alpha", "bravo", "charlie")]


@pytest.fixture
def web(tmp_path: Path) -> Iterator[WebServer]:
    server = WebServer(server_env(database_url()), tmp_path / "gunicorn.log", "--workers", "1").start()
    yield server
    server.stop()


def csrf_token(page: httpx.Response) -> str:
    match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert match, page.text[:2000]
    return match.group(1)


@contextmanager
def admin_session(web: WebServer) -> Iterator[httpx.Client]:
    staff = get_user_model().objects.create_superuser("ops", "ops@example.com", None)
    # Hashed as the server checks it (the test settings hash with MD5, for speed).
    hasher = PBKDF2PasswordHasher()
    staff.password = hasher.encode(STAFF_PASSWORD, hasher.salt())
    staff.save(update_fields=["password"])
    with httpx.Client(base_url=web.base, timeout=30) as client:
        login = client.get("/admin/login/")
        signed_in = client.post(
            "/admin/login/?next=/admin/",
            data={"username": "ops", "password": STAFF_PASSWORD, "csrfmiddlewaretoken": csrf_token(login)},
        )
        assert signed_in.status_code == 302 and signed_in.headers["location"] == "/admin/", signed_in.text[
            :2000
        ]
        yield client


@pytest.mark.slow
def test_the_admin_of_a_real_server_sees_every_team_and_shuts_one_down(
    web: WebServer, teams: list[Team]
) -> None:
    bravo, charlie = teams[1:]
    with admin_session(web) as admin:
        memories = admin.get("/admin/memories/memory/")
        assert memories.status_code == 200
        assert all(f"{team.slug}-note" in memories.text for team in teams)
        trail = admin.get("/admin/teams/auditevent/")
        assert trail.status_code == 200
        assert all(f"{team.slug}-host" in trail.text for team in teams)
        assert admin.get(f"/admin/teams/team/{bravo.id}/change/").status_code == 200

        listing = admin.get("/admin/teams/team/")
        done = admin.post(
            "/admin/teams/team/",
            data={
                "action": "shutdown_teams",
                "_selected_action": [str(charlie.id)],
                "post": "yes",
                "csrfmiddlewaretoken": csrf_token(listing),
            },
            follow_redirects=True,
        )
        assert done.status_code == 200
        assert "Team charlie shut down (1 memories deleted)." in done.text

        # The shut-down team's trail is still listed, without its team.
        trail = admin.get("/admin/teams/auditevent/")
        assert f"team #{charlie.id} (shut down)" in trail.text and "team.shutdown" in trail.text
    assert sorted(Team.objects.values_list("slug", flat=True)) == ["alpha", "bravo"]
    with operator_view():
        assert sorted(AuditEvent.objects.filter(team_id=charlie.id).values_list("action", flat=True)) == [
            "team.shutdown",
            "vault.set",
        ]
        assert AuditEvent.objects.get(team_id=charlie.id, action="team.shutdown").actor == "admin:ops"
    assert "Traceback" not in web.log_text()


def logins_of(env: dict[str, str]) -> set[str]:
    """The roles a process started with `env` logs in as: every alias of its settings."""
    script = "import json; from django.conf import settings; print(json.dumps([d['USER'] for d in settings.DATABASES.values()]))"
    result = subprocess.run(  # noqa: S603
        [sys.executable, "-c", f"import django; django.setup(); {script}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return set(json.loads(result.stdout.strip().splitlines()[-1]))


def test_a_beat_job_across_teams_runs_on_a_worker_whose_logins_cannot_change_the_audit_trail(
    start_worker: Callable[..., CeleryProcess], task_route: TaskRoute, teams: list[Team]
) -> None:
    sessions = []
    for team in teams:
        with team_scope(team.id):
            sessions.append(boot_session(team=team, token=None, agent=f"{team.slug}-agent").session.id)
    with operator_view():
        AgentSession.objects.filter(id__in=sessions).update(
            last_heartbeat_at=timezone.now() - timedelta(days=2)
        )

    worker = start_worker()
    celery_app.send_task("agents.expire_sessions")

    def all_expired() -> bool:
        with operator_view():
            return AgentSession.objects.filter(id__in=sessions, end_reason="expired").count() == len(sessions)

    wait_for(all_expired, SWEEP_SECONDS, "the worker's sweep to expire every team's stale session")
    # The worker read which teams have open sessions on the operator's login (the
    # application's sees none of another team's), and expired each team's in that team's
    # scope on the application's. Neither login may change the audit trail.
    logins = logins_of(worker.env)
    assert logins == {APP_ROLE, OPERATOR_ROLE}
    for role in sorted(logins):
        with connect_as(role) as conn:
            for statement in (
                "UPDATE teams_auditevent SET actor = 'x'",
                "DELETE FROM teams_auditevent",
                "TRUNCATE teams_auditevent",
            ):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute(statement)
                conn.rollback()


@pytest.mark.slow
def test_shutdown_team_and_bootstrap_commands_run_on_the_two_logins(
    teams: list[Team], tmp_path: Path
) -> None:
    alpha, bravo = teams[:2]
    for team in (alpha, bravo):
        with team_scope(team.id):
            memberships.add_new_member(
                team=team, username=f"{team.slug}-owner", email="", role=Membership.Role.OWNER, by=None
            )
    env: dict[str, Any] = server_env(database_url())

    output = manage(env, "shutdown_team", "bravo", "--yes")

    assert "team bravo shut down: deleted" in output and "its audit trail is kept" in output
    assert sorted(Team.objects.values_list("slug", flat=True)) == ["alpha", "charlie"]
    with operator_view():
        kept = list(AuditEvent.objects.filter(team_id=bravo.id).order_by("id").values_list("actor", "action"))
        assert kept[-1] == ("manage.py", "team.shutdown")
        assert ("t", "vault.set") in kept
        assert not Membership.objects.filter(team_id=bravo.id).exists()
        assert Membership.objects.filter(team=alpha).count() == 1

    listed = manage(env, "bootstrap")
    assert "set up already: alpha (owners: alpha-owner), charlie (owners: none)" in listed
