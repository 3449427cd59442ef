"""Chunking and embedding a conversation's lines, in the background (docs/search.md,
"Unified search").

A chunk is a window of consecutive lines (`first_line`..`last_line`), each rendered
"role: text", closed once adding the next line would pass WINDOW_TOKENS tokens or the
window holds WINDOW_LINES lines; the next window starts OVERLAP_LINES lines before the
end of the last, so an exchange that straddles a cut is whole in one of them. A line
longer than the window is a chunk of its own. Chunks go in their own table
(search.models.ConversationChunk, vector in the row): memory search reads none of it.
Embedding uses the team's provider and its embedding cache (search.services); without
a provider, or when it fails, the chunks are stored without vectors and are found by
keyword only."""

from __future__ import annotations

import functools
import logging
import uuid
from dataclasses import dataclass
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from memories.conversations.models import Conversation, ConversationLine
from search.chunking import content_hash
from search.embeddings.base import EmbeddingUnavailable
from search.models import ConversationChunk
from search.services import cached_embeddings, team_provider
from search.tokens import count_tokens
from teams.models import Team
from teams.scope import dangerously_bypass_team_scope, team_scope

logger = logging.getLogger(__name__)

WINDOW_TOKENS = 400
WINDOW_LINES = 20
OVERLAP_LINES = 2


@dataclass(frozen=True)
class LineWindow:
    first_line: int
    last_line: int
    text: str


def line_windows(lines: list[tuple[int, str, str]]) -> list[LineWindow]:
    """Windows over (number, role, text) lines in order (module docstring)."""
    rendered = [(number, f"{role}: {text}") for number, role, text in lines]
    sizes = [count_tokens(text) for _, text in rendered]
    windows: list[LineWindow] = []
    start = 0
    while start < len(rendered):
        end = start + 1
        tokens = sizes[start]
        while end < len(rendered) and end - start < WINDOW_LINES and tokens + sizes[end] <= WINDOW_TOKENS:
            tokens += sizes[end]
            end += 1
        windows.append(
            LineWindow(
                first_line=rendered[start][0],
                last_line=rendered[end - 1][0],
                text="\n".join(text for _, text in rendered[start:end]),
            )
        )
        if end >= len(rendered):
            break
        # Step back for the overlap, but always move forward.
        start = max(start + 1, end - OVERLAP_LINES)
    return windows


def index_conversation(*, team_id: int, conversation_id: uuid.UUID | str) -> str:
    """Chunk and embed one conversation; its index_state becomes `indexed` (with
    vectors), `keyword` (without: no provider, or it failed) or stays put when the
    conversation is gone. Idempotent: a second run replaces the chunks."""
    with team_scope(team_id):
        conversation = Conversation.objects.filter(team_id=team_id, id=conversation_id).first()
        if conversation is None:
            return "gone"
        team = Team.objects.get(id=team_id)
        lines = list(
            ConversationLine.objects.filter(team_id=team_id, conversation=conversation)
            .order_by("number")
            .values_list("number", "role", "text")
        )
    windows = line_windows(lines)
    vectors: dict[str, list[float]] = {}
    model = ""
    try:
        provider = team_provider(team)
        if provider is not None and windows:
            vectors = cached_embeddings(
                provider, [(content_hash(w.text), w.text) for w in windows], team_id=team_id
            )
            model = provider.model
    except EmbeddingUnavailable as exc:
        logger.warning(
            "team %s: conversation %s indexed for keywords only: %s", team_id, conversation_id, exc
        )
    with team_scope(team_id), transaction.atomic():
        if not Conversation.objects.filter(team_id=team_id, id=conversation_id).select_for_update().exists():
            return "gone"
        ConversationChunk.objects.filter(team_id=team_id, conversation_id=conversation_id).delete()
        ConversationChunk.objects.bulk_create(
            [
                ConversationChunk(
                    team_id=team_id,
                    conversation_id=conversation_id,
                    first_line=w.first_line,
                    last_line=w.last_line,
                    text=w.text,
                    content_hash=content_hash(w.text),
                    model=model if vectors else "",
                    embedding=vectors.get(content_hash(w.text)),
                )
                for w in windows
            ]
        )
        state = "indexed" if vectors else "keyword"
        Conversation.objects.filter(team_id=team_id, id=conversation_id).update(index_state=state)
    return state


def index_conversation_after_commit(*, team_id: int, conversation_id: uuid.UUID) -> None:
    """The receiver of memories.hooks.conversation_stored: enqueue the indexing once the
    storing transaction commits. A broker that refuses it is logged; the conversation
    stays `pending` (and searchable once indexed again)."""
    transaction.on_commit(functools.partial(_enqueue, team_id, str(conversation_id)))


def _enqueue(team_id: int, conversation_id: str) -> None:
    from search import tasks

    try:
        tasks.publish(tasks.index_conversation, (team_id, conversation_id))
    except Exception as exc:  # as search.tasks.enqueue_index: logged, never raised
        logger.warning(
            "could not enqueue indexing of conversation %s (team %s): %s; it stays pending",
            conversation_id,
            team_id,
            type(exc).__name__,
        )


def stuck_conversations(*, older_than_seconds: float, limit: int) -> list[tuple[int, uuid.UUID]]:
    """(team_id, conversation_id) of conversations still `pending` this long after they
    were stored, oldest first, at most `limit`: their indexing message was refused by the
    broker or lost with a worker. Indexing never leaves one pending otherwise (a provider
    failure indexes it for keywords), and a second run replaces its windows, so the
    reconcile job enqueues these again with no lease of their own.

    Runs in the operators' bypass scope: the reconcile job looks at every team."""
    cutoff = timezone.now() - timedelta(seconds=older_than_seconds)
    with dangerously_bypass_team_scope(reason="reconcile pending conversations", actor="celery-beat"):
        rows = (
            Conversation.objects.filter(index_state="pending", created_at__lt=cutoff)
            .order_by("created_at", "id")
            .values_list("team_id", "id")[:limit]
        )
        return [(team_id, conversation_id) for team_id, conversation_id in rows]
