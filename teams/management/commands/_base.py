from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.errors import DomainError
from teams.models import Team
from teams.selectors import get_team_by_slug
from teams.validators import is_team_slug


class TeamCommand(BaseCommand):
    """A command that acts on one team named by its slug."""

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug", help="the team's slug")

    def team(self, slug: str) -> Team:
        if not is_team_slug(slug):
            raise CommandError(f"'{slug}' is not a valid team slug")
        try:
            return get_team_by_slug(slug=slug)
        except DomainError as exc:
            raise CommandError(exc.detail) from None
