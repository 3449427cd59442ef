"""The keys of a backup, sealed with a passphrase (`keys.sealed`): never in clear beside
the dump.

Sealing is `cryptography`'s: a 256-bit key derived from the passphrase with scrypt (a fresh
random salt per backup, memory-hard parameters kept in the file so that they can grow),
then Fernet (AES-128-CBC and HMAC-SHA256, authenticated) over the keys as JSON. A wrong
passphrase, or a file changed by a single bit, fails the HMAC: nothing is ever read from
a file that does not open.

The passphrase comes from MEMORYHUB_BACKUP_PASSPHRASE_FILE, MEMORYHUB_BACKUP_PASSPHRASE or,
in a terminal, a prompt; never from the command line, where other users of the machine
could read it (`ps`).
"""

from __future__ import annotations

import base64
import getpass
import json
import os
import secrets
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from teams.backups import BackupError

SEALED_KEYS_FILE = "keys.sealed"
SEALED_FORMAT = "memoryhub-sealed-keys/1"
PASSPHRASE_VARIABLE = "MEMORYHUB_BACKUP_PASSPHRASE"  # noqa: S105 (a variable's name)
PASSPHRASE_FILE_VARIABLE = "MEMORYHUB_BACKUP_PASSPHRASE_FILE"  # noqa: S105 (a variable's name)
# Long enough that scrypt's cost is not the only thing between a stolen backup and its keys.
MIN_PASSPHRASE_CHARS = 12
# scrypt's cost (2**17 x 8 x 128 bytes = 128 MiB, a fraction of a second per backup):
# OWASP's recommended minimum for password storage.
SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**17, 8, 1
SALT_BYTES = 16


@dataclass(frozen=True)
class BackupKeys:
    """The keys a restored MemoryHub needs; never printed (no value in the repr)."""

    vault_key: str
    secret_key: str

    def __repr__(self) -> str:
        return "BackupKeys(...)"


def seal(keys: BackupKeys, passphrase: str, path: Path) -> None:
    """Write `keys` sealed with `passphrase` to `path` (mode 0600, never wider)."""
    salt = secrets.token_bytes(SALT_BYTES)
    token = _fernet(passphrase, salt, SCRYPT_N, SCRYPT_R, SCRYPT_P).encrypt(
        json.dumps({"vault_key": keys.vault_key, "secret_key": keys.secret_key}).encode()
    )
    sealed = {
        "format": SEALED_FORMAT,
        "kdf": {"name": "scrypt", "n": SCRYPT_N, "r": SCRYPT_R, "p": SCRYPT_P, "salt": _b64(salt)},
        "cipher": "fernet",
        "token": token.decode(),
    }
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(json.dumps(sealed, indent=2) + "\n")


def open_sealed(path: Path, passphrase: str) -> BackupKeys:
    """The keys sealed in `path`; BackupError when the passphrase does not open it."""
    try:
        sealed = json.loads(path.read_text())
        kdf = sealed["kdf"]
        if sealed["format"] != SEALED_FORMAT or kdf["name"] != "scrypt" or sealed["cipher"] != "fernet":
            raise ValueError(sealed["format"])
        fernet = _fernet(
            passphrase, base64.urlsafe_b64decode(kdf["salt"]), int(kdf["n"]), int(kdf["r"]), int(kdf["p"])
        )
        token = str(sealed["token"]).encode()
    except FileNotFoundError:
        raise BackupError(f"the manifest lists sealed keys, but {path} is missing") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BackupError(f"{path} is not a file of sealed keys this MemoryHub reads ({exc})") from None
    try:
        keys = json.loads(fernet.decrypt(token))
    except InvalidToken:
        raise BackupError(
            f"the passphrase does not open {path} (wrong passphrase, or the file was changed): "
            "nothing was restored"
        ) from None
    return BackupKeys(vault_key=str(keys["vault_key"]), secret_key=str(keys["secret_key"]))


def _fernet(passphrase: str, salt: bytes, n: int, r: int, p: int) -> Fernet:
    key = Scrypt(salt=salt, length=32, n=n, r=r, p=p).derive(passphrase.encode())
    return Fernet(base64.urlsafe_b64encode(key))


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode()


def read_passphrase(*, new: bool, prompt: Callable[[str], str] = getpass.getpass) -> str:
    """The passphrase from MEMORYHUB_BACKUP_PASSPHRASE_FILE or MEMORYHUB_BACKUP_PASSPHRASE,
    else asked in the terminal. For a `new` backup: asked twice, and long enough."""
    value = os.environ.get("MEMORYHUB_BACKUP_PASSPHRASE", "")
    file_name = os.environ.get("MEMORYHUB_BACKUP_PASSPHRASE_FILE", "")
    if value and file_name:
        raise BackupError(f"set {PASSPHRASE_VARIABLE} or {PASSPHRASE_FILE_VARIABLE}, not both")
    if file_name:
        try:
            value = Path(file_name).read_text().rstrip("\r\n")
        except OSError as exc:
            raise BackupError(f"{PASSPHRASE_FILE_VARIABLE} could not be read: {exc.strerror}") from None
    elif not value:
        if not sys.stdin.isatty():
            raise BackupError(
                f"the keys are sealed with a passphrase: set {PASSPHRASE_FILE_VARIABLE} (a file holding it) "
                f"or {PASSPHRASE_VARIABLE}, or run the command in a terminal to be asked"
            )
        value = prompt("Passphrase of the backup's keys: ")
        if new and prompt("The same passphrase again: ") != value:
            raise BackupError("the two passphrases differ: nothing was written")
    if not value:
        raise BackupError("the passphrase is empty")
    if new and len(value) < MIN_PASSPHRASE_CHARS:
        raise BackupError(f"the passphrase must be at least {MIN_PASSPHRASE_CHARS} characters long")
    return value
