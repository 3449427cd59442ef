"""`manage.py backup PATH`: the database in pg_dump's custom format, its manifest and,
unless left out, the keys."""

from __future__ import annotations

import importlib.metadata
import os
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import psycopg
from django.conf import settings
from psycopg import IsolationLevel

from teams.backups import BackupError, database, keys, sealing
from teams.backups.manifest import (
    DUMP_FILE,
    FORMAT,
    Manifest,
    count_rows,
    extensions,
    file_sha256,
    migration_heads,
    see_every_team,
    server_version,
    vault_secrets,
)
from teams.roles import OPERATOR_ROLE


@dataclass(frozen=True)
class BackupResult:
    folder: Path
    manifest: Manifest
    # keys.sealed, or nothing for a backup without the keys.
    key_files: list[Path]


def make_backup(*, folder: Path, passphrase: str | None) -> BackupResult:
    """Dump the database into `folder` (created; an existing one must be empty), with the
    keys sealed with `passphrase` (None: without the keys). The row counts are taken in
    the very snapshot pg_dump dumps (an exported snapshot held open meanwhile), so they
    match the dump exactly while the service keeps writing."""
    folder = folder.resolve()
    _create_folder(folder)
    try:
        return _backup_into(folder, passphrase=passphrase)
    except BaseException:
        # A backup that failed leaves an empty folder, never one that looks finished.
        for leftover in folder.iterdir():
            if leftover.is_dir():
                shutil.rmtree(leftover)
            else:
                leftover.unlink()
        raise


def _backup_into(folder: Path, *, passphrase: str | None) -> BackupResult:
    login = database.Login.from_settings(as_operator=True)
    dump = folder / DUMP_FILE
    with login.connect() as conn:
        conn.isolation_level = IsolationLevel.REPEATABLE_READ
        conn.read_only = True
        try:
            see_every_team(conn)
            row = conn.execute("SELECT pg_export_snapshot()").fetchone()
            snapshot = str(row[0]) if row else ""
            heads = migration_heads(conn)
            version, version_num = server_version(conn)
            needed_extensions = extensions(conn)
            tables = count_rows(conn)
            secrets = vault_secrets(conn)
            # pg_dump reads as the operator role too: with FORCE ROW LEVEL SECURITY even the
            # tables' owner would dump only the rows its scope lets through.
            database.run(
                "pg_dump",
                [
                    "--format=custom",
                    "--no-password",
                    f"--role={OPERATOR_ROLE}",
                    f"--snapshot={snapshot}",
                    f"--file={dump}",
                ],
                login=login,
            )
        except psycopg.Error as exc:
            raise BackupError(f"reading the database failed: {exc.diag.message_primary or exc}") from None
    dump.chmod(0o600)
    key_files = []
    if passphrase is not None:
        sealing.seal(keys.current_keys(), passphrase, folder / sealing.SEALED_KEYS_FILE)
        key_files.append(folder / sealing.SEALED_KEYS_FILE)
    manifest = Manifest(
        format=FORMAT,
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        memoryhub_version=importlib.metadata.version("memoryhub"),
        migrations=heads,
        postgresql_version=version,
        postgresql_version_num=version_num,
        pg_dump_version=database.run("pg_dump", ["--version"]).strip(),
        extensions=needed_extensions,
        dump_file=DUMP_FILE,
        dump_sha256=file_sha256(dump),
        dump_bytes=dump.stat().st_size,
        tables=tables,
        vault_secrets=secrets,
        vault_key_fingerprints=keys.fingerprints(settings.VAULT_KEY),
        keys_included=passphrase is not None,
        keys_sealed=passphrase is not None,
    )
    manifest.write(folder)
    return BackupResult(folder=folder, manifest=manifest, key_files=key_files)


def _create_folder(folder: Path) -> None:
    """Never writes over anything: a backup goes into a new (or empty) folder."""
    if folder.exists():
        if not folder.is_dir() or any(folder.iterdir()):
            raise BackupError(f"{folder} exists and is not an empty folder: give a new one")
        os.chmod(folder, 0o700)
        return
    try:
        folder.mkdir(mode=0o700, parents=True)
    except OSError as exc:
        raise BackupError(f"cannot create {folder}: {exc.strerror}") from None
