from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.errors import DomainError
from teams import accounts


class Command(BaseCommand):
    help = (
        "Print a one-time link that sets a new password for an account (when no e-mail "
        "server is configured for 'Forgot your password?'). It is the last line of the output."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")

    def handle(self, *args: Any, username: str, **options: Any) -> None:
        try:
            link = accounts.password_link_for(username=username)
        except DomainError as exc:
            raise CommandError(exc.detail) from None
        hours = int(accounts.link_lifetime().total_seconds() // 3600)
        self.stdout.write(f"A link that sets {username.strip()}'s password once (valid {hours} h):")
        self.stdout.write(link)
