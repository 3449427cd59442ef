from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from core.errors import DomainError
from teams import accounts, memberships
from teams.management.commands._base import TeamCommand
from teams.models import Membership
from teams.scope import team_scope


class Command(TeamCommand):
    help = (
        "Give an account a role in a team. With --create, a new account is made and a "
        "one-time link to set its password is printed (the last line of the output)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        parser.add_argument("username")
        parser.add_argument("--role", required=True, choices=Membership.Role.values)
        parser.add_argument("--create", action="store_true", help="create the account; it must not exist")
        parser.add_argument("--email", default="", help="the new account's e-mail address (with --create)")

    def handle(
        self, *args: Any, slug: str, username: str, role: str, create: bool, email: str, **options: Any
    ) -> None:
        team = self.team(slug)
        if email and not create:
            raise CommandError("--email is for a new account: add --create")
        try:
            with team_scope(team.id):
                if create:
                    membership = memberships.add_new_member(
                        team=team, username=username, email=email, role=role, by=None
                    )
                else:
                    membership = memberships.add_member(team=team, username=username, role=role, by=None)
        except memberships.NoSuchUser:
            raise CommandError(f"no account named '{username.strip()}'; add --create to make one") from None
        except DomainError as exc:
            raise CommandError(exc.detail) from None
        name = membership.user.get_username()
        self.stdout.write(f"{name} is now {role} of team {team.slug}")
        if create:
            hours = int(accounts.link_lifetime().total_seconds() // 3600)
            self.stdout.write(f"Hand {name} this one-time link to set a password (valid {hours} h):")
            self.stdout.write(accounts.password_set_link(user=membership.user))
