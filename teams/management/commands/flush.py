"""`manage.py flush`, logged in as the owner role: emptying every table takes TRUNCATE,
which only the tables' owner has (docs/tenancy.md, "Database roles"). Django's
transactional tests flush between tests this way too."""

from __future__ import annotations

from typing import Any

from django.core.management.commands.flush import Command as DjangoFlushCommand
from django.db import connections

from teams.roles import as_owner


class Command(DjangoFlushCommand):
    def handle(self, **options: Any) -> None:
        with as_owner(connections[options["database"]]):
            super().handle(**options)
