"""The restore drill: `manage.py backup` → wipe → `manage.py restore`, as an
operator runs it, against PostgreSQL servers of the test's own (tests/memoryhub/
private_postgres.py: the embedded server, started by the project's own code).

Two teams are filled through the services (a supersede chain, vectors of the local model
written by the in-process indexing, vault secrets: tests/memoryhub/backup_drill.py) and
everything is read back after each restore: every memory and version, every vector (same
values), the BM25 statistics, the embedding cache, the vault's secrets (decrypted), and
the owners, grants, row-level security and policies of every object. A hybrid search
finds a memory by meaning alone with no document embedded again, and the application
role still sees nothing of the other team. The wipes: a new, empty data folder (the
embedded server), and the database dropped and re-created empty (a PostgreSQL of your
own, restored logged in as the owner role). Refused, with exit status 1 and nothing
written: a damaged dump, a database that is not empty, and keys that would leave the
vault unreadable. No key ever appears in the commands' output, nor in clear in the backup (its
keys are sealed with a passphrase; the wrong one is refused and changes nothing), and a
backup of the older format with plain key files still restores."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest
from cryptography.fernet import Fernet

from teams.roles import APP_ROLE, OWNER_ROLE
from tests.memoryhub.backup_drill import SEARCHED_KEY, SECRET_VALUES, TEAMS
from tests.memoryhub.private_postgres import PrivatePostgres

pytestmark = pytest.mark.slow  # PostgreSQL servers of its own, manage.py

REPO = Path(__file__).resolve().parents[2]
# Variables of the test's own environment that would point the commands elsewhere.
KEPT_OUT = {
    "MEMORYHUB_BACKUP_PASSPHRASE",
    "MEMORYHUB_BACKUP_PASSPHRASE_FILE",
    "REDIS_URL",
    "DATABASE_URL",
    "OPERATOR_DATABASE_URL",
    "MEMORYHUB_DATABASE_NAME",
    "MEMORYHUB_VAULT_KEY",
    "MEMORYHUB_VAULT_KEY_FILE",
    "SECRET_KEY",
    "SECRET_KEY_FILE",
    "MEMORYHUB_POSTGRES_BIN_DIR",
}
# Hang detector, not a speed target.
COMMAND_SECONDS = 300


def run(env: dict[str, str], *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603
        [sys.executable, *arguments],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,  # never a terminal: a passphrase comes from the environment
        capture_output=True,
        text=True,
        timeout=COMMAND_SECONDS,
    )


def manage(env: dict[str, str], *arguments: str) -> str:
    result = run(env, "manage.py", *arguments)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout + result.stderr


def refused(env: dict[str, str], *arguments: str) -> str:
    result = run(env, "manage.py", *arguments)
    assert result.returncode == 1, result.stdout + result.stderr
    return result.stderr


def drill(env: dict[str, str], action: str) -> dict[str, Any]:
    result = run(env, "-m", "tests.memoryhub.backup_drill", action)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1]) if action == "inspect" else {}


def embedded(data_dir: Path, **extra: str) -> dict[str, str]:
    """The environment of `manage.py` on the embedded server of `data_dir`."""
    env = {name: value for name, value in os.environ.items() if name not in KEPT_OUT}
    return {
        **env,
        "DJANGO_SETTINGS_MODULE": "memoryhub.settings",
        "MEMORYHUB_DATA_DIR": str(data_dir),
        "MEMORYHUB_EMBEDDING_PROFILE": "local",
        **extra,
    }


def assert_restored(before: dict[str, Any], after: dict[str, Any]) -> None:
    """Everything back as it was; the search and isolation hold on the restored data."""
    for part in (
        "teams",
        "memories",
        "chunks",
        "vectors",
        "embedding_cache",
        "keyword_stats",
        "vault",
        "catalog",
    ):
        assert after[part] == before[part], part
    assert after["search_mode"] == "hybrid"
    assert after["found"][0] == SEARCHED_KEY
    # Found by its vector alone (no word in common with the query), scored as before.
    assert after["explain"][0]["keyword"] == 0
    assert [e["vector"] for e in after["explain"]] == [e["vector"] for e in before["explain"]]
    # The search embedded its query only: no stored vector, chunk or index state moved.
    assert after["rows_after_search"] is True
    assert after["user"] == APP_ROLE
    assert set(after["bravo_rows_seen_by_alpha"].values()) == {0}


def assert_no_keys_in(output: str, *keys: str) -> None:
    for key in keys:
        assert key not in output


def assert_no_key_in_folder(folder: Path, vault_key: str, secret_key: str) -> None:
    """Not one file of the backup holds a key in clear: as text, or the vault key's 32
    bytes as such."""
    needles = [vault_key.encode(), secret_key.encode(), base64.urlsafe_b64decode(vault_key)]
    for path in folder.rglob("*"):
        if path.is_file():
            content = path.read_bytes()
            assert not [needle for needle in needles if needle in content], path


PASSPHRASE = "correct horse battery staple, for the drill"


def with_passphrase(env: dict[str, str], folder: Path, passphrase: str = PASSPHRASE) -> dict[str, str]:
    """`env` with the backup passphrase in a file (MEMORYHUB_BACKUP_PASSPHRASE_FILE)."""
    path = folder / f"passphrase-{hashlib.sha256(passphrase.encode()).hexdigest()[:8]}"
    path.write_text(passphrase + "\n")
    path.chmod(0o600)
    return {**env, "MEMORYHUB_BACKUP_PASSPHRASE_FILE": str(path)}


def recreate(postgres: PrivatePostgres) -> None:
    """Drop the database and create it empty, as deploy/postgres-roles.sql creates it."""
    with psycopg.connect(
        host=postgres.settings["HOST"], user="postgres", dbname="postgres", autocommit=True
    ) as conn:
        conn.execute("DROP DATABASE memoryhub WITH (FORCE)")
        conn.execute(f"CREATE DATABASE memoryhub OWNER {OWNER_ROLE}")


def test_backup_and_restore_bring_back_every_memory_version_vector_and_secret(tmp_path: Path) -> None:
    source = PrivatePostgres(tmp_path / "source")
    target = PrivatePostgres(tmp_path / "target")
    backup, keyless_backup = tmp_path / "backup", tmp_path / "keyless-backup"
    try:
        source.start()
        env = embedded(source.data_dir)
        manage(env, "migrate", "--noinput")
        drill(env, "populate")
        before = drill(env, "inspect")
        # What the drill must bring back is really there: two teams, a chain of three
        # versions per team, every version's vectors, both teams' secrets.
        assert before["teams"] == list(TEAMS)
        chains = [m for m in before["memories"] if m[1] == TEAMS[0] and m[2] == "database"]
        assert [m[4] for m in chains] == [False, False, True]
        assert [m[5] for m in chains] == ["None", chains[0][0], chains[1][0]]
        assert {m[6] for m in before["memories"]} == {"indexed"}
        assert len(before["vectors"]) == len(before["chunks"]) == len(before["memories"]) == 8
        assert all([team, "deploy-token", SECRET_VALUES[team]] in before["vault"] for team in TEAMS)
        assert_restored(before, before)
        vault_key = (source.data_dir / "vault.key").read_text().strip()
        secret_key = (source.data_dir / "secret_key").read_text().strip()

        # No passphrase, no terminal to ask for one: refused before anything is written.
        assert "sealed with a passphrase" in refused(env, "backup", str(backup))
        assert not backup.exists()
        output = manage(with_passphrase(env, tmp_path), "backup", str(backup))
        assert_no_keys_in(output, vault_key, secret_key)
        assert "sealed in keys.sealed with your passphrase" in output
        manifest = json.loads((backup / "manifest.json").read_text())
        dump = backup / "database.dump"
        assert manifest["dump_sha256"] == hashlib.sha256(dump.read_bytes()).hexdigest()
        assert manifest["tables"]["memories_memory"] == 8
        assert manifest["tables"]["search_chunkembedding"] == len(before["vectors"])
        assert manifest["tables"]["search_keywordstat"] == len(before["keyword_stats"])
        assert manifest["extensions"]["vector"]
        assert manifest["postgresql_version"].startswith("18")
        assert manifest["migrations"]["teams"].startswith("00")
        assert manifest["keys_included"] is True and manifest["keys_sealed"] is True
        assert sorted(path.name for path in backup.iterdir()) == [
            "database.dump",
            "keys.sealed",
            "manifest.json",
        ]
        assert (backup / "keys.sealed").stat().st_mode & 0o777 == 0o600
        assert_no_key_in_folder(backup, vault_key, secret_key)

        output = manage(env, "backup", "--without-keys", str(keyless_backup))
        assert not (keyless_backup / "keys").exists()
        assert "WARNING: this backup holds no keys" in output
        assert_no_keys_in(output, vault_key, secret_key)

        # Wipe 1: a new, empty data folder, on the embedded server (no key there yet).
        target.start()
        target_env = embedded(target.data_dir)
        tampered = tmp_path / "tampered"
        tampered.mkdir()
        for name in ("manifest.json", "database.dump"):
            (tampered / name).write_bytes((backup / name).read_bytes())
        with (tampered / "database.dump").open("r+b") as handle:
            handle.seek(4096)
            byte = handle.read(1)
            handle.seek(4096)
            handle.write(bytes([byte[0] ^ 1]))
        assert "its SHA-256 differs" in refused(target_env, "restore", str(tampered))
        # The keys that failed attempt's start-up generated are gone with it.
        assert not (target.data_dir / "vault.key").exists()
        # The wrong passphrase: refused clearly, and nothing changed (no key installed,
        # the database still empty: the restore below goes through).
        wrong = refused(
            with_passphrase(target_env, tmp_path, "not the passphrase at all"), "restore", str(backup)
        )
        assert "the passphrase does not open" in wrong and "nothing was restored" in wrong
        assert not (target.data_dir / "vault.key").exists()
        assert not (target.data_dir / "secret_key").exists()
        target_env = with_passphrase(target_env, tmp_path)

        output = manage(target_env, "restore", str(backup))
        assert_no_keys_in(output, vault_key, secret_key)
        assert "every count as in the manifest" in output
        assert "vault: 2 secrets, all readable" in output
        assert (target.data_dir / "vault.key").read_text().strip() == vault_key
        assert (target.data_dir / "secret_key").read_text().strip() == secret_key
        assert (target.data_dir / "vault.key").stat().st_mode & 0o777 == 0o600
        assert_restored(before, drill(target_env, "inspect"))

        # Never into a database that has data: the restored one is not empty any more.
        assert "the database is not empty" in refused(target_env, "restore", str(backup))

        # Wipe 2: a PostgreSQL of your own, its database dropped and re-created empty as
        # deploy/postgres-roles.sql creates it; restored logged in as the owner role.
        recreate(source)
        other_data = tmp_path / "other-data"
        other_data.mkdir()
        other_key = Fernet.generate_key().decode()
        external = embedded(other_data, **source.urls(OWNER_ROLE))
        assert "restore logs in as the owner role" in refused(
            {**external, "DATABASE_URL": source.url(APP_ROLE)}, "restore", str(backup)
        )
        # A key file of its own is never overwritten (what it encrypted would be lost).
        (other_data / "vault.key").write_text(other_key)
        assert "holds another vault key" in refused(
            with_passphrase(external, tmp_path), "restore", str(backup)
        )
        # A keyless backup needs the vault key it was made with.
        assert "is not the vault key" in refused(
            {**external, "MEMORYHUB_VAULT_KEY": other_key}, "restore", str(keyless_backup)
        )
        output = manage({**external, "MEMORYHUB_VAULT_KEY": vault_key}, "restore", str(keyless_backup))
        assert_no_keys_in(output, vault_key, secret_key)
        assert (other_data / "vault.key").read_text() == other_key
        service = {**external, "DATABASE_URL": source.url(APP_ROLE), "MEMORYHUB_VAULT_KEY": vault_key}
        assert_restored(before, drill(service, "inspect"))

        # A backup made before the keys were sealed (format 1: a folder of plain key
        # files) still restores, with no passphrase.
        legacy = tmp_path / "legacy-backup"
        (legacy / "keys").mkdir(parents=True)
        (legacy / "database.dump").write_bytes((backup / "database.dump").read_bytes())
        old_manifest = {k: v for k, v in manifest.items() if k != "keys_sealed"}
        (legacy / "manifest.json").write_text(json.dumps({**old_manifest, "format": 1}))
        (legacy / "keys" / "vault.key").write_text(vault_key + "\n")
        (legacy / "keys" / "secret_key").write_text(secret_key + "\n")
        recreate(source)
        legacy_data = tmp_path / "legacy-data"
        legacy_data.mkdir()
        output = manage(embedded(legacy_data, **source.urls(OWNER_ROLE)), "restore", str(legacy))
        assert "vault: 2 secrets, all readable" in output
        assert (legacy_data / "vault.key").read_text().strip() == vault_key
    finally:
        source.stop()
        target.stop()
    assert not source.processes()
    assert not target.processes()
