"""Keys derived from a memory's text, for a save that comes without one (MCP's
memory_save, drafts proposed by the transcript extractor in freshness/extraction.py):
`mem:{slug of the first words}:{hash of the text}`, so the same text always gets the
same key, whoever proposes it."""

from __future__ import annotations

from memories.learnings import claim_hash, topic_slug
from teams.models import Team
from teams.scrubber import scrub
from teams.selectors import team_secret_values

DERIVED_KEY_PREFIX = "mem"
DERIVED_KEY_WORDS = 8
DERIVED_SLUG_CHARS = 40


def derive_key(scrubbed_text: str) -> str:
    """The key for a text already scrubbed of credentials (a secret must never shape a
    key): the slug of the first words of its first non-blank line, and its claim hash."""
    first_line = next((line for line in scrubbed_text.splitlines() if line.strip()), scrubbed_text)
    words = " ".join(first_line.split()[:DERIVED_KEY_WORDS])
    slug = topic_slug(words)[:DERIVED_SLUG_CHARS].rstrip("-")
    return f"{DERIVED_KEY_PREFIX}:{slug}:{claim_hash(scrubbed_text)}"


def key_for_text(*, team: Team, content: str) -> str:
    """The key of a text saved without one: derived after the credential scrub (as
    learnings derive theirs), so the same text always gets the same key and a secret
    never shapes one."""
    return derive_key(scrub(content, team_secret_values(team_id=team.id)).text)
