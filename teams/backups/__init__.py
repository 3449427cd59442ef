"""Backups of MemoryHub's database and of the keys it needs, and their restore
(`manage.py backup PATH`, `manage.py restore PATH`; docs/operations.md, "Backups and
restore"; docs/operations.md, "Why backups are built this way").

A backup is a folder: `database.dump` (pg_dump's custom format, everything of the database:
schema, rows, vectors, the BM25 statistics, row-level security, owners and grants),
`manifest.json` (versions, the rows of every table counted in the dump's own snapshot, the
dump's SHA-256) and, unless left out, `keys.sealed`: the vault key and the secret key,
sealed with a passphrase the operator keeps apart (teams.backups.sealing).
"""

from __future__ import annotations


class BackupError(Exception):
    """A backup or restore that cannot go on; the message tells the operator what to do."""
