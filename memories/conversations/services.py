"""Every write of a conversation: store one (scrubbed, bounded, within the team's quota),
delete one, delete a team's, and the retention sweep (docs/conversations.md)."""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.errors import InvalidInput
from core.locks import advisory_xact_lock
from memories import hooks
from memories.conversations.exceptions import ConversationNotFound, TranscriptTooLarge
from memories.conversations.models import (
    MAX_LINES,
    MAX_SESSION_CHARS,
    MAX_TITLE_CHARS,
    MAX_TRANSCRIPT_CHARS,
    Conversation,
    ConversationLine,
    ConversationSource,
    is_role,
)
from teams.models import Team
from teams.scope import team_scope
from teams.scrubber import SecretMatcher, scrub
from teams.services import check_quota
from teams.vault_matcher import team_secret_matcher

logger = logging.getLogger("memories.conversations")


@dataclass(frozen=True)
class Line:
    role: str
    text: str


def check_lines(lines: Sequence[Line]) -> None:
    """At least one line, at most MAX_LINES, MAX_TRANSCRIPT_CHARS of text in all (413
    beyond either), each a known role shape and text without NUL characters (400)."""
    if not lines:
        raise InvalidInput("a conversation has at least one line", field="lines")
    if len(lines) > MAX_LINES:
        raise TranscriptTooLarge(f"a conversation holds at most {MAX_LINES} lines", field="lines")
    total = 0
    for number, line in enumerate(lines, start=1):
        if not is_role(line.role):
            raise InvalidInput(
                f"line {number}: role is 1-32 lowercase letters, digits, _ and -, starting with a letter",
                field="lines",
            )
        if not isinstance(line.text, str) or "\x00" in line.text:
            raise InvalidInput(f"line {number}: text must be text without NUL characters", field="lines")
        total += len(line.text)
    if total > MAX_TRANSCRIPT_CHARS:
        raise TranscriptTooLarge(
            f"a conversation holds at most {MAX_TRANSCRIPT_CHARS} characters of text", field="lines"
        )


def _clean_label(value: str, name: str, limit: int, matcher: SecretMatcher) -> str:
    if not isinstance(value, str) or "\x00" in value:
        raise InvalidInput(f"{name} must be text without NUL characters", field=name)
    value = " ".join(value.split())
    if len(value) > limit:
        raise InvalidInput(f"{name} is limited to {limit} characters", field=name)
    return scrub(value, matcher).text[:limit]


def store_conversation(
    *,
    team: Team,
    lines: Sequence[Line],
    actor: str,
    session: str = "",
    title: str = "",
    source: str = ConversationSource.API,
    started_at: dt.datetime | None = None,
    ended_at: dt.datetime | None = None,
    created_at: dt.datetime | None = None,
    imported_from: dict[str, str] | None = None,
) -> Conversation:
    """Store a transcript as a conversation of the team. Every line's text (and the
    title and session) is scrubbed of credentials and the team's vault secrets first:
    nothing the scrubber would redact is ever stored. Refused past the team's quota of
    conversations (409), past the size bounds (413), on bad lines (400). Its lines are
    indexed for search after commit (memories.hooks.conversation_stored)."""
    check_lines(lines)
    if source not in ConversationSource.values:
        raise InvalidInput(f"source must be one of: {', '.join(ConversationSource.values)}", field="source")
    if started_at is not None and ended_at is not None and ended_at < started_at:
        raise InvalidInput("ended_at is before started_at", field="ended_at")
    matcher = team_secret_matcher(team_id=team.id)
    redactions: Counter[str] = Counter()
    rows: list[ConversationLine] = []
    chars = 0
    for number, line in enumerate(lines, start=1):
        scrubbed = scrub(line.text, matcher)
        redactions.update(scrubbed.redactions)
        chars += len(scrubbed.text)
        rows.append(ConversationLine(team=team, number=number, role=line.role, text=scrubbed.text))
    conversation = Conversation(
        team=team,
        session=_clean_label(session, "session", MAX_SESSION_CHARS, matcher),
        title=_clean_label(title, "title", MAX_TITLE_CHARS, matcher),
        source=source,
        started_at=started_at,
        ended_at=ended_at,
        created_by=actor[:200],
        line_count=len(rows),
        char_count=chars,
        redactions=dict(redactions),
        imported_from=imported_from,
    )
    if created_at is not None:
        conversation.created_at = created_at
    with transaction.atomic():
        # Two stores at once cannot both take the quota's last place.
        advisory_xact_lock(f"conversation-quota:{team.id}")
        check_quota(
            team=team,
            quota="conversations",
            used=Conversation.objects.filter(team=team).count(),
            limit=settings.MEMORYHUB_QUOTA_CONVERSATIONS,
            what="conversations",
        )
        conversation.save(force_insert=True)
        for row in rows:
            row.conversation = conversation
        ConversationLine.objects.bulk_create(rows, batch_size=1000)
        hooks.conversation_stored.call(team_id=team.id, conversation_id=conversation.id)
    if redactions:
        logger.warning(
            "redacted %s from conversation %s of team %s", dict(redactions), conversation.id, team.slug
        )
    return conversation


def parse_conversation_id(value: uuid.UUID | str) -> uuid.UUID:
    try:
        return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value)[:64])
    except ValueError:
        raise ConversationNotFound("no such conversation") from None


def delete_conversation(*, team: Team, conversation_id: uuid.UUID | str) -> None:
    """Delete a conversation, its lines and (by cascade) its chunks; 404 if the team has none by that id."""
    parsed = parse_conversation_id(conversation_id)
    with transaction.atomic():
        deleted, _ = Conversation.objects.filter(team=team, id=parsed).delete()
    if not deleted:
        raise ConversationNotFound("no such conversation")


def delete_expired_conversations(*, team: Team, now: dt.datetime | None = None, limit: int) -> int:
    """Delete at most `limit` of the team's conversations stored more than its retention
    ago, oldest first (the caller is inside the team's scope). Returns how many went."""
    cutoff = (now or timezone.now()) - dt.timedelta(days=team.conversation_retention_days)
    expired = list(
        Conversation.objects.filter(team=team, created_at__lt=cutoff)
        .order_by("created_at", "id")
        .values_list("id", flat=True)[:limit]
    )
    if not expired:
        return 0
    Conversation.objects.filter(team=team, id__in=expired).delete()
    return len(expired)


def delete_team_conversations(*, team: Team) -> dict[str, int]:
    """Every conversation of a team (a receiver of teams.hooks.team_shutdown; the caller
    is inside the team's scope)."""
    lines = ConversationLine.objects.filter(team=team).delete()[0]
    return {"conversations": Conversation.objects.filter(team=team).delete()[0], "conversation_lines": lines}


@dataclass
class RetentionRun:
    """One run of the retention job: conversations `deleted`, `teams` visited, `errors`
    teams whose pass failed (logged, tried again next run), and the team the next run
    goes on from (0: the first)."""

    deleted: int = 0
    teams: int = 0
    errors: int = 0
    resume_after_team: int = 0

    def as_dict(self) -> dict[str, int]:
        return {
            "deleted": self.deleted,
            "teams": self.teams,
            "errors": self.errors,
            "resume_after_team": self.resume_after_team,
        }


def delete_expired_everywhere(*, start_after_team: int = 0, budget: int | None = None) -> RetentionRun:
    """The retention job: every team in id order from after `start_after_team` (wrapping
    around once), each in its own scope and transaction, until `budget` conversations
    (MEMORYHUB_CONVERSATION_RETENTION_BATCH) were deleted. A team that fails is logged
    and counted; the others go on. A run that stops at the budget says where the next
    one goes on, so one team's backlog never starves the others."""
    budget = settings.MEMORYHUB_CONVERSATION_RETENTION_BATCH if budget is None else budget
    run = RetentionRun()
    # The teams table is not team-scoped: listing ids needs no bypass.
    team_ids = list(Team.objects.order_by("id").values_list("id", flat=True))
    ordered = [t for t in team_ids if t > start_after_team] + [t for t in team_ids if t <= start_after_team]
    for team_id in ordered:
        if run.deleted >= budget:
            # The team before this one was the last visited: go on from here next time.
            run.resume_after_team = ordered[ordered.index(team_id) - 1] if ordered.index(team_id) else 0
            break
        run.teams += 1
        try:
            with team_scope(team_id):
                team = Team.objects.get(id=team_id)
                run.deleted += delete_expired_conversations(team=team, limit=budget - run.deleted)
        except Exception:
            logger.exception("conversation retention: team %s failed", team_id)
            run.errors += 1
    return run


# A transcript sent as one text (the drafts' input): a line starting "<role>: " opens a
# turn of that role; the lines after it, up to the next such line, are that turn's text.
TRANSCRIPT_ROLES = ("user", "assistant", "system", "tool", "human", "ai")
# Text before the first turn (notes, a heading) is a line of this role.
NOTE_ROLE = "note"


def bounded_transcript(text: str) -> str:
    """`text` within MAX_TRANSCRIPT_CHARS: cut after the last line break before the cap
    (else the last blank), as the draft extractors cut it (a cut token could be a
    credential the scrubber no longer recognises)."""
    if len(text) <= MAX_TRANSCRIPT_CHARS:
        return text
    head = text[:MAX_TRANSCRIPT_CHARS]
    line_break = head.rfind("\n")
    cut = line_break + 1 if line_break >= 0 else max(head.rfind(" "), head.rfind("\t"), 0)
    return text[:cut]


def lines_from_transcript(text: str) -> list[Line]:
    """The turns of a transcript sent as one text ("user: ..." / "assistant: ..."
    paragraphs, as the client's hooks send it), at most MAX_LINES (the last turns past
    it are joined into the last line). Empty turns are left out."""
    turns: list[tuple[str, list[str]]] = []
    for raw in bounded_transcript(text).split("\n"):
        role, separator, rest = raw.partition(": ")
        if separator and role in TRANSCRIPT_ROLES:
            turns.append((role, [rest]))
        elif turns:
            turns[-1][1].append(raw)
        else:
            turns.append((NOTE_ROLE, [raw]))
    lines = [Line(role=role, text="\n".join(parts).strip()) for role, parts in turns]
    lines = [line for line in lines if line.text]
    if len(lines) > MAX_LINES:
        tail = "\n\n".join(f"{line.role}: {line.text}" for line in lines[MAX_LINES - 1 :])
        lines = [*lines[: MAX_LINES - 1], Line(role=NOTE_ROLE, text=tail)]
    return lines


def lines_holding(lines: Sequence[Line], excerpt: str) -> tuple[int, int] | None:
    """The first and last line numbers (from 1) of the lines that hold the start and the
    end of `excerpt` (a draft's source excerpt, "role: text" possibly), or None when no
    line holds its start. Plain substring search: linear in the lines' text."""
    words = " ".join(excerpt.split())
    role, separator, rest = words.partition(": ")
    if separator and role in TRANSCRIPT_ROLES:
        words = rest
    if not words:
        return None
    head, tail = words[:40], words[-40:]
    normalised = [" ".join(line.text.split()) for line in lines]
    first = next((n for n, text in enumerate(normalised, start=1) if head in text), None)
    if first is None:
        return None
    last = next((n for n, text in enumerate(normalised[first - 1 :], start=first) if tail in text), first)
    return first, last
