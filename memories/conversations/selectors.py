"""Reads of conversations. Every function takes the team explicitly."""

from __future__ import annotations

import uuid

from django.db.models import QuerySet

from memories.conversations.exceptions import ConversationNotFound
from memories.conversations.models import Conversation, ConversationLine
from memories.conversations.services import parse_conversation_id


def list_conversations(*, team_id: int, session: str | None = None) -> QuerySet[Conversation]:
    """The team's conversations (the caller orders them for its pages), optionally one session's."""
    rows = Conversation.objects.filter(team_id=team_id)
    if session:
        rows = rows.filter(session=session)
    return rows


def get_conversation(*, team_id: int, conversation_id: uuid.UUID | str) -> Conversation:
    parsed = parse_conversation_id(conversation_id)
    conversation = Conversation.objects.filter(team_id=team_id, id=parsed).first()
    if conversation is None:
        raise ConversationNotFound("no such conversation")
    return conversation


def conversation_lines(
    *, team_id: int, conversation: Conversation, first: int = 1, last: int | None = None
) -> list[ConversationLine]:
    """Lines `first`..`last` (1-based, inclusive; `last` None: to the end), in order."""
    rows = ConversationLine.objects.filter(team_id=team_id, conversation=conversation, number__gte=first)
    if last is not None:
        rows = rows.filter(number__lte=last)
    return list(rows.order_by("number"))
