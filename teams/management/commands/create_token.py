from __future__ import annotations

from django.core.management.base import CommandError

from core.errors import DomainError
from teams import services
from teams.management.commands._base import TeamCommand


class Command(TeamCommand):
    help = (
        "Create an agent token for a team. The token is shown once: it is the last line "
        "of the output, alone, so scripts can take it with `tail -n 1`."
    )

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        super().add_arguments(parser)
        parser.add_argument("--name", required=True, help="who the token belongs to")
        parser.add_argument("--scopes", default="read,write", help="comma-separated: read, write, admin")

    def handle(self, *args, slug: str, name: str, scopes: str, **options) -> None:  # type: ignore[no-untyped-def]
        team = self.team(slug)
        try:
            issued = services.create_token(
                team=team, name=name, scopes=services.parse_scopes(scopes), actor="manage.py"
            )
        except DomainError as exc:
            raise CommandError(exc.detail) from None
        self.stdout.write(
            f"token '{issued.token.name}' for team {team.slug} with scopes "
            f"{','.join(issued.token.scopes)}; it is shown only once:"
        )
        self.stdout.write(issued.raw)
