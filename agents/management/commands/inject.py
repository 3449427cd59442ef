"""`manage.py inject SLUG --into CLAUDE.md`: write the team's injection block into a
file an agent reads at start-up (CLAUDE.md, AGENTS.md), as one marked section.

The section writer lives in the client package (memoryhub_client.section), shared with
`memoryhub inject`, which does the same over HTTP from an agent's worktree.
"""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import CommandError

from agents.injection import build_injection
from core.errors import DomainError
from memoryhub_client.section import SectionError, write_section
from teams.management.commands._base import TeamCommand
from teams.scope import TEAM_ONLY, team_scope
from teams.scrubber import scrub
from teams.selectors import team_secret_values


class Command(TeamCommand):
    help = (
        "Write or replace the MemoryHub section (between <!-- memoryhub:begin --> and "
        "<!-- memoryhub:end -->) of a CLAUDE.md or AGENTS.md, leaving the rest of the file as it is."
    )

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        super().add_arguments(parser)
        parser.add_argument("--into", required=True, help="the file to write (created if missing)")
        parser.add_argument("--project", default=None, help="entries of this project and of no project")
        parser.add_argument("--max-tokens", type=int, default=None, help="token budget (default: the team's)")

    def handle(
        self, *args, slug: str, into: str, project: str | None, max_tokens: int | None, **options
    ) -> None:  # type: ignore[no-untyped-def]
        team = self.team(slug)
        path = Path(into)
        if path.is_symlink():
            path = path.resolve()  # write the file the link points to, keep the link
        if path.is_dir():
            raise CommandError(f"{into} is a folder")
        if not path.parent.is_dir():
            raise CommandError(f"no folder {path.parent}")
        try:
            with team_scope(team.id, viewer=TEAM_ONLY):
                result = build_injection(team=team, project=project, max_tokens=max_tokens)
                secrets = team_secret_values(team_id=team.id)
        except DomainError as exc:
            raise CommandError(exc.detail) from None
        # Contents were scrubbed when saved; scrub again for vault secrets added since,
        # as the API's renderer does for every response.
        text = scrub(result.text, secrets).text

        for warning in result.warnings:
            self.stderr.write(f"warning: {warning}")
        summary = f"{len(result.included)} entries, {result.tokens_used} of {result.token_budget} tokens"
        try:
            outcome = write_section(path, text)
        except SectionError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"{into} unchanged ({summary})" if outcome == "unchanged" else f"{outcome} {into} ({summary})"
        )
