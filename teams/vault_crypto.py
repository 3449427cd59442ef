"""Encryption at rest for vault secrets: Fernet (AES-128-CBC + HMAC-SHA256) from the
cryptography package. MEMORYHUB_VAULT_KEY may hold several comma-separated keys; the
first encrypts, all decrypt, so keys rotate without downtime."""

from __future__ import annotations

from functools import cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
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
