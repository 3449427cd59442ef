from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from teams import services
from teams.management.commands._base import TeamCommand


class Command(TeamCommand):
    help = (
        "Delete a team and every row it owns (memories, vault, tokens), keeping its audit trail. "
        "Irreversible."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        parser.add_argument("--yes", action="store_true", help="confirm the deletion")

    def handle(self, *args: Any, slug: str, yes: bool, **options: Any) -> None:
        if not yes:
            raise CommandError("this deletes the whole team and cannot be undone; add --yes")
        team = self.team(slug)
        counts = services.shutdown_team(team=team, actor="manage.py")
        summary = ", ".join(f"{n} {what}" for what, n in counts.items())
        self.stdout.write(f"team {slug} shut down: deleted {summary}; its audit trail is kept")
