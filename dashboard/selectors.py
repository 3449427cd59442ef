"""Reads behind the dashboard pages that are more than one line. Every function takes
the team explicitly; the caller is inside the team's scope (`team_page`)."""

from __future__ import annotations

import difflib
import re
import uuid
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from django.conf import settings
from django.db.models import Count, DateField, Q, QuerySet
from django.db.models.functions import TruncDate, TruncWeek
from django.utils import timezone

from core.errors import NotFound
from freshness.models import (
    AnchorCheck,
    AnchorCheckSource,
    Draft,
    DraftState,
    Nudge,
    NudgeKind,
    NudgeState,
)
from memories.exceptions import MemoryNotFound
from memories.freshness import FreshnessWindows, due_condition
from memories.metadata_extraction import metadata_filter_q
from memories.models import Confirmation, IndexState, Memory, MemoryState
from memories.selectors import HistoryEvent, history_events, list_memory_versions, recent_history
from memories.types import MemoryType
from teams.models import AuditEvent, JobRun, Membership, Team
from teams.scope import own_memberships_scope

# --- the team picker ---------------------------------------------------------


def list_user_memberships(*, user_id: int) -> list[Membership]:
    """The signed-in person's teams, by name. Reads only that person's membership
    rows (own_memberships_scope), never another team's anything."""
    with own_memberships_scope(user_id):
        return list(
            Membership.objects.select_related("team")
            .filter(user_id=user_id)
            .order_by("team__name", "team__slug")
        )


# --- overview ----------------------------------------------------------------


@dataclass
class TypeCounts:
    type: str
    active: int = 0
    superseded: int = 0
    deleted: int = 0

    @property
    def total(self) -> int:
        return self.active + self.superseded + self.deleted


def memory_counts(*, team: Team) -> list[TypeCounts]:
    """Versions by canonical type and state, every type listed (zeros included)."""
    rows = (
        Memory.objects.for_team(team.id)
        .values("type")
        .annotate(
            active=Count("id", filter=MemoryState.ACTIVE.condition()),
            superseded=Count("id", filter=MemoryState.SUPERSEDED.condition()),
            deleted=Count("id", filter=MemoryState.DELETED.condition()),
        )
        .order_by()
    )
    by_type = {
        row["type"]: TypeCounts(
            type=row["type"], active=row["active"], superseded=row["superseded"], deleted=row["deleted"]
        )
        for row in rows
    }
    return [by_type.get(memory_type, TypeCounts(type=memory_type)) for memory_type in MemoryType.values]


def index_health(*, team: Team) -> dict[str, int]:
    """How many searchable versions (active or superseded) are in each index state."""
    rows = (
        Memory.objects.for_team(team.id)
        .filter(deleted_at__isnull=True)
        .values("index_state")
        .annotate(n=Count("id"))
        .order_by()
    )
    health = dict.fromkeys(IndexState.values, 0)
    health.update({row["index_state"]: row["n"] for row in rows})
    return health


@dataclass(frozen=True)
class FailedIndexEntry:
    key: str
    attempts: int
    last_error: str  # an exception class name, never its message (it may name internal URLs)
    next_attempt_at: datetime | None
    given_up: bool  # reached MEMORYHUB_INDEX_MAX_ATTEMPTS: only "retry" brings it back


def failed_index_entries(*, team: Team, limit: int = 10) -> list[FailedIndexEntry]:
    """The team's live versions whose last indexing failed, those given up on first."""
    rows = (
        Memory.objects.for_team(team.id)
        .filter(deleted_at__isnull=True, index_state=IndexState.FAILED)
        .order_by("-index_attempts", "key")
        .values_list("key", "index_attempts", "index_last_error", "index_next_attempt_at")[:limit]
    )
    max_attempts = settings.MEMORYHUB_INDEX_MAX_ATTEMPTS
    return [
        FailedIndexEntry(
            key=key,
            attempts=attempts,
            last_error=last_error or "unknown",
            next_attempt_at=None if attempts >= max_attempts else next_attempt_at,
            given_up=attempts >= max_attempts,
        )
        for key, attempts, last_error, next_attempt_at in rows
    ]


def writes_per_day(*, team: Team, days: int = 30, today: date | None = None) -> list[tuple[date, int]]:
    """Versions written (saves, supersedes, unsupersedes) plus deletions per UTC day,
    for the last `days` days, oldest first, days without writes included as 0."""
    today = today or timezone.now().date()
    first = today - timedelta(days=days - 1)
    start = datetime.combine(first, datetime.min.time(), tzinfo=timezone.get_current_timezone())
    counts: dict[date, int] = dict.fromkeys((first + timedelta(days=n) for n in range(days)), 0)
    memories = Memory.objects.for_team(team.id)
    saved = (
        memories.filter(created_at__gte=start)
        .annotate(day=TruncDate("created_at"))
        .values("day")
        .annotate(n=Count("id"))
        .order_by()
    )
    deleted = (
        memories.filter(deleted_at__gte=start)
        .annotate(day=TruncDate("deleted_at"))
        .values("day")
        .annotate(n=Count("id"))
        .order_by()
    )
    for row in [*saved, *deleted]:
        if row["day"] in counts:
            counts[row["day"]] += row["n"]
    return sorted(counts.items())


def recent_changes(*, team: Team, limit: int = 10) -> list[HistoryEvent]:
    """The newest writes of the team: each saved version and each deletion."""
    return recent_history(team=team, limit=limit)


# --- memory browser ----------------------------------------------------------


def browse_memories(
    *,
    team: Team,
    memory_type: str | None = None,
    project: str | None = None,
    state: str = "active",
    tags: list[str] | None = None,
) -> QuerySet[Memory]:
    """Versions of the team in one state (or every state), newest first."""
    rows = Memory.objects.for_team(team.id).in_state(state)
    if memory_type:
        rows = rows.filter(type=memory_type)
    if project:
        rows = rows.filter(project=project)
    rows = rows.filter(metadata_filter_q(tags))
    return rows.order_by("-created_at", "-id")


def list_projects(*, team: Team, limit: int = 200) -> list[str]:
    """Project names in use (for the filter's suggestions)."""
    return list(
        Memory.objects.for_team(team.id)
        .exclude(project="")
        .values_list("project", flat=True)
        .distinct()
        .order_by("project")[:limit]
    )


# --- memory detail -----------------------------------------------------------


@dataclass(frozen=True)
class DiffPart:
    op: str  # equal / insert / delete
    text: str


@dataclass
class TimelineEntry:
    event: HistoryEvent
    previous: Memory | None = None
    diff: list[DiffPart] = field(default_factory=list)
    added_words: int = 0
    removed_words: int = 0


# Versions of a key per page of its timeline: each one brings a word diff.
TIMELINE_PAGE_SIZE = 20


@dataclass
class KeyStory:
    key: str
    current: Memory | None  # the active version, None when the key is deleted
    latest: Memory  # the newest version, whatever its state
    timeline: list[TimelineEntry]  # one page, newest first
    older_than: uuid.UUID | None  # the page starts below this version (None: the newest)
    next_older_than: uuid.UUID | None  # the cursor of the next, older page (None: no more)


def key_story(
    *, team: Team, key: str, older_than: uuid.UUID | None = None, page_size: int = TIMELINE_PAGE_SIZE
) -> KeyStory:
    """A page of the key's supersede timeline (newest first, the versions saved before
    `older_than` when given) with a word diff of each version against the one it
    replaced. Raises MemoryNotFound for a key never saved, or a cursor not of this key."""
    versions = list_memory_versions(team=team, key=key)
    latest = versions.first()
    if latest is None:  # deleted since list_memory_versions looked
        raise MemoryNotFound("no memory was ever saved under this key")
    current = versions.filter(is_active=True).first()
    page_rows = versions
    if older_than is not None:
        anchor = versions.filter(id=older_than).first()
        if anchor is None:
            raise MemoryNotFound("no such version of this key")
        page_rows = versions.filter(
            Q(created_at__lt=anchor.created_at) | Q(created_at=anchor.created_at, id__lt=anchor.id)
        )
    page = list(page_rows[: page_size + 1])
    next_older_than = page[page_size - 1].id if len(page) > page_size else None
    page = page[:page_size]
    # What each version replaced: on this page, or just below it, or under another key
    # (a longer duplicate saved under a new key replaces an entry of another key).
    replaced_ids = {m.supersedes_id for m in page if m.supersedes_id} - {m.id for m in page}
    known = {m.id: m for m in page}
    known.update((m.id, m) for m in Memory.objects.for_team(team.id).filter(id__in=replaced_ids))
    timeline = []
    for event in history_events(page, page):
        entry = TimelineEntry(event=event)
        supersedes_id = event.memory.supersedes_id
        previous = known.get(supersedes_id) if supersedes_id and event.kind != "deleted" else None
        if previous is not None:
            entry.previous = previous
            entry.diff = word_diff(previous.content, event.memory.content)
            entry.added_words = sum(len(p.text.split()) for p in entry.diff if p.op == "insert")
            entry.removed_words = sum(len(p.text.split()) for p in entry.diff if p.op == "delete")
        timeline.append(entry)
    return KeyStory(
        key=key,
        current=current,
        latest=latest,
        timeline=timeline,
        older_than=older_than,
        next_older_than=next_older_than,
    )


def key_version(*, team: Team, key: str, version_id: uuid.UUID) -> Memory:
    """One version of the key. Raises MemoryNotFound."""
    version = Memory.objects.for_team(team.id).filter(key=key, id=version_id).first()
    if version is None:
        raise MemoryNotFound("no such version of this key")
    return version


_WORDS = re.compile(r"\s+|\w+|[^\w\s]+")
# Above this many token comparisons a word diff gets slow; diff whole lines instead.
MAX_WORD_DIFF_WORK = 4_000_000


def word_diff(old: str, new: str) -> list[DiffPart]:
    """What changed from `old` to `new`, word by word (whitespace kept), as runs of
    equal, deleted and inserted text. Long texts are compared line by line."""
    a, b = _WORDS.findall(old), _WORDS.findall(new)
    if len(a) * len(b) > MAX_WORD_DIFF_WORK:
        a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    opcodes = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    parts: list[DiffPart] = []
    deleted: list[str] = []
    inserted: list[str] = []

    def flush() -> None:
        if deleted:
            parts.append(DiffPart("delete", "".join(deleted)))
        if inserted:
            parts.append(DiffPart("insert", "".join(inserted)))
        deleted.clear()
        inserted.clear()

    for index, (tag, i1, i2, j1, j2) in enumerate(opcodes):
        if tag == "equal":
            # A lone space between two changes reads better inside the change:
            # "<del>old script</del><ins>new pipeline</ins>", not word by word.
            between_changes = 0 < index < len(opcodes) - 1 and (deleted or inserted)
            if between_changes and not "".join(a[i1:i2]).strip():
                deleted.extend(a[i1:i2])
                inserted.extend(b[j1:j2])
                continue
            flush()
            parts.append(DiffPart("equal", "".join(a[i1:i2])))
            continue
        deleted.extend(a[i1:i2])
        inserted.extend(b[j1:j2])
    flush()
    return parts


# --- audit log ---------------------------------------------------------------


def list_audit_events(*, team: Team) -> QuerySet[AuditEvent]:
    return AuditEvent.objects.filter(team=team).order_by("-created_at", "-id")


# --- freshness: the review queue and the overview's panel ---------------------

# The queue's order: what most needs a person first (as injection's "Please review").
REVIEW_KIND_ORDER: list[str] = [
    NudgeKind.CONTRADICTION,
    NudgeKind.FACT_CONTRADICTION,
    NudgeKind.ANCHOR_BROKEN,
    NudgeKind.DUE,
    NudgeKind.PRUNE,
]
REVIEW_PAGE_SIZE = 20
# The nav shows the open count up to here, then "N+": a team with a big backlog costs
# one bounded count per page, not a count of every open nudge.
OPEN_COUNT_CAP = 99


@dataclass
class ReviewPage:
    nudges: list[Nudge]
    next_after: uuid.UUID | None  # the cursor of the next page (None: no more)


def review_queue(
    *, team: Team, after: uuid.UUID | None = None, page_size: int = REVIEW_PAGE_SIZE
) -> ReviewPage:
    """A page of the team's open nudges: contradictions, then broken anchors, due entries
    and prune proposals, newest first within each kind. Keyset paging: `after` is the
    last nudge of the previous page (any state, so resolving items of a page does not
    lose the place). At most one query per kind, each bounded by the page. Raises
    NotFound for a cursor that is no nudge of this team."""
    start_kind, position = 0, None
    if after is not None:
        cursor = Nudge.objects.filter(team=team, id=after).values("kind", "created_at", "id").first()
        if cursor is None or cursor["kind"] not in REVIEW_KIND_ORDER:
            raise NotFound("no such nudge")
        start_kind = REVIEW_KIND_ORDER.index(cursor["kind"])
        position = cursor
    open_nudges = Nudge.objects.filter(team=team, state=NudgeState.OPEN).select_related(
        "memory", "other_memory", "fact"
    )
    page: list[Nudge] = []
    for kind in REVIEW_KIND_ORDER[start_kind:]:
        rows = open_nudges.filter(kind=kind)
        if position is not None and kind == position["kind"]:
            rows = rows.filter(
                Q(created_at__lt=position["created_at"])
                | Q(created_at=position["created_at"], id__lt=position["id"])
            )
        # One more than fits tells whether a next page exists.
        page.extend(rows.order_by("-created_at", "-id")[: page_size + 1 - len(page)])
        if len(page) > page_size:
            break
    has_more = len(page) > page_size
    page = page[:page_size]
    return ReviewPage(nudges=page, next_after=page[-1].id if has_more else None)


# Pending drafts shown on the queue's first page (reviewing some brings up the next).
REVIEW_DRAFTS_SHOWN = 10


@dataclass
class ReviewDrafts:
    drafts: list[Draft]
    pending: int  # how many drafts are pending in all, counted up to OPEN_COUNT_CAP + 1


def review_drafts(*, team: Team, shown: int = REVIEW_DRAFTS_SHOWN) -> ReviewDrafts:
    """The oldest pending drafts first (they have waited longest), with the entry each
    one conflicts with; and the bounded count of every pending draft."""
    pending = Draft.objects.filter(team=team, state=DraftState.PENDING)
    drafts = list(pending.select_related("conflict_memory").order_by("created_at", "id")[:shown])
    count = len(drafts) if len(drafts) < shown else pending.order_by()[: OPEN_COUNT_CAP + 1].count()
    return ReviewDrafts(drafts=drafts, pending=count)


def open_review_count(*, team: Team, cap: int = OPEN_COUNT_CAP) -> int:
    """How many items wait in the team's review queue (open nudges and pending drafts),
    counting at most `cap` + 1: two bounded counts."""
    nudges = Nudge.objects.filter(team=team, state=NudgeState.OPEN).order_by()[: cap + 1].count()
    if nudges > cap:
        return nudges
    return (
        nudges
        + Draft.objects.filter(team=team, state=DraftState.PENDING).order_by()[: cap + 1 - nudges].count()
    )


@dataclass(frozen=True)
class FreshnessCounts:
    """Active entries by freshness state (memories.freshness.Freshness's values)."""

    fresh: int
    due: int
    anchor_broken: int
    contradicted: int

    @property
    def total(self) -> int:
        return self.fresh + self.due + self.anchor_broken + self.contradicted


@dataclass(frozen=True)
class JobRunSummary:
    """A beat job's last run as one team sees it: when, how it ended, and what it did in
    this team (the run's own counts span every team, so they stay in the admin)."""

    label: str
    run: JobRun | None
    team_outcome: str  # e.g. "3 due nudges opened"; "" when the job has no per-team trace


# MemoryHub's freshness jobs in the order the panel lists them, with what each leaves in
# a team's rows during a run (counted between the run's start and finish).
FRESHNESS_JOBS: list[tuple[str, str]] = [
    ("freshness.mark_due", "Mark entries due"),
    ("freshness.check_anchors", "Check anchors"),
    ("freshness.propose_prunes", "Propose archiving"),
    ("agents.expire_sessions", "Expire sessions"),
]


def freshness_job_runs(*, team: Team) -> list[JobRunSummary]:
    """The last run of each freshness job: at most two queries per job."""
    summaries = []
    for job, label in FRESHNESS_JOBS:
        run = JobRun.objects.filter(job=job).order_by("-started_at", "-id").first()
        outcome = _team_outcome(team, job, run.started_at, run.finished_at) if run and run.finished_at else ""
        summaries.append(JobRunSummary(label=label, run=run, team_outcome=outcome))
    return summaries


def _team_outcome(team: Team, job: str, started_at: datetime, finished_at: datetime) -> str:
    window = (started_at, finished_at)
    if job in ("freshness.mark_due", "freshness.propose_prunes"):
        kind, what = (NudgeKind.DUE, "due") if job == "freshness.mark_due" else (NudgeKind.PRUNE, "archive")
        opened = Nudge.objects.filter(team=team, kind=kind, created_at__range=window).count()
        return f"{opened} {what} nudge{'' if opened == 1 else 's'} opened here"
    if job == "freshness.check_anchors":
        checks = AnchorCheck.objects.filter(
            team=team, source=AnchorCheckSource.SERVER, checked_at__range=window
        ).aggregate(checked=Count("id"), broken=Count("id", filter=Q(ok=False)))
        return f"{checks['checked']} anchors checked here, {checks['broken']} broken"
    return ""


def freshness_counts(*, team: Team, now: datetime | None = None) -> FreshnessCounts:
    """Active entries by freshness state (memories.freshness: the first of contradicted,
    anchor_broken, due that holds, else fresh), in one aggregate query."""
    now = now or timezone.now()
    unflagged = Q(contradicted_at__isnull=True, anchor_broken_at__isnull=True)
    row = (
        Memory.objects.for_team(team.id)
        .active()
        .aggregate(
            total=Count("id"),
            contradicted=Count("id", filter=Q(contradicted_at__isnull=False)),
            anchor_broken=Count("id", filter=Q(contradicted_at__isnull=True, anchor_broken_at__isnull=False)),
            due=Count("id", filter=unflagged & due_condition(FreshnessWindows.for_team(team), now)),
        )
    )
    flagged = row["contradicted"] + row["anchor_broken"] + row["due"]
    return FreshnessCounts(
        fresh=row["total"] - flagged,
        due=row["due"],
        anchor_broken=row["anchor_broken"],
        contradicted=row["contradicted"],
    )


def confirmations_per_week(
    *, team: Team, weeks: int = 12, today: date | None = None
) -> list[tuple[date, int]]:
    """Distinct entries confirmed per week (weeks start on Monday, UTC) for the last
    `weeks` weeks including this one, oldest first, weeks without any as 0."""
    today = today or timezone.now().date()
    this_week = today - timedelta(days=today.weekday())
    first = this_week - timedelta(weeks=weeks - 1)
    start = datetime.combine(first, datetime.min.time(), tzinfo=timezone.get_current_timezone())
    counts: dict[date, int] = {first + timedelta(weeks=n): 0 for n in range(weeks)}
    rows = (
        Confirmation.objects.filter(team=team, confirmed_at__gte=start)
        .annotate(week=TruncWeek("confirmed_at", output_field=DateField()))
        .values("week")
        .annotate(n=Count("memory", distinct=True))
        .order_by()
    )
    for row in rows:
        if row["week"] in counts:
            counts[row["week"]] = row["n"]
    return sorted(counts.items())
