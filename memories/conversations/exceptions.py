"""The domain errors of conversations (mapped to the one error shape by core.api_errors)."""

from __future__ import annotations

from core.errors import DomainError, NotFound


class ConversationNotFound(NotFound):
    pass


class TranscriptTooLarge(DomainError):
    """More text or more lines than a conversation holds (MAX_TRANSCRIPT_CHARS, MAX_LINES)."""

    code = "transcript_too_large"
    status = 413
