from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from teams.backups import BackupError
from teams.backups.backup import make_backup
from teams.backups.keys import VAULT_KEY_VARIABLES


class Command(BaseCommand):
    help = (
        "Back up the database (pg_dump, custom format) with a manifest, and the keys, into a new "
        "folder PATH. Restore it with `manage.py restore PATH`."
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
            result = make_backup(folder=path, with_keys=not without_keys)
        except BackupError as exc:
            raise CommandError(str(exc)) from None
        manifest = result.manifest
        self.stdout.write(
            f"backed up the database into {result.folder}: {len(manifest.tables)} tables, "
            f"{sum(manifest.tables.values())} rows, {manifest.vault_secrets} vault secrets; "
            f"{manifest.dump_file} is {manifest.dump_bytes} bytes, its SHA-256 in manifest.json"
        )
        if result.key_files:
            names = ", ".join(key.name for key in result.key_files)
            self.stderr.write(
                self.style.WARNING(
                    f"WARNING: {result.key_files[0].parent} holds the keys ({names}), readable by you only. "
                    "Store that folder apart from the dump: whoever has both can read the vault's secrets, "
                    "and without the vault key nobody can read them, you included."
                )
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
