"""`manage.py migrate`, logged in as the owner role: the application role owns no table
and so cannot change the schema (docs/tenancy.md, "Database roles")."""

from __future__ import annotations

from typing import Any

from django.core.management.commands.migrate import Command as DjangoMigrateCommand
from django.db import connections

from teams.roles import as_owner


class Command(DjangoMigrateCommand):
    def handle(self, *args: Any, **options: Any) -> None:
        with as_owner(connections[options["database"]]):
            super().handle(*args, **options)
