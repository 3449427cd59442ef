"""Anchored verification: checking anchors, recording checks, flagging.

- `check_anchors`: the beat job. Every team in its own scope (freshness.sweeps.sweep_teams,
  with the resume cursor) yields its active entries with a `url` or `api` anchor not
  checked for MEMORYHUB_ANCHOR_CHECK_INTERVAL_SECONDS, never-checked first, at most
  MEMORYHUB_ANCHOR_CHECK_BATCH per run across teams. The fetches run outside any
  transaction, on a small thread pool, at most MEMORYHUB_ANCHOR_PER_HOST at once per
  host, each through freshness.anchor_http (the SSRF guard); a host that timed out,
  refused or answered 429/5xx is backed off (exponential, capped, in the cache shared by
  every process) and its anchors are skipped until then. The results are recorded in
  each team's scope again.
- One anchor's failure is that anchor's outcome, never the run's. Every stored anchor is
  held to the rule every save uses (memories.anchors.normalise_anchor) before anything
  is built or resolved: one it refuses (stored before the rule existed) is a failed
  check saying why, never fetched. An unexpected exception while one anchor is checked
  is that anchor's failed check ("check error (Type)"), logged with its team and entry.
  Recording falls back to one anchor at a time when a team's batch fails.
- `record_checks`: what the job and a client's file report (`POST anchors/report/`)
  share: an AnchorCheck row per check (the newest KEEP per entry kept), then the flag
  rule: MEMORYHUB_ANCHOR_FAILURES_TO_FLAG failed checks in a row flag the entry
  `anchor_broken` (memories.writes.set_freshness_flag: an UPDATE, no new version,
  updated_at stays) and open one `anchor_broken` nudge (the open-nudge constraint keeps
  it one); an ok check lowers the flag and resolves the open nudge.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, ClassVar

from django.conf import settings
from django.core.cache import cache
from django.db.models import F, OuterRef, Q, Subquery, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from freshness.anchor_http import CheckResult, FetchPolicy, check_anchor_url, guarded_client
from freshness.models import AnchorCheck, AnchorCheckSource, Nudge, NudgeAction, NudgeKind, NudgeState
from freshness.sweeps import TeamSweep, sweep_teams
from memories import writes
from memories.anchor_urls import host_and_port, vetted_anchor_url
from memories.anchors import InvalidAnchor, normalise_anchor
from memories.models import Memory
from teams.models import Team
from teams.scope import team_scope

logger = logging.getLogger(__name__)

SERVER_ANCHOR_TYPES = ("url", "api")
# Rows read per run to find `batch` anchors whose host is not backed off.
LOOKAHEAD = 4
BACKOFF_KEY = "freshness:anchor-backoff:"
CHECKED_BY = "anchor check"


@dataclass
class AnchorRun(TeamSweep):
    """One run of the anchor job: `checked` anchors with an outcome, of which `ok` and
    `broken`; of the broken, `invalid` anchors the anchor rule refuses (never fetched);
    `flagged` / `unflagged` entries whose flag changed; `skipped` anchors due but left
    for a later run (their host backed off, or the run's time was up); `errors` teams
    whose selection or recording failed, and anchors whose check or recording raised
    (each logged with its team, retried next run)."""

    ok: int = 0
    broken: int = 0
    invalid: int = 0
    flagged: int = 0
    unflagged: int = 0
    skipped: int = 0
    OPENED_NAME: ClassVar[str] = "flagged"

    def as_dict(self) -> dict[str, int]:
        return {
            "checked": self.checked,
            "ok": self.ok,
            "broken": self.broken,
            "invalid": self.invalid,
            "flagged": self.flagged,
            "unflagged": self.unflagged,
            "skipped": self.skipped,
            "errors": self.errors,
            "teams": self.teams,
            "resume_after_team": self.resume_after_team,
        }


@dataclass(frozen=True)
class Candidate:
    """A due anchor: its URL and `host` (host:port) once the anchor rule took it, or
    `refused`, what a check of it records when it is not fetched: the rule refused it,
    or (`error`) reading it raised."""

    team_id: int
    memory_id: uuid.UUID
    url: str
    expect: int | str | None
    host: str
    refused: str = ""
    error: bool = False


@dataclass
class Recorded:
    """What record_checks did: rows written, flags raised and lowered."""

    recorded: int = 0
    flagged: int = 0
    unflagged: int = 0
    ignored: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------- the job


def check_anchors(
    *,
    now: dt.datetime | None = None,
    limit: int | None = None,
    start_after_team: int = 0,
    policy: FetchPolicy | None = None,
) -> AnchorRun:
    now = now or timezone.now()
    policy = policy or FetchPolicy.from_settings()
    run = AnchorRun()
    due: dict[int, list[Candidate]] = {}

    def visit(team_id: int, budget: int) -> tuple[int, int]:
        found, skipped = _due_anchors(team_id, now=now, budget=budget, policy=policy)
        due[team_id] = found
        run.skipped += skipped
        return len(found), 0

    sweep_teams(
        run,
        job="anchors",
        budget=settings.MEMORYHUB_ANCHOR_CHECK_BATCH if limit is None else limit,
        start_after_team=start_after_team,
        visit=visit,
    )
    run.checked = 0  # the sweep counted anchors selected; from here, anchors fetched
    candidates = [c for found in due.values() for c in found]
    results = _fetch_all(candidates, policy, run)
    by_team: dict[int, list[tuple[uuid.UUID, CheckResult]]] = defaultdict(list)
    for candidate, result in results:
        by_team[candidate.team_id].append((candidate.memory_id, result))
        run.checked += 1
        run.ok += result.ok
        run.broken += not result.ok
        run.invalid += bool(candidate.refused) and not candidate.error
        run.errors += candidate.error
    for team_id in sorted(by_team):
        _record_team(team_id, by_team[team_id], now=now, run=run)
    logger.info("anchor job: %s", run.as_dict())
    return run


def _record_team(
    team_id: int, results: list[tuple[uuid.UUID, CheckResult]], *, now: dt.datetime, run: AnchorRun
) -> None:
    """Record a team's results in one transaction; when that fails, each anchor's in a
    transaction of its own, so one entry that cannot be recorded costs only its own."""
    try:
        recorded = _record(team_id, results, now=now)
    except Exception:
        logger.exception("anchor job: recording team %s failed; recording its anchors one by one", team_id)
        recorded = Recorded()
        for memory_id, result in results:
            try:
                one = _record(team_id, [(memory_id, result)], now=now)
            except Exception:
                logger.exception("anchor job: recording entry %s of team %s failed", memory_id, team_id)
                run.errors += 1
                continue
            recorded.flagged += one.flagged
            recorded.unflagged += one.unflagged
    run.flagged += recorded.flagged
    run.unflagged += recorded.unflagged


def _record(team_id: int, results: list[tuple[uuid.UUID, CheckResult]], *, now: dt.datetime) -> Recorded:
    with team_scope(team_id):
        team = Team.objects.get(id=team_id)
        return record_checks(team=team, results=results, source=AnchorCheckSource.SERVER, now=now)


def _due_anchors(
    team_id: int, *, now: dt.datetime, budget: int, policy: FetchPolicy
) -> tuple[list[Candidate], int]:
    """Inside the team's scope: its active url/api anchors not checked within the
    interval, never-checked first, then the longest unchecked; those of a backed-off
    host are left (counted as skipped). At most `budget`."""
    if budget <= 0:
        return [], 0
    interval = dt.timedelta(seconds=settings.MEMORYHUB_ANCHOR_CHECK_INTERVAL_SECONDS)
    last_check = (
        AnchorCheck.objects.filter(team_id=team_id, memory_id=OuterRef("pk"))
        .order_by("-checked_at")
        .values("checked_at")[:1]
    )
    rows = list(
        Memory.objects.for_team(team_id)
        .active()
        .filter(anchor__type__in=SERVER_ANCHOR_TYPES)
        .annotate(last_checked=Subquery(last_check))
        .filter(Q(last_checked__isnull=True) | Q(last_checked__lte=now - interval))
        .order_by(F("last_checked").asc(nulls_first=True), "id")
        .values_list("id", "anchor")[: budget * LOOKAHEAD]
    )
    candidates = [_candidate(team_id, memory_id, stored, policy) for memory_id, stored in rows]
    backed_off = _backed_off_hosts({c.host for c in candidates if not c.refused})
    ready = [c for c in candidates if c.refused or c.host not in backed_off]
    skipped = len(candidates) - len(ready)
    return ready[:budget], skipped


def _candidate(team_id: int, memory_id: uuid.UUID, stored: Any, policy: FetchPolicy) -> Candidate:
    """The stored anchor held to the save's rule (normalise_anchor): a refused one is a
    Candidate that is never fetched, with what its check records."""
    try:
        anchor = normalise_anchor(stored, allowed_networks=policy.allowed_networks)
        assert anchor is not None  # noqa: S101 (the query selected rows with an anchor type)
        url = vetted_anchor_url(anchor["value"], allowed_networks=policy.allowed_networks)
    except InvalidAnchor as refused:
        return Candidate(team_id, memory_id, "", None, "", refused=refused.check_detail)
    except Exception as exc:
        logger.exception("anchor job: reading the anchor of entry %s of team %s failed", memory_id, team_id)
        return Candidate(
            team_id, memory_id, "", None, "", refused=f"check error ({type(exc).__name__})", error=True
        )
    return Candidate(team_id, memory_id, anchor["value"], anchor.get("expect"), host_and_port(url))


def _fetch_all(
    candidates: Sequence[Candidate], policy: FetchPolicy, run: AnchorRun
) -> list[tuple[Candidate, CheckResult]]:
    """Fetch every candidate on MEMORYHUB_ANCHOR_WORKERS threads, at most
    MEMORYHUB_ANCHOR_PER_HOST at once per host, hosts interleaved so one host's queue
    does not hold every thread; nothing new starts after MEMORYHUB_ANCHOR_RUN_SECONDS."""
    refused = [(c, CheckResult(ok=False, detail=c.refused)) for c in candidates if c.refused]
    to_fetch = [c for c in candidates if not c.refused]
    if not to_fetch:
        return refused
    # Made before the threads start: they only read the dict.
    per_host = {
        host: threading.BoundedSemaphore(settings.MEMORYHUB_ANCHOR_PER_HOST)
        for host in {c.host for c in to_fetch}
    }
    deadline = time.monotonic() + settings.MEMORYHUB_ANCHOR_RUN_SECONDS
    counts = threading.Lock()
    skipped_count = errors_count = 0

    def fetch(candidate: Candidate) -> tuple[Candidate, CheckResult] | None:
        nonlocal skipped_count, errors_count
        try:
            with per_host[candidate.host]:
                if time.monotonic() > deadline or _backed_off_hosts({candidate.host}):
                    with counts:
                        skipped_count += 1
                    return None
                result = check_anchor_url(client, candidate.url, candidate.expect, policy)
                _note_host(candidate.host, result)
                return candidate, result
        except Exception as exc:
            # Whatever went wrong is this anchor's failed check, not the run's end.
            logger.exception(
                "anchor job: checking entry %s of team %s failed", candidate.memory_id, candidate.team_id
            )
            with counts:
                errors_count += 1
            return candidate, CheckResult(ok=False, detail=f"check error ({type(exc).__name__})")

    with (
        guarded_client(policy) as client,
        ThreadPoolExecutor(
            max_workers=settings.MEMORYHUB_ANCHOR_WORKERS, thread_name_prefix="anchor-check"
        ) as pool,
    ):
        results = [r for r in pool.map(fetch, _interleaved(to_fetch)) if r is not None]
    run.skipped += skipped_count
    run.errors += errors_count
    return refused + results


def _interleaved(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Round-robin over hosts: a, b, c, a, b, a..."""
    queues: dict[str, list[Candidate]] = defaultdict(list)
    for candidate in candidates:
        queues[candidate.host].append(candidate)
    order: list[Candidate] = []
    depth = max(len(q) for q in queues.values())
    for index in range(depth):
        order.extend(q[index] for q in queues.values() if index < len(q))
    return order


# --------------------------------------------------------------------------- backoff


def _clock() -> float:
    """Wall-clock seconds: backoff deadlines are shared by every process."""
    return time.time()


def _backoff_key(host: str) -> str:
    return BACKOFF_KEY + hashlib.sha256(host.encode()).hexdigest()[:32]


def _backed_off_hosts(hosts: set[str]) -> set[str]:
    """Which of `hosts` wait out a backoff. Backoff spares troubled hosts; when the cache
    cannot say, every host is checked rather than every anchor failed."""
    if not hosts:
        return set()
    keys = {_backoff_key(host): host for host in hosts}
    now = _clock()
    try:
        states = cache.get_many(list(keys))
    except Exception as exc:
        logger.warning(
            "anchor job: the backoff cache did not answer (%s); checking regardless", type(exc).__name__
        )
        return set()
    return {
        keys[key]
        for key, state in states.items()
        if isinstance(state, dict) and float(state.get("until", 0)) > now
    }


def _note_host(host: str, result: CheckResult) -> None:
    """A troubled host waits BASE * 2^(failures-1) seconds, at most MAX; an answer that
    is no trouble (even a 404) forgets its failures."""
    key = _backoff_key(host)
    try:
        if not result.host_trouble:
            cache.delete(key)
            return
        state = cache.get(key)
        failures = int(state.get("failures", 0)) + 1 if isinstance(state, dict) else 1
        wait = min(
            settings.MEMORYHUB_ANCHOR_BACKOFF_BASE_SECONDS * 2 ** min(failures - 1, 30),
            settings.MEMORYHUB_ANCHOR_BACKOFF_MAX_SECONDS,
        )
        cache.set(
            key,
            {"failures": failures, "until": _clock() + wait},
            timeout=int(settings.MEMORYHUB_ANCHOR_BACKOFF_MAX_SECONDS) * 2 + 60,
        )
    except Exception as exc:  # the check's outcome stands; only its effect on backoff is lost
        logger.warning("anchor job: the backoff cache did not answer (%s)", type(exc).__name__)


# --------------------------------------------------------------------------- recording


def record_checks(
    *,
    team: Team,
    results: Sequence[tuple[uuid.UUID, CheckResult]],
    source: str,
    reported_by: str = "",
    now: dt.datetime | None = None,
) -> Recorded:
    """Inside the team's scope: one AnchorCheck per (entry, result), the flag rule (the
    module docstring), and the newest MEMORYHUB_ANCHOR_KEEP_CHECKS per entry kept."""
    now = now or timezone.now()
    recorded = Recorded()
    if not results:
        return recorded
    AnchorCheck.objects.bulk_create(
        AnchorCheck(
            team=team,
            memory_id=memory_id,
            source=source,
            checked_at=now,
            ok=result.ok,
            status=result.status,
            detail=result.detail[:300],
            duration_ms=result.duration_ms,
            reported_by=reported_by[:200],
        )
        for memory_id, result in results
    )
    recorded.recorded = len(results)
    latest = {memory_id: result for memory_id, result in results}
    ok_ids = [memory_id for memory_id, result in latest.items() if result.ok]
    failed_ids = [memory_id for memory_id, result in latest.items() if not result.ok]
    if ok_ids:
        recorded.unflagged = _lower_flags(team, ok_ids, now=now)
    if failed_ids:
        recorded.flagged = _raise_flags(team, failed_ids, latest, now=now)
    _forget_old_checks(team, list(latest))
    return recorded


def _ranked_checks(team: Team, memory_ids: list[uuid.UUID]) -> Any:
    return AnchorCheck.objects.filter(team=team, memory_id__in=memory_ids).annotate(
        rank=Window(
            RowNumber(), partition_by=[F("memory_id")], order_by=[F("checked_at").desc(), F("id").desc()]
        )
    )


def _raise_flags(
    team: Team, failed_ids: list[uuid.UUID], latest: dict[uuid.UUID, CheckResult], *, now: dt.datetime
) -> int:
    """Flag the entries whose last FAILURES_TO_FLAG checks all failed, one nudge each."""
    needed = max(1, settings.MEMORYHUB_ANCHOR_FAILURES_TO_FLAG)
    recent = _ranked_checks(team, failed_ids).filter(rank__lte=needed).values_list("memory_id", "ok")
    failures: dict[uuid.UUID, int] = defaultdict(int)
    seen_ok: set[uuid.UUID] = set()
    for memory_id, ok in recent:
        if ok:
            seen_ok.add(memory_id)
        else:
            failures[memory_id] += 1
    broken = [m for m in failed_ids if m not in seen_ok and failures[m] >= needed]
    if not broken:
        return 0
    entries = list(
        Memory.objects.filter(team=team, id__in=broken, is_active=True).values_list("id", "key", "anchor")
    )
    flagged = writes.set_freshness_flag(
        team=team, memory_ids=[e[0] for e in entries], flag="anchor_broken_at", on=True
    )
    Nudge.objects.bulk_create(
        [
            Nudge(
                team=team,
                kind=NudgeKind.ANCHOR_BROKEN,
                memory_id=memory_id,
                message=anchor_broken_message(key, anchor or {}, latest[memory_id], needed),
                details={
                    "anchor": anchor,
                    "status": latest[memory_id].status,
                    "detail": latest[memory_id].detail,
                    "failed_checks": needed,
                    "checked_at": now.isoformat(),
                },
            )
            for memory_id, key, anchor in entries
        ],
        ignore_conflicts=True,  # the open nudge a concurrent run or an earlier one made stands
    )
    return flagged


def anchor_broken_message(key: str, anchor: dict[str, Any], result: CheckResult, checks: int) -> str:
    what = "file" if anchor.get("type") == "file" else "anchor"
    target = str(anchor.get("value", ""))[:300]
    why = result.detail or (f"status {result.status}" if result.status else "failed")
    times = "its last check" if checks == 1 else f"its last {checks} checks"
    return (
        f"The {what} of '{key}' ({target}) failed {times}: {why}. Is the entry still true? "
        "Fix the anchor or the entry (supersede it), confirm it if it still holds, or archive it."
    )


def _lower_flags(team: Team, ok_ids: list[uuid.UUID], *, now: dt.datetime) -> int:
    lowered = writes.set_freshness_flag(team=team, memory_ids=ok_ids, flag="anchor_broken_at", on=False)
    Nudge.objects.filter(
        team=team, kind=NudgeKind.ANCHOR_BROKEN, state=NudgeState.OPEN, memory_id__in=ok_ids
    ).update(
        state=NudgeState.RESOLVED, resolution=NudgeAction.CONFIRM, resolved_at=now, resolved_by=CHECKED_BY
    )
    return lowered


def _forget_old_checks(team: Team, memory_ids: list[uuid.UUID]) -> None:
    """At most KEEP_CHECKS rows per entry: one bounded DELETE (a few rows per entry)."""
    keep = settings.MEMORYHUB_ANCHOR_KEEP_CHECKS
    old = list(
        _ranked_checks(team, memory_ids)
        .filter(rank__gt=keep)
        .values_list("id", flat=True)[: len(memory_ids) * 10]
    )
    if old:
        AnchorCheck.objects.filter(team=team, id__in=old).delete()


# --------------------------------------------------------------------------- file anchors


@dataclass(frozen=True)
class FileReport:
    """A client's word on one file anchor: whether the path exists in its worktree."""

    key: str
    exists: bool
    reason: str = ""


def report_file_anchors(*, team: Team, reports: Sequence[FileReport], reported_by: str) -> Recorded:
    """Record a client's file-anchor report (`memoryhub verify`, the session-start hook):
    each key naming an active entry of the team with a `file` anchor gets a client
    AnchorCheck and the flag rule; other keys are answered as ignored, unchanged."""
    keys = [report.key for report in reports]
    entries = dict(
        Memory.objects.for_team(team.id)
        .active()
        .filter(key__in=keys, anchor__type="file")
        .values_list("key", "id")
    )
    results = [
        (
            entries[report.key],
            CheckResult(
                ok=report.exists, detail="" if report.exists else (report.reason or "file not found")
            ),
        )
        for report in reports
        if report.key in entries
    ]
    recorded = record_checks(
        team=team, results=results, source=AnchorCheckSource.CLIENT, reported_by=reported_by
    )
    recorded.ignored = [key for key in keys if key not in entries]
    return recorded
