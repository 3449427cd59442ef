from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from core.errors import DomainError
from teams import services
from teams.management.commands._base import TeamCommand


class Command(TeamCommand):
    help = "Revoke a team's live token by name; requests with it then answer 401."

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        parser.add_argument("--name", required=True)

    def handle(self, *args: Any, slug: str, name: str, **options: Any) -> None:
        team = self.team(slug)
        try:
            token = services.revoke_token(team=team, name=name, actor="manage.py")
        except DomainError as exc:
            raise CommandError(exc.detail) from None
        self.stdout.write(f"revoked token '{token.name}' ({token.prefix}…) of team {team.slug}")
