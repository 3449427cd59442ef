from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from search import reindexing
from search.embeddings.base import EmbeddingUnavailable
from search.embeddings.profiles import UnknownProfile, get_profile
from search.models import Chunk
from teams.models import Team
from teams.scope import dangerously_bypass_team_scope, team_scope
from teams.validators import is_team_slug


class Command(BaseCommand):
    help = (
        "Re-chunk and re-embed teams' memories with an embedding profile's model, then switch "
        "the teams to it. Search keeps using the old model until a team is switched."
    )

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        parser.add_argument(
            "--model", required=True, help="embedding profile name (local, openai, none, ...)"
        )
        parser.add_argument(
            "--team", action="append", default=[], help="team slug (repeatable; default: all)"
        )
        parser.add_argument("--no-progress", action="store_true", help="no progress bar")

    def handle(self, *args, model: str, team: list[str], no_progress: bool, **options) -> None:  # type: ignore[no-untyped-def]
        try:
            get_profile(model)
        except UnknownProfile as exc:
            raise CommandError(str(exc)) from None
        for slug in team:
            if not is_team_slug(slug):
                raise CommandError(f"'{slug}' is not a valid team slug")
        with dangerously_bypass_team_scope(reason=f"reindex --model {model}", actor="manage.py reindex"):
            selected = Team.objects.order_by("slug")
            if team:
                selected = selected.filter(slug__in=team)
                missing = set(team) - set(selected.values_list("slug", flat=True))
                if missing:
                    raise CommandError(f"no such team: {', '.join(sorted(missing))}")
            teams = list(selected)
        for t in teams:
            with team_scope(t.id):
                total = Chunk.objects.filter(team_id=t.id, memory__deleted_at__isnull=True).count()
            with tqdm(total=total, desc=t.slug, unit="chunk", disable=no_progress, file=self.stderr) as bar:
                try:
                    report = reindexing.reindex_team(team_id=t.id, profile=model, progress=bar.update)
                except EmbeddingUnavailable as exc:
                    raise CommandError(
                        f"{t.slug}: embedding failed, team left on its old model: {exc}"
                    ) from None
            self.stdout.write(
                f"{t.slug}: {report.memories} memories, {report.chunks_embedded} chunks embedded "
                f"with {report.model or 'no model (keyword only)'}"
            )
