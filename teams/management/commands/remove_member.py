from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from core.errors import DomainError
from teams import memberships
from teams.management.commands._base import TeamCommand
from teams.scope import team_scope


class Command(TeamCommand):
    help = "Take an account out of a team (its account stays). A team keeps at least one owner."

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        parser.add_argument("username")

    def handle(self, *args: Any, slug: str, username: str, **options: Any) -> None:
        team = self.team(slug)
        try:
            with team_scope(team.id):
                membership_id = memberships.membership_id_of(team=team, username=username)
                memberships.remove_member(team=team, membership_id=membership_id, by=None)
        except DomainError as exc:
            raise CommandError(exc.detail) from None
        self.stdout.write(f"{username.strip()} removed from team {team.slug}")
