"""Connecting to the database of the settings, from Python and from PostgreSQL's programs.

pg_dump and pg_restore get the connection through libpq's environment (PGHOST, PGUSER...)
and the password through a passfile of their own (mode 0600, in a private temporary
folder), never on a command line, where any user of the machine could read it.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from django.conf import settings
from psycopg.conninfo import make_conninfo

from teams.backups import BackupError

# Connection options of Django's database settings that libpq's programs read from
# their environment. Django's own options (the pool, the isolation level...) are not
# connection parameters and stay out.
_LIBPQ_ENVIRONMENT = {
    "sslmode": "PGSSLMODE",
    "sslrootcert": "PGSSLROOTCERT",
    "sslcert": "PGSSLCERT",
    "sslkey": "PGSSLKEY",
    "sslcrl": "PGSSLCRL",
    "sslnegotiation": "PGSSLNEGOTIATION",
    "channel_binding": "PGCHANNELBINDING",
    "gssencmode": "PGGSSENCMODE",
    "connect_timeout": "PGCONNECT_TIMEOUT",
    "target_session_attrs": "PGTARGETSESSIONATTRS",
    "application_name": "PGAPPNAME",
    "options": "PGOPTIONS",
    "service": "PGSERVICE",
    "passfile": "PGPASSFILE",
}
CONNECT_TIMEOUT_SECONDS = "10"
# pg_dump and pg_restore print at most this much of what went wrong.
_ERROR_LINES = 5
_ERROR_LINE_CHARS = 300


@dataclass(frozen=True)
class Login:
    """Where and as whom to connect. The password never appears in a repr."""

    host: str
    port: str
    dbname: str
    user: str
    password: str = field(repr=False)
    options: dict[str, str]

    @classmethod
    def from_settings(cls, *, as_owner: bool = False, as_operator: bool = False) -> Login:
        """The service's login (the application role, or whatever DATABASE_URL names); with
        `as_operator` the operator's (OPERATOR_DATABASE_URL, or the embedded server's), which
        sees every team; with `as_owner` the owner's when the settings name one (the
        embedded server's do), as `manage.py migrate` logs in (teams.roles.as_owner)."""
        alias = settings.OPERATOR_DATABASE if as_operator else "default"
        database: dict[str, Any] = settings.DATABASES[alias]
        user, password = str(database.get("USER") or ""), str(database.get("PASSWORD") or "")
        if as_owner and database.get("OWNER_USER"):
            user, password = str(database["OWNER_USER"]), str(database.get("OWNER_PASSWORD") or "")
        options = {
            name: str(value)
            for name, value in (database.get("OPTIONS") or {}).items()
            if name in _LIBPQ_ENVIRONMENT
        }
        return cls(
            host=str(database.get("HOST") or ""),
            port=str(database.get("PORT") or ""),
            dbname=str(database["NAME"]),
            user=user,
            password=password,
            options=options,
        )

    def connect(self) -> psycopg.Connection[tuple[Any, ...]]:
        parameters = {
            "host": self.host,
            "port": self.port,
            "dbname": self.dbname,
            "user": self.user,
            "password": self.password,
            "connect_timeout": CONNECT_TIMEOUT_SECONDS,
            **self.options,
        }
        conninfo = make_conninfo(**{name: value for name, value in parameters.items() if value})
        try:
            return psycopg.connect(conninfo)
        except psycopg.OperationalError as exc:
            # libpq's message names the server and the failure, never the password.
            reason = str(exc).strip().rsplit("failed: ", 1)[-1]
            raise BackupError(f"cannot connect to the database as {self.user}: {reason}") from None

    @contextmanager
    def environment(self) -> Iterator[dict[str, str]]:
        """The environment a libpq program connects with: ours, without any PG* variable
        of the caller's shell that would point it elsewhere."""
        environment = {name: value for name, value in os.environ.items() if not name.startswith("PG")}
        parameters = {
            "PGHOST": self.host,
            "PGPORT": self.port,
            "PGDATABASE": self.dbname,
            "PGUSER": self.user,
        }
        parameters |= {_LIBPQ_ENVIRONMENT[name]: value for name, value in self.options.items()}
        parameters.setdefault("PGCONNECT_TIMEOUT", CONNECT_TIMEOUT_SECONDS)
        environment |= {name: value for name, value in parameters.items() if value}
        with tempfile.TemporaryDirectory(prefix="memoryhub-pg-") as folder:
            if self.password:
                passfile = Path(folder) / "passfile"
                descriptor = os.open(passfile, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(descriptor, "w") as handle:
                    handle.write(f"*:*:*:*:{_passfile_escape(self.password)}\n")
                environment["PGPASSFILE"] = str(passfile)
            yield environment


def _passfile_escape(password: str) -> str:
    return password.replace("\\", "\\\\").replace(":", "\\:")


def program(name: str) -> Path:
    path = Path(settings.POSTGRES_BIN_DIR) / name
    if not path.is_file():
        raise BackupError(
            f"{name} was not found in MEMORYHUB_POSTGRES_BIN_DIR (default: the embedded PostgreSQL's build)"
        )
    return path


def run(name: str, arguments: Sequence[str], *, login: Login | None = None) -> str:
    """Run one of PostgreSQL's programs; its standard output, or BackupError with the
    first lines of what it reported."""
    command = [str(program(name)), *arguments]
    if login is None:
        result = subprocess.run(command, capture_output=True, text=True, check=False)  # noqa: S603
    else:
        with login.environment() as environment:
            result = subprocess.run(  # noqa: S603
                command, capture_output=True, text=True, check=False, env=environment
            )
    if result.returncode != 0:
        raise BackupError(f"{name} failed:\n{_errors(name, result.stderr)}")
    return result.stdout


def _errors(name: str, stderr: str) -> str:
    """The program's own messages only: the lines PostgreSQL adds after an error (its
    CONTEXT) may quote the rows of a table."""
    lines = [line for line in stderr.splitlines() if line.startswith(f"{name}:")]
    return "\n".join(line[:_ERROR_LINE_CHARS] for line in lines[:_ERROR_LINES]) or "(no message)"
