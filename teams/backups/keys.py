"""The keys a restored MemoryHub needs, kept apart from the dump.

`vault.key` (MEMORYHUB_VAULT_KEY: every vault secret is encrypted under it; without it
they cannot be read) and `secret_key` (SECRET_KEY: signs sign-in sessions). A backup
carries them sealed with a passphrase (teams.backups.sealing), never in clear; a restore
installs them under the names the data folder gives them (core.settings_env.read_secret),
each mode 0600. Their values are never printed; a manifest carries only the vault keys'
fingerprints.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings

from core.settings_env import generated_secret_files
from teams.backups import BackupError
from teams.backups.sealing import BackupKeys

VAULT_KEY_FILE = "vault.key"
SECRET_KEY_FILE = "secret_key"  # noqa: S105 (a file name)
VAULT_KEY_VARIABLES = ("MEMORYHUB_VAULT_KEY", "MEMORYHUB_VAULT_KEY_FILE")
SECRET_KEY_VARIABLES = ("SECRET_KEY", "SECRET_KEY_FILE")


def split_keys(key_setting: str) -> list[str]:
    return [key.strip() for key in key_setting.split(",") if key.strip()]


def fingerprints(key_setting: str) -> list[str]:
    return [hashlib.sha256(key.encode()).hexdigest()[:16] for key in split_keys(key_setting)]


def write_private(path: Path, text: str) -> None:
    """Create `path` readable by its owner only (never a moment with wider rights)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(text)


def current_keys() -> BackupKeys:
    return BackupKeys(vault_key=settings.VAULT_KEY, secret_key=settings.SECRET_KEY)


def read_plain_key_files(folder: Path) -> BackupKeys:
    """The keys of a backup made before they were sealed: a folder of two files."""
    return BackupKeys(
        vault_key=_read_key(folder / VAULT_KEY_FILE), secret_key=_read_key(folder / SECRET_KEY_FILE)
    )


def _configured_outside_data_dir(variables: tuple[str, ...]) -> bool:
    return any(os.environ.get(name) for name in variables)


def _installable(path: Path) -> bool:
    """No key there, or one this very process generated at start-up, which nothing used."""
    return not path.exists() or path in generated_secret_files


@dataclass
class KeyPlan:
    """What a restore does with the keys; decided before anything is restored."""

    # (data folder file, the backup's key) to put in place.
    installs: list[tuple[Path, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # The vault key(s) the restored vault will be read with.
    vault_key: str = ""


def plan_keys(
    *, backup_keys: BackupKeys | None, fingerprints_of_backup: list[str], vault_secrets: int
) -> KeyPlan:
    """Refuses (BackupError) a restore whose vault could not be read afterwards: a
    configured vault key other than the backup's, or a different existing key file, which
    a restore never overwrites (whatever it encrypted would become unreadable)."""
    plan = KeyPlan(vault_key=settings.VAULT_KEY)
    data_dir = Path(settings.DATA_DIR)
    if backup_keys is not None and fingerprints(backup_keys.vault_key) != fingerprints_of_backup:
        raise BackupError("the backup's vault key is not the one its manifest names")

    needed = fingerprints_of_backup[:1] if vault_secrets else []
    if _configured_outside_data_dir(VAULT_KEY_VARIABLES):
        if needed and needed[0] not in fingerprints(settings.VAULT_KEY):
            raise BackupError(
                "MEMORYHUB_VAULT_KEY (or its _FILE) is not the vault key this backup's secrets were "
                "encrypted with: set it to the backup's vault key"
                + (" (sealed in the backup)" if backup_keys else ", which you kept apart")
            )
    elif backup_keys is not None:
        target = data_dir / VAULT_KEY_FILE
        if _installable(target):
            plan.installs.append((target, backup_keys.vault_key))
            plan.vault_key = backup_keys.vault_key
        elif split_keys(target.read_text()) == split_keys(backup_keys.vault_key):
            pass
        elif needed:
            raise BackupError(
                f"{target} holds another vault key, and a restore never overwrites one (whatever it "
                "encrypted would become unreadable): move it away if nothing needs it, then restore again"
            )
        else:
            plan.notes.append(f"kept the other vault key in {target}: the backup has no vault secrets")
    elif needed and needed[0] not in fingerprints(settings.VAULT_KEY):
        raise BackupError(
            "this backup holds no keys, and the configured vault key is not the one its secrets were "
            "encrypted with: put the vault key you kept in MEMORYHUB_VAULT_KEY "
            f"(or in {data_dir / VAULT_KEY_FILE}), then restore again"
        )

    if backup_keys is None:
        plan.notes.append("the backup holds no secret key: sign-in sessions of the old server end")
    elif not _configured_outside_data_dir(SECRET_KEY_VARIABLES):
        target = data_dir / SECRET_KEY_FILE
        if _installable(target):
            plan.installs.append((target, backup_keys.secret_key))
        elif target.read_text().strip() != backup_keys.secret_key:
            plan.notes.append(f"kept the other secret key in {target}: old sign-in sessions end")
    return plan


def _read_key(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError as exc:
        raise BackupError(f"the backup's key file {path} cannot be read: {exc.strerror}") from None


def install(plan: KeyPlan) -> list[Path]:
    installed = []
    for target, key in plan.installs:
        partial = target.with_name(f".{target.name}.restoring")
        partial.unlink(missing_ok=True)
        write_private(partial, key + "\n")
        os.replace(partial, target)
        generated_secret_files.discard(target)
        installed.append(target)
    return installed


def forget_generated() -> None:
    """Delete the key files this process generated at start-up, after a restore that
    failed before installing the backup's: nothing used them, and left behind they would
    look like keys in use to the next attempt."""
    data_dir = Path(settings.DATA_DIR)
    for name in (VAULT_KEY_FILE, SECRET_KEY_FILE):
        if data_dir / name in generated_secret_files:
            (data_dir / name).unlink(missing_ok=True)
            generated_secret_files.discard(data_dir / name)


def readable(ciphertexts: list[str], key_setting: str) -> int:
    """How many of the vault's ciphertexts `key_setting` decrypts."""
    fernet = MultiFernet([Fernet(key.encode()) for key in split_keys(key_setting)])
    count = 0
    for ciphertext in ciphertexts:
        try:
            fernet.decrypt(ciphertext.encode())
        except InvalidToken:
            continue
        count += 1
    return count
