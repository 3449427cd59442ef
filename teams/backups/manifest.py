"""What a backup says about itself (`manifest.json`), and the reads of the database it
is made of: versions, migrations and the rows of every table."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from teams.backups import BackupError
from teams.roles import OPERATOR_ROLE

# 2: the keys sealed with a passphrase (keys.sealed). 1: a folder of plain key files,
# still restored.
FORMAT = 2
READABLE_FORMATS = (1, 2)
DUMP_FILE = "database.dump"
MANIFEST_FILE = "manifest.json"
PLAIN_KEYS_FOLDER = "keys"

# MemoryHub's tables: the base tables of `public`, without any an extension owns.
TABLES = """
SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')
  AND NOT EXISTS (
      SELECT 1 FROM pg_depend d
      WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e'
  )
ORDER BY c.relname
"""


@dataclass(frozen=True)
class Manifest:
    format: int
    created_at: str
    memoryhub_version: str
    # The last migration applied per app: the schema the dump holds.
    migrations: dict[str, str]
    postgresql_version: str
    postgresql_version_num: int
    pg_dump_version: str
    # Extensions the database needs (name: version), pgvector ("vector") among them.
    extensions: dict[str, str]
    dump_file: str
    dump_sha256: str
    dump_bytes: int
    # Rows per table, counted in the snapshot pg_dump dumped: a restore must find them.
    tables: dict[str, int]
    vault_secrets: int
    # SHA-256 (first 16 hex digits) of each vault key the data was made under, the first
    # one encrypting: tells whether a restore's key is the right one without holding it.
    vault_key_fingerprints: list[str]
    keys_included: bool
    # The keys are in keys.sealed (teams.backups.sealing); a format 1 backup's are not.
    keys_sealed: bool = False

    @property
    def postgresql_major(self) -> int:
        return self.postgresql_version_num // 10000

    def write(self, folder: Path) -> None:
        """Written last, through a rename: a folder with a manifest is a finished backup."""
        partial = folder / f".{MANIFEST_FILE}.partial"
        partial.write_text(json.dumps(asdict(self), indent=2, sort_keys=True) + "\n")
        os.replace(partial, folder / MANIFEST_FILE)

    @classmethod
    def read(cls, folder: Path) -> Manifest:
        path = folder / MANIFEST_FILE
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise BackupError(f"{path} is missing: this folder is not a finished MemoryHub backup") from None
        except (OSError, ValueError) as exc:
            raise BackupError(f"{path} cannot be read: {exc}") from None
        if not isinstance(data, dict) or data.get("format") not in READABLE_FORMATS:
            readable = " or ".join(str(number) for number in READABLE_FORMATS)
            raise BackupError(f"{path} is not a manifest of format {readable}, which this MemoryHub reads")
        try:
            return cls(**data)
        except TypeError:
            raise BackupError(f"{path} lacks fields of a format {data['format']} manifest") from None


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1024 * 1024), b""):
            digest.update(block)
    return digest.hexdigest()


def see_every_team(conn: psycopg.Connection[tuple[Any, ...]]) -> None:
    """For the open transaction: the operator role, which row-level security lets see
    every team. The backup logs in as it; the restore logs in as the owner, which may SET
    ROLE to it (docs/tenancy.md, "Database roles")."""
    try:
        conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(OPERATOR_ROLE)))
    except psycopg.errors.InsufficientPrivilege:
        raise BackupError(
            f"this login may not SET ROLE {OPERATOR_ROLE}: the backup logs in as {OPERATOR_ROLE} "
            "(OPERATOR_DATABASE_URL), the restore as the owner, granted it as deploy/postgres-roles.sql does"
        ) from None


def count_rows(conn: psycopg.Connection[tuple[Any, ...]]) -> dict[str, int]:
    """Rows of every table, in the caller's transaction (see `see_every_team`)."""
    counts = {}
    for (table,) in conn.execute(TABLES).fetchall():
        row = conn.execute(sql.SQL("SELECT count(*) FROM public.{}").format(sql.Identifier(table))).fetchone()
        counts[str(table)] = int(row[0]) if row else 0
    return counts


def migration_heads(conn: psycopg.Connection[tuple[Any, ...]]) -> dict[str, str]:
    if conn.execute("SELECT to_regclass('public.django_migrations')").fetchone() == (None,):
        raise BackupError("the database has no migrations applied: there is nothing to back up")
    # Migration names start with their number, so the greatest is the last one applied.
    rows = conn.execute("SELECT app, max(name) FROM django_migrations GROUP BY app ORDER BY app").fetchall()
    return {str(app): str(name) for app, name in rows}


def extensions(conn: psycopg.Connection[tuple[Any, ...]]) -> dict[str, str]:
    rows = conn.execute("SELECT extname, extversion FROM pg_extension WHERE extname <> 'plpgsql' ORDER BY 1")
    return {str(name): str(version) for name, version in rows.fetchall()}


def server_version(conn: psycopg.Connection[tuple[Any, ...]]) -> tuple[str, int]:
    row = conn.execute("SELECT current_setting('server_version'), current_setting('server_version_num')::int")
    version, number = row.fetchone() or ("", 0)
    return str(version), int(number)


def vault_secrets(conn: psycopg.Connection[tuple[Any, ...]]) -> int:
    row = conn.execute("SELECT count(*) FROM teams_vaultentry WHERE is_secret").fetchone()
    return int(row[0]) if row else 0
