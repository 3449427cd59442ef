from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from teams.backups import BackupError
from teams.backups.backup import make_backup
from teams.backups.keys import VAULT_KEY_VARIABLES
from teams.backups.sealing import PASSPHRASE_FILE_VARIABLE, PASSPHRASE_VARIABLE, read_passphrase


class Command(BaseCommand):
    help = (
        "Back up the database (pg_dump, custom format) with a manifest, and the keys sealed with a "
        f"passphrase ({PASSPHRASE_FILE_VARIABLE}, {PASSPHRASE_VARIABLE}, or asked in a terminal), "
        "into a new folder PATH. Restore it with `manage.py restore PATH`."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path, help="a folder to create (or an empty one)")
        parser.add_argument(
            "--without-keys",
            action="store_true",
            help="leave the vault key and the secret key out (you keep them apart yourself)",
        )

    def handle(self, *args: Any, path: Path, without_keys: bool, **options: Any) -> None:
        try:
            passphrase = None if without_keys else read_passphrase(new=True)
            result = make_backup(folder=path, passphrase=passphrase)
        except BackupError as exc:
            raise CommandError(str(exc)) from None
        manifest = result.manifest
        self.stdout.write(
            f"backed up the database into {result.folder}: {len(manifest.tables)} tables, "
            f"{sum(manifest.tables.values())} rows, {manifest.vault_secrets} vault secrets; "
            f"{manifest.dump_file} is {manifest.dump_bytes} bytes, its SHA-256 in manifest.json"
        )
        if result.key_files:
            self.stdout.write(
                f"the vault key and the secret key are sealed in {result.key_files[0].name} with your "
                "passphrase: keep the passphrase apart from the backup (without it the vault's secrets "
                "cannot be restored)"
            )
        else:
            source = (
                "MEMORYHUB_VAULT_KEY"
                if any(os.environ.get(name) for name in VAULT_KEY_VARIABLES)
                else str(Path(settings.DATA_DIR) / "vault.key")
            )
            self.stderr.write(
                self.style.WARNING(
                    "WARNING: this backup holds no keys. The restored vault's secrets cannot be read without "
                    f"this server's vault key (in {source}): keep a copy of it apart from the backup."
                )
            )
