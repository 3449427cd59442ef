from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.errors import DomainError
from teams import accounts


class Command(BaseCommand):
    help = (
        "Set up a new server once: a first team, its owner (with a one-time link to set a "
        "password) and an agent token. A later run creates nothing and says what exists."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--team", default="my-team", help="the first team's slug (default: my-team)")
        parser.add_argument("--team-name", default="My team", help="its display name")
        parser.add_argument("--username", default="owner", help="the owner's username (default: owner)")
        parser.add_argument("--email", default="", help="the owner's e-mail address (optional)")
        parser.add_argument(
            "--if-empty",
            action="store_true",
            help="do nothing when any team or account exists (the first `make run`)",
        )

    def handle(
        self, *args: Any, team: str, team_name: str, username: str, email: str, if_empty: bool, **options: Any
    ) -> None:
        try:
            result = accounts.bootstrap(
                team_slug=team, team_name=team_name, username=username, email=email, if_empty=if_empty
            )
        except DomainError as exc:
            raise CommandError(exc.detail) from None
        if isinstance(result, accounts.AlreadySetUp):
            self._already_set_up(result, quiet=if_empty)
            return
        base = settings.MEMORYHUB_BASE_URL
        hours = int(accounts.link_lifetime().total_seconds() // 3600)
        slug = result.team.slug
        self.stdout.write(
            "\n".join(
                [
                    "",
                    f"MemoryHub is set up: team {slug}, owned by {result.username}.",
                    "",
                    f"1. Open the dashboard: {base}",
                    f"2. Set {result.username}'s password with this one-time link "
                    f"(valid {hours} h), then sign in:",
                    f"   {result.link}",
                    "3. Connect your agents with this token (read,write; shown only once):",
                    f"   export MEMORYHUB_TOKEN={result.token}",
                    f"   .venv/bin/memoryhub connect claude-code --team {slug} "
                    f"--url {base.rstrip('/')} --write",
                    "   (other clients: README, 'Connect your agents')",
                    "",
                ]
            )
        )

    def _already_set_up(self, found: accounts.AlreadySetUp, *, quiet: bool) -> None:
        if quiet and not found.teams:
            self.stdout.write("Accounts exist already; nothing to set up.")
            return
        names = ", ".join(
            f"{team.slug} (owners: {', '.join(owners) or 'none'})" for team, owners in found.teams
        )
        self.stdout.write(
            f"MemoryHub is set up already: {names}. Nothing was created.\n"
            "A new sign-in link: manage.py password_link USERNAME; a new agent token: "
            "manage.py create_token SLUG --name NAME; more people: manage.py add_member."
        )
