from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.errors import DomainError
from teams import services


class Command(BaseCommand):
    help = "Create a team."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug", help="lowercase letters, digits and '-'")
        parser.add_argument("--name", default="", help="display name (default: the slug)")

    def handle(self, *args: Any, slug: str, name: str, **options: Any) -> None:
        try:
            team = services.create_team(slug=slug, name=name)
        except DomainError as exc:
            raise CommandError(exc.detail) from None
        self.stdout.write(f"created team {team.slug} ({team.name})")
