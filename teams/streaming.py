"""A response body too large to build in memory, streamed as JSON Lines, still bound
to the team and still redacted of its vault secrets.

TeamScopedViewSet runs a request in one transaction bound to the team and renders the
body inside it; a streamed body is produced after that transaction has ended, while the
server sends it. So the stream opens its own transaction when the first chunk is asked
for: REPEATABLE READ (every query of the stream reads the same snapshot), bound to the
same team by row-level security (teams.scope.team_scope), and closed when the last
chunk is sent or the client goes away (the generator's `finally`). Every record passes
the team's vault-secret matcher, as every rendered body does (teams.renderers).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection, transaction
from django.http import StreamingHttpResponse

from teams.renderers import redact_node
from teams.scope import team_scope
from teams.vault_matcher import team_secret_matcher

JSON_LINES_MEDIA_TYPE = "application/jsonl"
# Records serialised per chunk handed to the server: few enough to stay small, enough
# that a chunk is not one syscall per line.
RECORDS_PER_CHUNK = 200


class TeamScopedStream(StreamingHttpResponse):
    """The one streamed answer TeamScopedViewSet accepts instead of a DRF Response: its
    body comes only from `team_json_lines`, which scopes and redacts it."""


def team_json_lines(
    *, team_id: int, viewer: str, produce: Callable[[], Iterable[dict[str, Any]]]
) -> TeamScopedStream:
    """Stream the records `produce()` yields (it runs inside the stream's own transaction,
    bound to the team and seeing what `viewer` may see, as the request did) as one JSON
    object per line."""
    response = TeamScopedStream(_lines(team_id, viewer, produce), content_type=JSON_LINES_MEDIA_TYPE)
    # Proxies (nginx) would otherwise buffer the whole body before sending any of it.
    response["X-Accel-Buffering"] = "no"
    response["Cache-Control"] = "no-store"
    return response


def _lines(team_id: int, viewer: str, produce: Callable[[], Iterable[dict[str, Any]]]) -> Iterator[bytes]:
    with transaction.atomic():
        if len(connection.atomic_blocks) == 1:
            # Only as the transaction's first statement; inside an outer transaction
            # (a test's) the stream reads what that one sees.
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        with team_scope(team_id, viewer=viewer):
            matcher = team_secret_matcher(team_id=team_id)
            chunk: list[str] = []
            for record in produce():
                if not matcher.is_empty:
                    record = redact_node(record, matcher)
                chunk.append(json.dumps(record, cls=DjangoJSONEncoder, ensure_ascii=False))
                if len(chunk) >= RECORDS_PER_CHUNK:
                    yield ("\n".join(chunk) + "\n").encode()
                    chunk = []
            if chunk:
                yield ("\n".join(chunk) + "\n").encode()
