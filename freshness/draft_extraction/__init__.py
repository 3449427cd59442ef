"""Drafts of memories from a session transcript or notes, for a person to review:
transcript.py prepares the text every extractor reads (bounded, scrubbed of credentials
and PII, code dropped), rules.py proposes candidates offline, llm.py through an
OpenAI-compatible chat endpoint when a team configures one."""

from freshness.draft_extraction.rules import extract_candidates
from freshness.draft_extraction.transcript import (
    MAX_CANDIDATES,
    MAX_CONTENT_CHARS,
    TRANSCRIPT_MAX_CHARS,
    Candidate,
    PreparedTranscript,
    prepare_transcript,
)

__all__ = [
    "MAX_CANDIDATES",
    "MAX_CONTENT_CHARS",
    "TRANSCRIPT_MAX_CHARS",
    "Candidate",
    "PreparedTranscript",
    "extract_candidates",
    "prepare_transcript",
]
