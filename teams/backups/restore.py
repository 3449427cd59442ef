"""`manage.py restore PATH`: a backup into an empty database, checked before and after.

Before anything is written: the dump's SHA-256 against the manifest, a schema this code
knows, a server at least as new as the one dumped, the three roles and the extensions in
place, an empty database, and keys that will read the vault. Then pg_restore, logged in
as the owner role, in one transaction: every object ends owned by the role that owned it
(the tables by `memoryhub_owner`, the keyword search function by `memoryhub_operator`),
with the grants and the row-level security of the dump. Afterwards every table's rows are
counted against the manifest and the vault's secrets are decrypted with the restored key.
"""

from __future__ import annotations

import re
import tempfile
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from django.db.migrations.loader import MigrationLoader
from psycopg import sql

from teams.backups import BackupError, database, keys, sealing
from teams.backups.manifest import PLAIN_KEYS_FOLDER, Manifest, count_rows, file_sha256, see_every_team
from teams.roles import APP_ROLE, OPERATOR_ROLE, OWNER_ROLE

# Extensions are the superuser's to install (pgvector is not trusted): the target has them
# already, and the dump's own CREATE EXTENSION and COMMENT ON EXTENSION are left out.
_EXTENSION_ENTRY = re.compile(r"^\d+; \d+ \d+ (EXTENSION|COMMENT - EXTENSION) ")
# A grant (ACL entry) of the listing, its object's owner last.
_ACL_ENTRY = re.compile(r"^\d+; \d+ \d+ ACL .* (?P<owner>\S+)$")

# Anything of MemoryHub's in `public` that an extension does not own.
_OBJECTS_IN_PUBLIC = """
SELECT
  (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
   WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')
     AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass
                     AND d.objid = c.oid AND d.deptype = 'e'))
  +
  (SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
   WHERE n.nspname = 'public'
     AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass
                     AND d.objid = p.oid AND d.deptype = 'e'))
"""


@dataclass(frozen=True)
class _Target:
    user: str
    superuser: bool
    operator_could_create: bool


@dataclass
class RestoreResult:
    manifest: Manifest
    installed_keys: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    vault_readable: int = 0
    # Migrations of this code newer than the backup's schema: `migrate` applies them.
    pending_migrations: list[str] = field(default_factory=list)


def restore_backup(*, folder: Path, passphrase: Callable[[], str]) -> RestoreResult:
    """`passphrase` is asked only for a backup whose keys are sealed."""
    try:
        return _restore(folder.resolve(), passphrase)
    except BackupError:
        keys.forget_generated()
        raise
    except psycopg.Error as exc:
        keys.forget_generated()
        raise BackupError(f"the database refused the restore: {exc.diag.message_primary or exc}") from None


def _restore(folder: Path, passphrase: Callable[[], str]) -> RestoreResult:
    manifest = Manifest.read(folder)
    dump = folder / manifest.dump_file
    if not dump.is_file():
        raise BackupError(f"{dump} is missing")
    if file_sha256(dump) != manifest.dump_sha256:
        raise BackupError(
            f"{dump} does not match its manifest (its SHA-256 differs): it was changed or damaged. "
            "Nothing was restored."
        )
    pending = _check_migrations(manifest)

    login = database.Login.from_settings(as_owner=True)
    with login.connect() as conn:
        conn.autocommit = True
        target = _check_target(conn, manifest)
        plan = keys.plan_keys(
            backup_keys=_backup_keys(folder, manifest, passphrase),
            fingerprints_of_backup=manifest.vault_key_fingerprints,
            vault_secrets=manifest.vault_secrets,
        )
        # Only for the change of owner of the operator's function, as its migration
        # (search.0005) does; taken back whatever happens.
        grant = sql.SQL("{} CREATE ON SCHEMA public {} {}")
        operator = sql.Identifier(OPERATOR_ROLE)
        if not target.operator_could_create:
            conn.execute(grant.format(sql.SQL("GRANT"), sql.SQL("TO"), operator))
        try:
            _pg_restore(dump, login, target)
        finally:
            if not target.operator_could_create:
                conn.execute(grant.format(sql.SQL("REVOKE"), sql.SQL("FROM"), operator))
        # pg_restore leaves the planner without statistics.
        conn.execute("ANALYZE")

        result = RestoreResult(manifest=manifest, pending_migrations=pending, notes=plan.notes)
        result.installed_keys = keys.install(plan)
        with conn.transaction():
            see_every_team(conn)
            counts = count_rows(conn)
            ciphertexts = [
                str(row[0])
                for row in conn.execute("SELECT ciphertext FROM teams_vaultentry WHERE is_secret").fetchall()
            ]
    differences = [
        f"{table}: {counts.get(table)} rows, the backup had {rows}"
        for table, rows in sorted(manifest.tables.items())
        if counts.get(table) != rows
    ]
    if differences:
        raise BackupError("restored, but the rows differ from the manifest:\n" + "\n".join(differences))
    result.vault_readable = keys.readable(ciphertexts, plan.vault_key)
    if result.vault_readable != len(ciphertexts):
        raise BackupError(
            f"restored, but {len(ciphertexts) - result.vault_readable} of {len(ciphertexts)} vault secrets "
            "do not decrypt with the vault key: configure the backup's vault key"
        )
    return result


def _backup_keys(
    folder: Path, manifest: Manifest, passphrase: Callable[[], str]
) -> sealing.BackupKeys | None:
    """The backup's keys, opened before anything is written (None: it holds none)."""
    if not manifest.keys_included:
        return None
    if manifest.keys_sealed:
        return sealing.open_sealed(folder / sealing.SEALED_KEYS_FILE, passphrase())
    plain = folder / PLAIN_KEYS_FOLDER
    if not plain.is_dir():
        raise BackupError(f"the manifest lists keys, but {plain} is missing")
    return keys.read_plain_key_files(plain)


def _check_migrations(manifest: Manifest) -> list[str]:
    """Refuses a backup made by a newer MemoryHub; returns this code's newer migrations."""
    loader = MigrationLoader(None, ignore_no_migrations=True)
    unknown = [
        f"{app}.{name}"
        for app, name in manifest.migrations.items()
        if (app, name) not in loader.disk_migrations
    ]
    if unknown:
        raise BackupError(
            f"the backup's schema has migrations this MemoryHub does not know ({', '.join(unknown)}): "
            f"restore it with the version that made it ({manifest.memoryhub_version}) or a newer one"
        )
    return sorted(
        f"{app}.{name}" for app, name in loader.graph.leaf_nodes() if manifest.migrations.get(app) != name
    )


def _check_target(conn: psycopg.Connection[tuple[Any, ...]], manifest: Manifest) -> _Target:
    """Refuses a target the backup cannot be restored into."""
    missing = [role for role in (OWNER_ROLE, APP_ROLE, OPERATOR_ROLE) if not _role_exists(conn, role)]
    if missing:
        raise BackupError(
            f"the roles {', '.join(missing)} are missing on this server: create them first "
            '(docs/operations.md, "Your own PostgreSQL": deploy/postgres-roles.sql)'
        )
    row = conn.execute(
        """
        SELECT current_user, r.rolsuper, pg_get_userbyid(d.datdba),
               current_setting('server_version_num')::int / 10000,
               has_schema_privilege(%s, 'public', 'CREATE')
        FROM pg_roles r, pg_database d
        WHERE r.rolname = current_user AND d.datname = current_database()
        """,
        [OPERATOR_ROLE],
    ).fetchone()
    if row is None:
        raise BackupError("cannot read this login's role and database")
    user, superuser, database_owner, major, operator_could_create = row
    if user != OWNER_ROLE and not superuser:
        raise BackupError(
            f"restore logs in as the owner role {OWNER_ROLE}, as migrate does: "
            f"set DATABASE_URL to its login (this one is {user})"
        )
    if database_owner != OWNER_ROLE:
        raise BackupError(
            f"the database must be owned by {OWNER_ROLE} (CREATE DATABASE ... OWNER {OWNER_ROLE})"
        )
    if major < manifest.postgresql_major:
        raise BackupError(
            f"the backup comes from PostgreSQL {manifest.postgresql_major}, this server is {major}: "
            f"restore into PostgreSQL {manifest.postgresql_major} or newer"
        )
    installed = {str(name) for (name,) in conn.execute("SELECT extname FROM pg_extension").fetchall()}
    absent = sorted(set(manifest.extensions) - installed)
    if absent:
        raise BackupError(
            f"the database lacks the extensions {', '.join(absent)}: a superuser installs them first "
            f"(CREATE EXTENSION {absent[0]}; deploy/postgres-roles.sql does it for vector)"
        )
    objects = conn.execute(_OBJECTS_IN_PUBLIC).fetchone()
    if objects and objects[0]:
        raise BackupError(
            "the database is not empty (it has tables or functions of its own): a restore goes into an "
            "empty database only, and never merges into or replaces existing data. Restore into a new "
            "database or data folder, or drop and re-create this one (docs/operations.md, "
            '"Backups and restore")'
        )
    return _Target(
        user=str(user), superuser=bool(superuser), operator_could_create=bool(operator_could_create)
    )


def _role_exists(conn: psycopg.Connection[tuple[Any, ...]], role: str) -> bool:
    return conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role]).fetchone() is not None


def _pg_restore(dump: Path, login: database.Login, target: _Target) -> None:
    """All or nothing: one transaction, stopping at the first error. Then the grants on
    objects another role owns (the operator's function), which only their owner may
    give: set as that role (the login may SET ROLE to it), in a transaction of their own."""
    listing = database.run("pg_restore", ["--list", str(dump)])
    entries: list[str] = []
    grants_by_owner: dict[str, list[str]] = defaultdict(list)
    for line in listing.splitlines():
        if _EXTENSION_ENTRY.match(line):
            continue
        acl = _ACL_ENTRY.match(line.rstrip())
        if acl and not target.superuser and acl.group("owner") != target.user:
            grants_by_owner[acl.group("owner")].append(line)
        else:
            entries.append(line)
    with tempfile.TemporaryDirectory(prefix="memoryhub-restore-") as folder:
        selected = Path(folder) / "entries"
        selected.write_text("\n".join(entries) + "\n")
        database.run(
            "pg_restore",
            [
                "--no-password",
                "--single-transaction",
                "--exit-on-error",
                f"--use-list={selected}",
                f"--dbname={login.dbname}",
                str(dump),
            ],
            login=login,
        )
        for owner, grants in grants_by_owner.items():
            selected.write_text("\n".join(grants) + "\n")
            script = Path(folder) / "grants.sql"
            database.run("pg_restore", [f"--use-list={selected}", f"--file={script}", str(dump)])
            database.run(
                "psql",
                [
                    "--no-psqlrc",
                    "--no-password",
                    "--quiet",
                    "--set=ON_ERROR_STOP=1",
                    "--single-transaction",
                    f"--command=SET ROLE {sql.Identifier(owner).as_string()}",
                    f"--file={script}",
                ],
                login=login,
            )
