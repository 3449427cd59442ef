"""Encryption at rest for vault secrets: Fernet (AES-128-CBC + HMAC-SHA256) from the
cryptography package. MEMORYHUB_VAULT_KEY may hold several comma-separated keys; the
first encrypts, all decrypt, so keys rotate without downtime.

An export file carries a vault sealed under a passphrase instead (PassphraseSeal): the
server's key never leaves it, and the file opens on any MemoryHub given the passphrase."""

from __future__ import annotations

import base64
import os
from functools import cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt
from django.conf import settings


class VaultDecryptionError(RuntimeError):
    pass


@cache
def _fernet(key_setting: str) -> MultiFernet:
    return MultiFernet([Fernet(k.strip().encode()) for k in key_setting.split(",") if k.strip()])


def encrypt(value: str) -> str:
    return _fernet(settings.VAULT_KEY).encrypt(value.encode()).decode()


def decrypt(ciphertext: str) -> str:
    try:
        return _fernet(settings.VAULT_KEY).decrypt(ciphertext.encode()).decode()
    except InvalidToken as exc:
        raise VaultDecryptionError("vault secret cannot be decrypted with the configured key") from exc


# ----- sealing under a passphrase: a vault carried in an export file -----

# A passphrase is all that protects the secrets of an export file, wherever it is kept.
PASSPHRASE_MIN_CHARS = 12
PASSPHRASE_MAX_CHARS = 1024
SEAL_KDF = "scrypt"
# scrypt's cost, fixed: a file naming its own costs could ask an import for gigabytes.
SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**15, 8, 1
SALT_BYTES = 16
_SEAL_CHECK = b"memoryhub-vault-seal"


class WrongPassphrase(ValueError):
    pass


class PassphraseSeal:
    """Fernet under a key derived from a passphrase (scrypt, a random salt per export).
    `header()` is what a file carries to open it again: the salt and a sealed constant
    that tells a wrong passphrase before anything is applied."""

    def __init__(self, passphrase: str, salt: bytes) -> None:
        check_passphrase(passphrase)
        kdf = Scrypt(salt=salt, length=32, n=SCRYPT_N, r=SCRYPT_R, p=SCRYPT_P)
        self.salt = salt
        self._fernet = Fernet(base64.urlsafe_b64encode(kdf.derive(passphrase.encode())))

    @classmethod
    def new(cls, passphrase: str) -> PassphraseSeal:
        return cls(passphrase, os.urandom(SALT_BYTES))

    @classmethod
    def from_header(cls, passphrase: str, header: object) -> PassphraseSeal:
        """The seal a file's header describes; ValueError if it is not one this server
        writes, WrongPassphrase if the passphrase does not open it."""
        if not isinstance(header, dict) or header.get("kdf") != SEAL_KDF:
            raise ValueError(f"the file's vault is not sealed with {SEAL_KDF}")
        if (header.get("n"), header.get("r"), header.get("p")) != (SCRYPT_N, SCRYPT_R, SCRYPT_P):
            raise ValueError("the file's vault is sealed with costs this server does not use")
        try:
            salt = base64.b64decode(str(header.get("salt", "")), validate=True)
        except ValueError:
            raise ValueError("the file's vault salt is not base64") from None
        if len(salt) != SALT_BYTES:
            raise ValueError("the file's vault salt has the wrong length")
        seal = cls(passphrase, salt)
        try:
            if seal._fernet.decrypt(str(header.get("check", "")).encode()) != _SEAL_CHECK:
                raise WrongPassphrase
        except InvalidToken:
            raise WrongPassphrase from None
        return seal

    def header(self) -> dict[str, object]:
        return {
            "kdf": SEAL_KDF,
            "n": SCRYPT_N,
            "r": SCRYPT_R,
            "p": SCRYPT_P,
            "salt": base64.b64encode(self.salt).decode(),
            "check": self._fernet.encrypt(_SEAL_CHECK).decode(),
        }

    def seal(self, value: str) -> str:
        return self._fernet.encrypt(value.encode()).decode()

    def open(self, sealed: str) -> str:
        try:
            return self._fernet.decrypt(sealed.encode()).decode()
        except (InvalidToken, UnicodeDecodeError):
            raise ValueError("a sealed value does not open with this file's passphrase") from None


def check_passphrase(passphrase: str) -> None:
    if not PASSPHRASE_MIN_CHARS <= len(passphrase) <= PASSPHRASE_MAX_CHARS:
        raise ValueError(
            f"the passphrase must be {PASSPHRASE_MIN_CHARS} to {PASSPHRASE_MAX_CHARS} characters long"
        )
