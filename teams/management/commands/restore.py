from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from teams.backups import BackupError
from teams.backups.restore import restore_backup
from teams.backups.sealing import read_passphrase


class Command(BaseCommand):
    help = (
        "Restore a backup made by `manage.py backup` into an empty database (the embedded one of a new "
        "data folder, or one of your own, logged in as memoryhub_owner), with its keys (sealed: the "
        "passphrase from MEMORYHUB_BACKUP_PASSPHRASE_FILE, MEMORYHUB_BACKUP_PASSPHRASE, or asked)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path, help="the backup's folder")

    def handle(self, *args: Any, path: Path, **options: Any) -> None:
        try:
            result = restore_backup(folder=path, passphrase=lambda: read_passphrase(new=False))
        except BackupError as exc:
            raise CommandError(str(exc)) from None
        manifest = result.manifest
        vector = manifest.extensions.get("vector", "none")
        self.stdout.write(
            f"restored the backup of {manifest.created_at} (MemoryHub {manifest.memoryhub_version}, "
            f"PostgreSQL {manifest.postgresql_version}, pgvector {vector}): {len(manifest.tables)} tables, "
            f"{sum(manifest.tables.values())} rows, every count as in the manifest"
        )
        self.stdout.write(f"vault: {result.vault_readable} secrets, all readable with the vault key")
        for key in result.installed_keys:
            self.stdout.write(f"installed the backup's {key.name} in {key.parent}")
        for note in result.notes:
            self.stdout.write(f"note: {note}")
        if result.pending_migrations:
            self.stdout.write(
                f"next: `manage.py migrate` applies this version's {len(result.pending_migrations)} newer "
                "migrations, then start the service"
            )
        else:
            self.stdout.write("next: start the service")
