from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError, CommandParser

from core.errors import DomainError
from teams import services
from teams.management.commands._base import TeamCommand


class Command(TeamCommand):
    help = (
        "Create an agent token for a team. The token is shown once: it is the last line "
        "of the output, alone, so scripts can take it with `tail -n 1`."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        parser.add_argument("--name", required=True, help="who the token belongs to")
        parser.add_argument("--scopes", default="read,write", help="comma-separated: read, write, admin")
        parser.add_argument(
            "--expires-in",
            default=None,
            help="the token answers 401 after this long: 12h, 90d or 4w (default: never expires)",
        )
        parser.add_argument(
            "--user",
            default=None,
            help="the member's username for a personal token: it also sees their personal entries "
            "(default: the team's token)",
        )

    def handle(
        self,
        *args: Any,
        slug: str,
        name: str,
        scopes: str,
        expires_in: str | None,
        user: str | None,
        **options: Any,
    ) -> None:
        team = self.team(slug)
        user_id = None
        if user is not None:
            user_id = get_user_model().objects.filter(username=user).values_list("pk", flat=True).first()
            if user_id is None:
                raise CommandError(f"no user named '{user}'")
        try:
            issued = services.create_token(
                team=team,
                name=name,
                scopes=services.parse_scopes(scopes),
                actor="manage.py",
                expires_in=services.parse_expiry(expires_in) if expires_in is not None else None,
                user_id=user_id,
            )
        except DomainError as exc:
            raise CommandError(exc.detail) from None
        expiry = issued.token.expires_at
        self.stdout.write(
            f"token '{issued.token.name}' for team {team.slug} with scopes "
            f"{','.join(issued.token.scopes)}"
            + (f", expiring {expiry:%Y-%m-%d %H:%M} UTC" if expiry else "")
            + "; it is shown only once:"
        )
        self.stdout.write(issued.raw)
