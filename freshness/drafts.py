"""Extraction drafts (docs/freshness.md, "Extraction drafts"): memories an
extractor proposes from a transcript, waiting for a person to accept (optionally
edited), reject or merge them. The services and reads of freshness.models.Draft; the
lifecycle and its decisions are in docs/freshness.md, "Extraction drafts".

extract → prepare_transcript (bounds, scrubs credentials, the team's vault secrets and
PII, drops code) → the configured extractor (the offline rules, or an
OpenAI-compatible chat endpoint: freshness.draft_extraction.llm) → at most
extraction.MAX_CANDIDATES candidates → each one not already pending for the team
(by its fingerprint: learning_fingerprint) becomes a pending Draft; one already pending
corroborates that draft instead (its count goes up, unless the same session sent it
again: a retry), flagged with its conflict: `duplicate` (an active entry holds
the text: search.duplicates_on_save, exact hash then near vectors) or `contradiction` (an active
entry near it disagrees: freshness.contradictions.judge_pair), linking that entry.

Review (each on a pending draft only, else DraftNotPending, 409):
- accept: memories.writes.save_memory under the draft's key (or the edited one),
  with the draft's provenance under the metadata's `draft`; the contradiction flow
  follows the save as for any save (nudge after indexing);
- reject: nothing stored;
- merge: supersede the active entry of `into_key` with the merged text (default: its
  text, a blank line, the draft's), the reason naming the draft.
"""

from __future__ import annotations

import hashlib
import logging
import re
import uuid
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from core.errors import Conflict, InvalidInput, NotFound
from core.locks import advisory_xact_lock
from core.request_transaction import outside_request_transaction
from freshness import contradictions, fact_drafts
from freshness.captures import CaptureOutcome, save_captures
from freshness.draft_extraction import Candidate, PreparedTranscript, extract_candidates, prepare_transcript
from freshness.draft_extraction.fact_rules import extract_fact_candidates
from freshness.draft_extraction.llm import ChatExtractor, ExtractorUnavailable, extractor_name
from freshness.draft_extraction.transcript import FactCandidate
from freshness.models import Draft, DraftConflict, DraftKind, DraftState, Nudge
from memories import writes
from memories.conversations import services as conversation_services
from memories.conversations.models import Conversation, ConversationSource
from memories.exceptions import MemoryExists, MemoryNotFound, UnknownMemoryType
from memories.facts.models import Fact
from memories.models import Memory
from memories.types import resolve_type, unknown_type_message
from search.chunking import chunk_text
from search.duplicates_on_save import find_duplicate
from search.embeddings.base import EmbeddingUnavailable
from search.retrieval.candidates import QueryVector, SearchFilters, vector_matches
from search.selectors import has_active_vectors
from search.services import cached_embeddings, team_provider
from teams.models import Team
from teams.scrubber import SecretMatcher, scrub
from teams.services import QuotaExceeded
from teams.validators import check_key
from teams.vault_matcher import team_secret_matcher

logger = logging.getLogger(__name__)

ANY_STATE = "all"
STATE_FILTER_CHOICES = [*DraftState.values, ANY_STATE]
MAX_EXCERPT_CHARS = 400
MAX_SOURCE_SESSION_CHARS = 200
EXTRACTORS = ("rules", "openai")


class DraftNotFound(NotFound):
    pass


class DraftNotPending(Conflict):
    """The draft was reviewed already (accepted, rejected or merged)."""

    code = "draft_not_pending"


class DraftKeyTaken(Conflict):
    """Accepting the draft would replace an active entry: merge it, or pick another key."""

    code = "draft_key_exists"


# Raised by accepting a fact draft (freshness.fact_drafts); named here with the others.
DraftFactTaken = fact_drafts.DraftFactTaken


class DraftIsDuplicate(Conflict):
    """Another key's active entry already holds the draft's text."""

    code = "draft_duplicate"


# --------------------------------------------------------------------------- extraction


@dataclass
class Extraction:
    drafts: list[Draft] = field(default_factory=list)  # the drafts made
    corroborated: list[Draft] = field(default_factory=list)  # pending ones seen again
    # A capture for a team with capture_to_memory on (freshness.captures): entries
    # saved instead of drafts, and entries saved before that this capture confirmed.
    saved: list[Memory] = field(default_factory=list)
    confirmed: list[Memory] = field(default_factory=list)
    # Active facts the transcript stated again with the same value: no draft.
    confirmed_facts: list[Fact] = field(default_factory=list)
    # fact_contradiction nudges opened: the transcript stated another value.
    fact_nudges: list[Nudge] = field(default_factory=list)
    conversation: Conversation | None = None  # the transcript kept as a conversation


# What differs between runs of one failure: a file's line and column (`main.go:9:2:`,
# `Makefile:12:`), "line 12", a duration, a long id. Other numbers are what a learning
# says ("never deploy on day 3", "Node 20") and keep two learnings apart.
_VARYING_NUMBERS = re.compile(r"(?i):\d+(?=[:\s\]),]|$)|\bline \d+|\b\d+(?:\.\d+)?\s?m?s\b|\b\d{5,}\b")


def learning_fingerprint(draft_type: str, content: str) -> str:
    """One learning however often it is extracted: case and spacing aside, and for a
    lesson (what captured failures become) the numbers that differ between runs."""
    text = content.lower()
    if draft_type == "lesson":
        text = _VARYING_NUMBERS.sub("#", text)
    return hashlib.sha256(" ".join(text.split()).encode()).hexdigest()


def extract_drafts(*, team: Team, transcript: str, actor: str, source_session: str = "") -> list[Draft]:
    """The drafts `extract` made (an empty list when there was nothing new)."""
    return extract(team=team, transcript=transcript, actor=actor, source_session=source_session).drafts


def extract(
    *,
    team: Team,
    transcript: str,
    actor: str,
    source_session: str = "",
    captured: bool = False,
    keep_conversation: bool = True,
    conversation_source: str = ConversationSource.API,
) -> Extraction:
    """Pending drafts from a transcript or notes, newest candidates in text order. A
    candidate already pending for the team (the same learning_fingerprint) is not drafted
    again: it corroborates the pending draft, whose `corroborated` count goes up and
    `last_corroborated_at` is now; not when the draft came from this very session (the
    same session sending a learning again is a retry, not a second witness).

    `captured`: the text is what the client's capture hooks captured. For a team with
    `capture_to_memory` on, the learnings not pending as drafts go to
    freshness.captures.save_captures (saved as entries, or confirming the entry saved
    before); what it does not take is drafted as ever.

    With `keep_conversation`, the transcript is also stored as a conversation of the
    team (memories.conversations: scrubbed, bounded, its turns as lines), and each draft
    records it and, when found, the lines holding its excerpt. A team at its quota of
    conversations still gets its drafts (the conversation is not kept, and logged)."""
    if not isinstance(transcript, str) or "\x00" in transcript:
        raise InvalidInput("transcript must be text without NUL characters", field="transcript")
    if not transcript.strip():
        raise InvalidInput("transcript must not be empty", field="transcript")
    matcher = team_secret_matcher(team_id=team.id)
    session = _clean_session(source_session, matcher)
    conversation, lines = (
        _keep_conversation(team, transcript, actor, session, conversation_source)
        if keep_conversation
        else (None, [])
    )
    prepared = prepare_transcript(transcript, matcher)
    candidates, fact_candidates, extractor = _run_extractor(prepared, matcher)
    by_print = _one_per_fingerprint(candidates)
    fresh = _unseen(team, by_print)
    conflicts = {c.content: _conflict(team, c.content) for c in fresh}
    with transaction.atomic():
        # Two extractions of one transcript at once: the second sees the first's drafts.
        advisory_xact_lock(f"freshness.drafts:{team.id}")
        pending = _pending_by_fingerprint(team, by_print)
        corroborated = _corroborate([pending[f] for f in by_print if f in pending], session)
        captures = CaptureOutcome()
        if captured and team.capture_to_memory:
            captures = save_captures(
                team=team,
                candidates={f: c for f, c in by_print.items() if f not in pending},
                conflicts={text: conflict for text, (conflict, _entry) in conflicts.items()},
                actor=actor,
                session=session,
                extractor=extractor,
            )
        taken = {*captures.saved, *captures.confirmed, *captures.retried}
        drafts = [
            Draft(
                team=team,
                type=c.type.value,
                key=c.key,
                content=c.content,
                why=c.why[:200],
                source_start=c.source_span[0],
                source_end=c.source_span[1],
                source_excerpt=_excerpt(prepared, c.source_span),
                source_session=session,
                **_conversation_source(conversation, lines, _excerpt(prepared, c.source_span)),
                extractor=extractor,
                created_by=actor[:200],
                conflict=conflicts[c.content][0],
                conflict_memory=conflicts[c.content][1],
                fingerprint=f,
            )
            for f, c in by_print.items()
            if f not in pending and f not in taken and c.content in conflicts
        ]
        facts = fact_drafts.draft_facts(
            team=team,
            candidates=fact_candidates,
            session=session,
            extractor=extractor,
            actor=actor,
            excerpt=lambda span: _excerpt(prepared, span),
        )
        drafts += facts.drafts
        corroborated += _corroborate(facts.pending_seen_again, session)
        Draft.objects.bulk_create(drafts)
    logger.info(
        "team %s: %d draft(s), %d corroborated, %d fact(s) confirmed, %d fact contradiction(s), from %s (%s)",
        team.slug,
        len(drafts),
        len(corroborated),
        len(facts.confirmed_facts),
        len(facts.fact_nudges),
        session or "a transcript",
        extractor,
    )
    return Extraction(
        drafts,
        corroborated,
        saved=list(captures.saved.values()),
        confirmed=list(captures.confirmed.values()),
        confirmed_facts=facts.confirmed_facts,
        fact_nudges=facts.fact_nudges,
        conversation=conversation,
    )


def _keep_conversation(
    team: Team, transcript: str, actor: str, session: str, source: str
) -> tuple[Conversation | None, list[conversation_services.Line]]:
    lines = conversation_services.lines_from_transcript(transcript)
    if not lines:
        return None, []
    try:
        conversation = conversation_services.store_conversation(
            team=team, lines=lines, actor=actor, session=session, source=source
        )
    except QuotaExceeded:
        logger.warning("team %s: transcript not kept as a conversation: quota reached", team.slug)
        return None, []
    return conversation, lines


def _conversation_source(
    conversation: Conversation | None, lines: list[conversation_services.Line], excerpt: str
) -> dict[str, Any]:
    if conversation is None:
        return {}
    span = conversation_services.lines_holding(lines, excerpt)
    return {
        "source_conversation": conversation.id,
        "source_first_line": span[0] if span else None,
        "source_last_line": span[1] if span else None,
    }


def _clean_session(value: str, matcher: SecretMatcher) -> str:
    if not isinstance(value, str) or "\x00" in value:
        raise InvalidInput("source_session must be text without NUL characters", field="source_session")
    value = " ".join(value.split())
    if len(value) > MAX_SOURCE_SESSION_CHARS:
        raise InvalidInput(
            f"source_session is limited to {MAX_SOURCE_SESSION_CHARS} characters", field="source_session"
        )
    return scrub(value, matcher).text[:MAX_SOURCE_SESSION_CHARS]


def _run_extractor(
    prepared: PreparedTranscript, matcher: SecretMatcher
) -> tuple[list[Candidate], list[FactCandidate], str]:
    kind = settings.MEMORYHUB_DRAFT_EXTRACTOR
    if kind == "rules":
        return extract_candidates(prepared), extract_fact_candidates(prepared), "rules"
    if kind == "openai":
        extractor = ChatExtractor()
        # The endpoint may take its read timeout and retries: the request's transaction
        # is not held open meanwhile (core.request_transaction).
        with outside_request_transaction():
            candidates, facts = extractor.extract_with_facts(prepared, matcher)
        return candidates, facts, extractor_name()
    raise ExtractorUnavailable(f"unknown draft extractor {kind!r}; use one of: {', '.join(EXTRACTORS)}")


def _one_per_fingerprint(candidates: list[Candidate]) -> dict[str, Candidate]:
    """The candidates by fingerprint, the first of each, in text order."""
    kept: dict[str, Candidate] = {}
    for candidate in candidates:
        kept.setdefault(learning_fingerprint(candidate.type.value, candidate.content), candidate)
    return kept


def _unseen(team: Team, candidates: dict[str, Candidate]) -> list[Candidate]:
    """Candidates not pending for the team already."""
    pending = _pending_by_fingerprint(team, candidates)
    return [candidate for fingerprint, candidate in candidates.items() if fingerprint not in pending]


def _pending_by_fingerprint(team: Team, candidates: dict[str, Candidate]) -> dict[str, Draft]:
    """The team's pending drafts of these fingerprints; a draft made before drafts had a
    fingerprint is found by its exact text, as then."""
    if not candidates:
        return {}
    contents = [c.content for c in candidates.values()]
    rows = Draft.objects.filter(team=team, state=DraftState.PENDING, kind=DraftKind.MEMORY).filter(
        Q(fingerprint__in=list(candidates)) | Q(fingerprint="", content__in=contents)
    )
    found: dict[str, Draft] = {}
    for draft in rows.order_by("created_at"):
        found.setdefault(draft.fingerprint or learning_fingerprint(draft.type, draft.content), draft)
    return found


def _corroborate(pending: list[Draft], session: str) -> list[Draft]:
    """Count one more sighting on each pending draft, but not the same session's again."""
    seen_again = [d for d in pending if not (session and session == d.source_session)]
    if seen_again:
        now = timezone.now()
        Draft.objects.filter(id__in=[d.id for d in seen_again]).update(
            corroborated=F("corroborated") + 1, last_corroborated_at=now
        )
        for draft in seen_again:
            draft.refresh_from_db(fields=["corroborated", "last_corroborated_at"])
    return seen_again


def _excerpt(text: str, span: tuple[int, int]) -> str:
    start, end = span
    start = max(0, min(start, len(text)))
    end = max(start, min(end, len(text), start + MAX_EXCERPT_CHARS))
    return text[start:end].strip()


def _conflict(team: Team, content: str) -> tuple[str, Memory | None]:
    """The draft's conflict with the team's active entries: a duplicate first (the save's
    own check, search.duplicates_on_save), else the nearest entry that disagrees with it."""
    # Drafts become the team's entries: only the team's entries are compared.
    duplicate = find_duplicate(team=team, text=content, key="")
    if duplicate is not None:
        return DraftConflict.DUPLICATE, duplicate.memory
    contradicted = _contradicted(team, content)
    if contradicted is not None:
        return DraftConflict.CONTRADICTION, contradicted
    return DraftConflict.NONE, None


def _contradicted(team: Team, content: str) -> Memory | None:
    """The closest active entry judged contradicting by freshness.contradictions, among
    the contradictions.MAX_CANDIDATES nearest by vector; None without embeddings (the
    check fails open, as the duplicate check does)."""
    try:
        provider = team_provider(team)
        if provider is None or not has_active_vectors(team_id=team.id, model=provider.model):
            return None
        pieces = chunk_text(content)[:1]
        if not pieces:
            return None
        with outside_request_transaction():
            vectors = cached_embeddings(provider, [(p.content_hash, p.text) for p in pieces], team_id=team.id)
    except EmbeddingUnavailable as exc:
        logger.warning("team %s: draft contradiction check skipped: %s", team.slug, exc)
        return None
    query = QueryVector(
        values=vectors[pieces[0].content_hash], model=provider.model, dimensions=provider.dimensions
    )
    filters = SearchFilters(
        team_id=team.id, types=None, project=None, include_superseded=False, same_owner_as=""
    )
    matches = vector_matches(query, filters, limit=contradictions.MAX_CANDIDATES)
    near = {memory_id: similarity for memory_id, similarity, _chunk in matches}
    others = {m.id: m for m in Memory.objects.for_team(team.id).active().filter(id__in=list(near))}
    for memory_id, similarity in sorted(near.items(), key=lambda item: (-item[1], str(item[0]))):
        other = others.get(memory_id)
        if other is None:
            continue
        verdict = contradictions.judge_pair(
            content, other.content, min(similarity, 1.0), duplicate_threshold=team.dedup_threshold
        )
        if verdict.label == contradictions.Label.CONTRADICTING:
            return other
    return None


# --------------------------------------------------------------------------- reads


def list_drafts(*, team: Team, state: str = DraftState.PENDING) -> QuerySet[Draft]:
    """The team's drafts, newest first; pending ones unless `state` says otherwise
    ("all": every state)."""
    if state not in STATE_FILTER_CHOICES:
        raise InvalidInput(f"state must be one of: {', '.join(STATE_FILTER_CHOICES)}", field="state")
    rows = Draft.objects.filter(team=team).select_related("conflict_memory", "memory", "fact")
    if state != ANY_STATE:
        rows = rows.filter(state=state)
    return rows.order_by("-created_at", "-id")


def get_draft(*, team: Team, draft_id: uuid.UUID | str) -> Draft:
    draft = _find(team, draft_id).select_related("conflict_memory", "memory", "fact").first()
    if draft is None:
        raise DraftNotFound("no such draft")
    return draft


def _find(team: Team, draft_id: uuid.UUID | str) -> QuerySet[Draft]:
    try:
        parsed = draft_id if isinstance(draft_id, uuid.UUID) else uuid.UUID(str(draft_id)[:64])
    except ValueError:
        raise DraftNotFound("no such draft") from None
    return Draft.objects.filter(team=team, id=parsed)


def _lock_pending(team: Team, draft_id: uuid.UUID | str) -> Draft:
    draft = _find(team, draft_id).select_for_update().first()
    if draft is None:
        raise DraftNotFound("no such draft")
    if draft.state != DraftState.PENDING:
        raise DraftNotPending(f"the draft was {draft.state} already; only a pending draft is reviewed")
    return draft


# --------------------------------------------------------------------------- review


def accept_draft(
    *,
    team: Team,
    draft_id: uuid.UUID | str,
    actor: str,
    type: str | None = None,
    key: str | None = None,
    content: str | None = None,
    value: str | None = None,
) -> Draft:
    """Store the draft (optionally edited) as a new entry with its provenance. A key that
    has an active entry answers DraftKeyTaken (409): merge the draft into it, or accept it
    under another key; a text another key already holds, DraftIsDuplicate (409). A fact
    draft is set as its fact (`value` edits it) through memories.facts.services.set_fact,
    the one way a fact is written, with the draft as its provenance; a fact that became
    active with another value since answers its FactConflict (409)."""
    type_name = _checked_type(type)
    if key is not None:
        check_key(key)
    with transaction.atomic():
        draft = _lock_pending(team, draft_id)
        if draft.kind == DraftKind.FACT:
            return fact_drafts.accept_fact_draft(team=team, draft=draft, actor=actor, value=value)
        if value is not None:
            raise InvalidInput("`value` edits a fact draft; this draft is a memory", field="value")
        new_key = key if key is not None else draft.key
        new_text = content if content is not None else draft.content
        _check_content(new_text)
        try:
            result = writes.save_memory(
                team=team,
                key=new_key,
                content=new_text,
                updated_by=actor,
                type_name=type_name or draft.type,
                metadata={"draft": _provenance(draft, actor)},
                auto_captured=True,
            )
        except MemoryExists:
            raise DraftKeyTaken(
                f"'{new_key}' already has an active entry; merge the draft into it, or accept it under "
                "another key",
                field="key",
            ) from None
        if not result.saved:
            raise DraftIsDuplicate(
                f"the active entry '{result.memory.key}' already holds this text; merge the draft into it "
                "or reject it",
                existing_key=result.memory.key,
            )
        return _reviewed(draft, DraftState.ACCEPTED, actor, memory=result.memory, key=new_key, text=new_text)


def reject_draft(*, team: Team, draft_id: uuid.UUID | str, actor: str) -> Draft:
    with transaction.atomic():
        draft = _lock_pending(team, draft_id)
        return _reviewed(draft, DraftState.REJECTED, actor, memory=None)


def merge_draft(
    *, team: Team, draft_id: uuid.UUID | str, actor: str, into_key: str, content: str | None = None
) -> Draft:
    """Supersede the active entry of `into_key` with the merged text (`content`, else the
    entry's text, a blank line and the draft's), the reason naming the draft."""
    check_key(into_key)
    with transaction.atomic():
        draft = _lock_pending(team, draft_id)
        if draft.kind == DraftKind.FACT:
            raise InvalidInput(
                "a fact draft is accepted (perhaps edited) or rejected, not merged", field="into_key"
            )
        existing = Memory.objects.for_team(team.id).active().filter(key=into_key).first()
        if existing is None:
            raise MemoryNotFound(
                f"'{into_key}' has no active entry to merge the draft into", field="into_key"
            )
        merged = content if content is not None else f"{existing.content.rstrip()}\n\n{draft.content}"
        _check_content(merged)
        metadata = dict(existing.metadata or {})
        metadata["draft"] = _provenance(draft, actor)
        result = writes.save_memory(
            team=team,
            key=into_key,
            content=merged,
            updated_by=actor,
            supersede_reason=f"merged draft {draft.id}",
            metadata=metadata,
            expected_version=existing.id,
            auto_captured=True,
        )
        return _reviewed(draft, DraftState.MERGED, actor, memory=result.memory, key=into_key)


def _checked_type(name: str | None) -> str | None:
    if name is None:
        return None
    if not isinstance(name, str) or resolve_type(name) is None or not name.strip():
        raise UnknownMemoryType(unknown_type_message(name), field="type")
    return name


def _check_content(text: str) -> None:
    if not isinstance(text, str) or "\x00" in text or not text.strip():
        raise InvalidInput("content must be non-empty text without NUL characters", field="content")


def _provenance(draft: Draft, reviewer: str) -> dict[str, Any]:
    """What the stored version records of where it came from (its metadata's `draft`)."""
    return {
        "draft": str(draft.id),
        "source_session": draft.source_session,
        "extractor": draft.extractor,
        "reviewed_by": reviewer[:200],
        "corroborated": draft.corroborated,
        **(
            {
                "conversation": str(draft.source_conversation),
                "first_line": draft.source_first_line,
                "last_line": draft.source_last_line,
            }
            if draft.source_conversation
            else {}
        ),
    }


def _reviewed(
    draft: Draft, state: str, actor: str, *, memory: Memory | None, key: str = "", text: str = ""
) -> Draft:
    draft.state = state
    draft.reviewed_at = timezone.now()
    draft.reviewed_by = actor[:200]
    draft.memory = memory
    fields = ["state", "reviewed_at", "reviewed_by", "memory"]
    if state == DraftState.ACCEPTED and memory is not None:
        # The draft says what was stored: the edited key, type and text.
        draft.key, draft.type, draft.content = key, memory.type, memory.content
        fields += ["key", "type", "content"]
    draft.save(update_fields=fields)
    return draft


def delete_team_drafts(*, team: Team) -> dict[str, int]:
    """Receiver of teams.hooks.team_shutdown (inside the team's scope)."""
    return {"drafts": Draft.objects.filter(team=team).delete()[0]}
