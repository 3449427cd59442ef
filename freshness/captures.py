"""Captured learnings straight to memory, for a team that opts in (`capture_to_memory`;
docs/freshness.md, "Captures straight to memory").

The client's capture hooks send what they capture (failed commands, the user's
corrections) to drafts/extract/ marked as a capture. freshness.drafts.extract scrubs and
extracts it as any transcript, counts a learning already pending on its draft, and then,
for a team with the setting on, hands the rest here:

- a learning an active entry was saved from already (the entry's
  `metadata.capture.fingerprint`) confirms that entry (memories.writes.confirm_memory,
  one confirmer per session) instead of making a second one; the session that saved it
  sending it again is a retry and changes nothing;
- a learning that would have been a draft with no conflict is saved as a lesson entry
  (memories.writes.save_memory, auto_captured) under the draft's derived key;
- anything else (a duplicate or contradicting candidate, a key taken, the team's quota
  reached) stays the draft it would have been, for a person.

Runs inside extract's transaction, under its per-team lock: two captures of one learning
at once save it once."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from django.db import transaction

from core.errors import DomainError
from freshness.draft_extraction import Candidate
from freshness.models import DraftConflict
from memories import writes
from memories.models import Confirmation, Memory
from teams.models import Team

logger = logging.getLogger(__name__)

CONFIRMATION_NOTE = "captured again by the capture hooks"
MAX_ACTOR_CHARS = 200


@dataclass
class CaptureOutcome:
    saved: dict[str, Memory] = field(default_factory=dict)  # by fingerprint: entries made
    confirmed: dict[str, Memory] = field(default_factory=dict)  # by fingerprint: entries seen again
    retried: set[str] = field(default_factory=set)  # this session's own captures, sent again


def save_captures(
    *,
    team: Team,
    candidates: dict[str, Candidate],
    conflicts: dict[str, str],
    actor: str,
    session: str,
    extractor: str,
) -> CaptureOutcome:
    """`candidates` by fingerprint (none of them pending as a draft); `conflicts` the
    conflict each candidate's text would have had as a draft. What was saved, confirmed
    or is a retry: every other candidate stays a draft."""
    outcome = CaptureOutcome()
    if not candidates:
        return outcome
    known = _entries_by_fingerprint(team, list(candidates))
    for fingerprint, candidate in candidates.items():
        entry = known.get(fingerprint)
        if entry is not None:
            if _seen_in_session(team, entry, session, actor):
                outcome.retried.add(fingerprint)
            else:
                outcome.confirmed[fingerprint] = _confirm(team, entry, actor, session)
        elif conflicts.get(candidate.content) == DraftConflict.NONE:
            saved = _save(team, candidate, fingerprint, actor, session, extractor)
            if saved is not None:
                outcome.saved[fingerprint] = saved
    logger.info(
        "team %s: %d capture(s) saved to memory, %d confirmed",
        team.slug,
        len(outcome.saved),
        len(outcome.confirmed),
    )
    return outcome


def _entries_by_fingerprint(team: Team, fingerprints: list[str]) -> dict[str, Memory]:
    """The team's active entries saved from these learnings (one query, at most
    extraction's 15 fingerprints)."""
    rows = (
        Memory.objects.for_team(team.id)
        .active()
        .filter(metadata__capture__fingerprint__in=fingerprints)
        .order_by("created_at")
    )
    found: dict[str, Memory] = {}
    for row in rows:
        found.setdefault(str((row.metadata or {}).get("capture", {}).get("fingerprint")), row)
    return found


def _confirmer(actor: str, session: str) -> str:
    """One confirmer per session: the same learning met in two sessions is two witnesses."""
    return (f"{actor} (capture, session {session})" if session else f"{actor} (capture)")[:MAX_ACTOR_CHARS]


def _seen_in_session(team: Team, entry: Memory, session: str, actor: str) -> bool:
    if not session:
        return False  # no session named: every sighting counts, as for drafts
    capture = (entry.metadata or {}).get("capture") or {}
    if capture.get("source_session") == session:
        return True
    confirmer = _confirmer(actor, session)
    return Confirmation.objects.filter(team=team, memory=entry, confirmed_by=confirmer).exists()


def _confirm(team: Team, entry: Memory, actor: str, session: str) -> Memory:
    result = writes.confirm_memory(
        team=team, key=entry.key, confirmed_by=_confirmer(actor, session), note=CONFIRMATION_NOTE
    )
    return result.memory


def _save(
    team: Team, candidate: Candidate, fingerprint: str, actor: str, session: str, extractor: str
) -> Memory | None:
    capture = {"fingerprint": fingerprint, "source_session": session, "extractor": extractor}
    metadata = {"capture": {**capture, "why": candidate.why}}
    try:
        with transaction.atomic():  # a savepoint: a refused save leaves extract's transaction usable
            result = writes.save_memory(
                team=team,
                key=candidate.key,
                content=candidate.content,
                updated_by=actor,
                type_name=candidate.type.value,
                metadata=metadata,
                auto_captured=True,
            )
    except DomainError as exc:  # a key taken, the quota: a person decides, as before
        logger.info("team %s: capture kept as a draft (%s)", team.slug, type(exc).__name__)
        return None
    return result.memory if result.saved else None
