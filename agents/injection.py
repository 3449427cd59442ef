"""Prompt injection: the block of memory an agent puts at the top of its prompt.

What goes in, in this order (the *rank*):

1. every active `identity` entry, never dropped (not by the entry cap, not by the token
   budget: an agent that forgets who it is does worse than one over budget);
2. active always_on skills (see memories.skills), newest first, of any type but
   identity (an identity skill stays in 1, never dropped), where they fire: a skill with
   `projects` only when one of them is the project asked for (the entry's own `project`
   does not matter here). An always-on skill goes in through this section only (never
   twice, and not at all where it does not fire). Like every entry after identity,
   skills count against the cap and the budget;
3. active `lesson` entries, newest first;
4. active `decision` and `context` entries together, newest first.

Other `reference` and `historical` entries are not injected: they are looked up
through search when needed. With a query, a "relevant" section adds the best search results
(any type, active only) that are not in already.

The walk down the ranking includes an entry when the entry cap is not reached and its
block (plus its type's heading, if it is the first of its type) fits the remaining
token budget; an entry that does not fit is left out (`budget`) and the walk goes on,
so a smaller entry further down may still fit; once the cap is reached, the rest is
left out (`cap`). Tokens are counted offline (search.tokens) on the rendered blocks.

A pure read: nothing is modified, so left-out entries keep their type and stay
searchable. The caller is inside the team's scope (the API request, or team_scope).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import Literal, NamedTuple

from django.db import connection

from core.errors import InvalidInput
from memories.models import Memory
from memories.types import MemoryType
from search.selectors import MAX_QUERY_CHARS, MAX_RESULTS, search_memories
from search.tokens import count_tokens
from teams.models import Team

logger = logging.getLogger("agents.injection")

INJECTED_TYPES = (MemoryType.IDENTITY, MemoryType.LESSON, MemoryType.DECISION, MemoryType.CONTEXT)
# Rendering order of the sections, with their headings.
SKILL_SECTION = "skill"
SECTION_HEADINGS: dict[str, str] = {
    MemoryType.IDENTITY: "### Identity",
    SKILL_SECTION: "### Skills",
    MemoryType.LESSON: "### Lessons",
    MemoryType.DECISION: "### Decisions",
    MemoryType.CONTEXT: "### Context",
    "relevant": "### Relevant to the query",
}
TITLE = "## MemoryHub memory"
EMPTY_NOTE = "No memories to inject."

MAX_ENTRIES_LIMIT = 200
MIN_TOKENS, MAX_TOKENS = 50, 100_000
MAX_PROJECT_CHARS = 200
RELEVANT_MAX = 5
RELEVANT_SHARE_OF_BEST = 0.5  # a relevant entry scores at least half the best search result
WARN_SHARE = (4, 5)  # warn when the candidates reach 4/5 of the cap
# How far past the cap the walk looks for entries that still fit the budget. Only
# rows up to here are read and listed; the rest are counted (left_out_unlisted).
SCAN_BEYOND_CAP = 50

IncludedReason = Literal["identity", "skill", "ranked", "relevant"]
Section = Literal["core", "skill", "relevant"]
LeftOutReason = Literal["cap", "budget"]


@dataclass
class InjectionEntry:
    memory_id: uuid.UUID
    key: str
    type: str
    project: str
    content: str
    created_at: datetime
    section: Section
    rank: int  # core and skill: position in the injection order; relevant: in the search results
    reason: IncludedReason | LeftOutReason
    tokens: int | None = None  # the rendered block; None when never measured (left out by the cap)
    score: float | None = None  # relevant entries: the search score


@dataclass
class Injection:
    text: str
    included: list[InjectionEntry]
    left_out: list[InjectionEntry]
    candidates: int  # active entries of the injected types (and project), and always_on skills
    left_out_unlisted: int  # left out, past what the walk reads; their reason is unlisted_reason
    unlisted_reason: LeftOutReason
    max_entries: int
    tokens_used: int
    token_budget: int
    project: str | None
    search_mode: str | None = None
    warnings: list[str] = field(default_factory=list)

    def count_left_out(self, reason: LeftOutReason) -> int:
        listed = sum(1 for entry in self.left_out if entry.reason == reason)
        return listed + (self.left_out_unlisted if self.unlisted_reason == reason else 0)


def build_injection(
    *,
    team: Team,
    project: str | None = None,
    query: str | None = None,
    max_entries: int | None = None,
    max_tokens: int | None = None,
) -> Injection:
    """The injection block of `team`. `project` keeps entries of that project and those
    with no project (blank: team-wide only); None keeps every project. `max_entries` and
    `max_tokens` replace the team's defaults (injection_max_entries, injection_max_tokens)
    within the hard limits. The caller is inside the team's scope."""
    if max_entries is not None:
        cap = _check_range("max_entries", max_entries, 1, MAX_ENTRIES_LIMIT)
    else:
        # A team may set 0 (identity only); a team setting never lifts the hard limit.
        cap = min(team.injection_max_entries, MAX_ENTRIES_LIMIT)
    if max_tokens is not None:
        budget = _check_range("max_tokens", max_tokens, MIN_TOKENS, MAX_TOKENS)
    else:
        budget = min(team.injection_max_tokens, MAX_TOKENS)
    if project is not None and len(project) > MAX_PROJECT_CHARS:
        raise InvalidInput(f"project is limited to {MAX_PROJECT_CHARS} characters", field="project")
    if query is not None and not query.strip():
        raise InvalidInput("query must not be blank", field="query")
    if query is not None and len(query) > MAX_QUERY_CHARS:
        raise InvalidInput(f"query is limited to {MAX_QUERY_CHARS} characters", field="query")

    rows = _ranked_rows(team, project, limit_past_identity=cap + SCAN_BEYOND_CAP)
    candidates = rows[0].total if rows else 0
    has_skills = any(row.grp == SKILL_GROUP for row in rows)
    warnings: list[str] = []

    used = _tokens_of(TITLE)
    headed: set[str] = set()
    included: list[InjectionEntry] = []
    left_out: list[InjectionEntry] = []
    for row in rows:
        section: Section = SKILL_SECTION if row.grp == SKILL_GROUP else "core"
        entry = _entry(row, section=section, rank=row.position, reason="ranked")
        heading = SKILL_SECTION if section == SKILL_SECTION else entry.type
        is_identity = section == "core" and entry.type == MemoryType.IDENTITY
        if is_identity:
            entry.reason = "identity"
        elif section == SKILL_SECTION:
            entry.reason = "skill"
        if not is_identity and len(included) >= cap:
            entry.reason = "cap"
            left_out.append(entry)
            continue
        entry.tokens = _block_tokens(entry)
        cost = entry.tokens + (0 if heading in headed else _tokens_of(SECTION_HEADINGS[heading]))
        if not is_identity and used + cost > budget:
            entry.reason = "budget"
            left_out.append(entry)
            continue
        included.append(entry)
        headed.add(heading)
        used += cost
    unlisted = candidates - len(rows)
    unlisted_reason: LeftOutReason = "cap" if len(included) >= cap else "budget"

    identities = [e for e in included if e.reason == "identity"]
    if identities and len(identities) > cap:
        warnings.append(
            f"{len(identities)} identity entries are over the cap of {cap} entries; identity is never dropped"
        )
    if identities and used > budget:
        warnings.append(
            f"identity entries alone use {used} tokens, over the budget of {budget}; "
            "identity is never dropped"
        )
    if candidates * WARN_SHARE[1] >= cap * WARN_SHARE[0] and candidates:
        message = (
            f"{candidates} active identity, lesson, decision and context entries"
            f"{' and always-on skills' if has_skills else ''}{_project_words(project)} reach 80% of the "
            f"injection cap of {cap}: entries past the cap are left out (they stay searchable); "
            "consider marking old ones historical"
        )
        logger.warning("team %s: %s", team.slug, message)
        warnings.append(message)

    search_mode = None
    if query is not None:
        search_mode, used, unlisted_taken = _add_relevant(
            team,
            query,
            project,
            budget,
            used,
            included,
            left_out,
            warnings,
            read={row.id for row in rows},
        )
        unlisted -= unlisted_taken
    if not included:
        used += _tokens_of(EMPTY_NOTE)
    text = _render(included)
    return Injection(
        text=text,
        included=included,
        left_out=left_out,
        candidates=candidates,
        left_out_unlisted=unlisted,
        unlisted_reason=unlisted_reason,
        max_entries=cap,
        tokens_used=used,
        token_budget=budget,
        project=project,
        search_mode=search_mode,
        warnings=warnings,
    )


# --------------------------------------------------------------------------- reading


class _Row(NamedTuple):
    grp: int  # 0 identity, 1 always-on skill, 2 lesson, 3 decision and context
    id: uuid.UUID
    key: str
    type: str
    project: str
    content: str
    created_at: datetime
    position: int
    total: int


SKILL_GROUP = 1

# An always-on skill (any type but identity, which stays in its own section) is injected
# through the skills section only: where it fires (a skill with projects only when one
# of them is asked for, see memories.skills), and nowhere else. {alias} is m or c.
_ALWAYS_ON_SKILL = (
    "({alias}.skill_trigger IS NOT NULL AND {alias}.skill_trigger @> '{{\"always_on\": true}}'::jsonb"
    " AND {alias}.type <> 'identity')"
)
_FIRING_SKILL = (
    "(" + _ALWAYS_ON_SKILL + " AND (coalesce({alias}.skill_trigger -> 'projects', '[]'::jsonb) = '[]'::jsonb"
    " OR {alias}.skill_trigger -> 'projects' @> jsonb_build_array(%(project)s::text)))"
)

# Each branch walks a partial index WHERE is_active ((team, type, -created_at); for
# skills (team, skill name)) and stops at its LIMIT, so the cost follows the cap, not the
# size of the team: only the window over at most (identities + 4 * limit) rows is
# sorted. Identity has no LIMIT: it is never dropped. Always-on skills are listed in
# their own group only. The count of all candidates rides along as a scalar subquery.
_RANKED_SQL = """
    SELECT grp, id, key, type, project, content, created_at, position,
           (SELECT count(*) FROM memories_memory c
             WHERE c.team_id = %(team)s AND c.is_active
               AND ((c.type = ANY(%(types)s) {project_c} AND NOT {always_on_c}) OR {skill_c})) AS total
    FROM (
        SELECT u.*,
               row_number() OVER (ORDER BY grp, created_at DESC, id DESC) AS position,
               count(*) FILTER (WHERE grp = 0) OVER () AS identities
        FROM (
            (SELECT 0 AS grp, id, key, type, project, content, created_at FROM memories_memory m
              WHERE m.team_id = %(team)s AND m.is_active AND m.type = 'identity' {project_m})
            UNION ALL
            (SELECT 1, id, key, type, project, content, created_at FROM memories_memory m
              WHERE m.team_id = %(team)s AND m.is_active AND {skill_m}
              ORDER BY created_at DESC, id DESC LIMIT %(limit)s)
            UNION ALL
            (SELECT 2, id, key, type, project, content, created_at FROM memories_memory m
              WHERE m.team_id = %(team)s AND m.is_active AND m.type = 'lesson' {project_m}
                AND NOT {always_on_m}
              ORDER BY created_at DESC, id DESC LIMIT %(limit)s)
            UNION ALL
            (SELECT 3, id, key, type, project, content, created_at FROM memories_memory m
              WHERE m.team_id = %(team)s AND m.is_active AND m.type = 'decision' {project_m}
                AND NOT {always_on_m}
              ORDER BY created_at DESC, id DESC LIMIT %(limit)s)
            UNION ALL
            (SELECT 3, id, key, type, project, content, created_at FROM memories_memory m
              WHERE m.team_id = %(team)s AND m.is_active AND m.type = 'context' {project_m}
                AND NOT {always_on_m}
              ORDER BY created_at DESC, id DESC LIMIT %(limit)s)
        ) u
    ) ranked
    WHERE position <= identities + %(limit)s
    ORDER BY position
"""


def _ranked_rows(team: Team, project: str | None, *, limit_past_identity: int) -> list[_Row]:
    """One query: the candidates in rank order, every identity entry and the
    `limit_past_identity` entries after them, each with the total number of candidates."""
    fragments = {
        "project_c": "",
        "project_m": "",
        "skill_c": _FIRING_SKILL.format(alias="c"),
        "skill_m": _FIRING_SKILL.format(alias="m"),
        "always_on_c": _ALWAYS_ON_SKILL.format(alias="c"),
        "always_on_m": _ALWAYS_ON_SKILL.format(alias="m"),
    }
    if project is not None:
        fragments["project_c"] = "AND c.project IN (%(project)s, '')"
        fragments["project_m"] = "AND m.project IN (%(project)s, '')"
    sql = _RANKED_SQL.format(**fragments)
    params = {
        "team": team.id,
        "types": [str(t) for t in INJECTED_TYPES],
        "limit": limit_past_identity,
        # None or blank names no project: only skills without projects fire.
        "project": project or None,
    }
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [_Row(*row) for row in cursor.fetchall()]


def _entry(row: Memory | _Row, *, section: Section, rank: int, reason: str) -> InjectionEntry:
    return InjectionEntry(
        memory_id=row.id,
        key=row.key,
        type=row.type,
        project=row.project,
        content=row.content,
        created_at=row.created_at,
        section=section,
        rank=rank,
        reason=reason,
    )


def _add_relevant(
    team: Team,
    query: str,
    project: str | None,
    budget: int,
    used: int,
    included: list[InjectionEntry],
    left_out: list[InjectionEntry],
    warnings: list[str],
    *,
    read: set[uuid.UUID],
) -> tuple[str, int, int]:
    """Add up to RELEVANT_MAX active search results that are not in yet, within the
    budget. Relevant entries count against the budget, not the cap. Returns the search
    mode, the tokens used, and how many of the added entries were candidates past
    what the walk read (`read`), which are no longer left out."""
    inside = {entry.memory_id for entry in included}
    outcome = search_memories(
        team=team,
        query=query,
        # Some of the best results are usually in already; three times as many is
        # enough headroom, and MMR's cost grows with the square of k.
        max_results=min(MAX_RESULTS, RELEVANT_MAX * 3),
        include_superseded=False,
    )
    warnings.extend(outcome.warnings)
    # Hybrid search always returns its k nearest, related or not; a result far below
    # the best match would spend the budget on noise.
    # Skills the query triggered come first (score 1): the floor is set by the others.
    floor = RELEVANT_SHARE_OF_BEST * max(
        (r.score for r in outcome.results if not r.via_skill_trigger), default=0.0
    )
    results = [
        r
        for r in outcome.results
        if r.is_active and r.memory_id not in inside and r.score >= floor and r.score > 0
    ][: RELEVANT_MAX * 4]
    rows = {
        row.id: row
        for row in Memory.objects.for_team(team.id)
        .active()
        .filter(id__in=[r.memory_id for r in results])
        .only("id", "key", "type", "project", "content", "created_at")
    }
    picked = [
        (r, rows[r.memory_id])
        for r in results
        if r.memory_id in rows and (project is None or rows[r.memory_id].project in (project, ""))
    ][:RELEVANT_MAX]
    heading = _tokens_of(SECTION_HEADINGS["relevant"])
    was_left_out = {entry.memory_id: entry for entry in left_out}
    unlisted_taken = 0
    for position, (result, row) in enumerate(picked, start=1):
        entry = _entry(row, section="relevant", rank=position, reason="relevant")
        entry.score = result.score
        entry.tokens = _block_tokens(entry)
        # A candidate the walk never read is already counted as left out (unlisted).
        unread_candidate = entry.type in INJECTED_TYPES and entry.memory_id not in read
        cost = entry.tokens + (0 if any(e.section == "relevant" for e in included) else heading)
        if used + cost > budget:
            if entry.memory_id not in was_left_out and not unread_candidate:
                entry.reason = "budget"
                left_out.append(entry)
            continue
        if entry.memory_id in was_left_out:
            left_out.remove(was_left_out[entry.memory_id])  # brought in by the query
        unlisted_taken += unread_candidate
        included.append(entry)
        used += cost
    return outcome.search_mode, used, unlisted_taken


# --------------------------------------------------------------------------- rendering


def render_block(entry: InjectionEntry) -> str:
    """`[LESSON] [deploy-friday]: Never deploy on Fridays.` Continuation lines are
    indented, so no line of a memory can pass for a heading or a section marker."""
    lines = entry.content.replace("\r\n", "\n").replace("\r", "\n").strip().split("\n")
    body = "\n".join([lines[0], *(f"  {line}" if line.strip() else "" for line in lines[1:])])
    return f"{_prefix(entry.type, entry.key)} {body}"


def _render(included: list[InjectionEntry]) -> str:
    parts = [TITLE]
    if not included:
        parts.append(EMPTY_NOTE)
    for section in SECTION_HEADINGS:
        entries = [
            e
            for e in included
            if (
                e.section == section
                if section in ("relevant", SKILL_SECTION)
                else e.section == "core" and e.type == section
            )
        ]
        if entries:
            parts.append(SECTION_HEADINGS[section])
            parts.extend(render_block(e) for e in entries)
    return "\n\n".join(parts) + "\n"


# --------------------------------------------------------------------------- tokens


def _block_tokens(entry: InjectionEntry) -> int:
    """Tokens of the rendered block. The tokenizer splits on whitespace first, so the
    prefix and the body add up exactly (and the whole block is the sum of its blocks
    and headings, which a test checks against counting the rendered text)."""
    return _tokens_of(_prefix(entry.type, entry.key)) + _content_tokens(entry)


@lru_cache(maxsize=8192)
def _tokens_of(text: str) -> int:
    return count_tokens(text)


@lru_cache(maxsize=8192)
def _prefix(memory_type: str, key: str) -> str:
    return f"[{memory_type.upper()}] [{key}]:"


class _ContentTokenCache:
    """Token counts of memory contents, by SHA-256 of the content, least recently used
    out: the same entries are injected call after call, and counting is the slow part
    (about 0.1 ms per entry) while hashing is not."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._counts: OrderedDict[tuple[str, int], int] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, content: str) -> int:
        key = (Memory.hash_content(content), len(content))
        with self._lock:
            count = self._counts.get(key)
            if count is not None:
                self._counts.move_to_end(key)
                return count
        count = count_tokens(content)
        with self._lock:
            self._counts[key] = count
            if len(self._counts) > self.size:
                self._counts.popitem(last=False)
        return count


_content_cache = _ContentTokenCache(size=20_000)


def _content_tokens(entry: InjectionEntry) -> int:
    # Rendering changes only whitespace, which the tokenizer drops: the content's count
    # is the rendered body's count.
    return _content_cache.get(entry.content)


# --------------------------------------------------------------------------- helpers


def _check_range(name: str, value: int, low: int, high: int) -> int:
    if not low <= value <= high:
        raise InvalidInput(f"{name} must be a whole number from {low} to {high}", field=name)
    return value


def _project_words(project: str | None) -> str:
    if project is None:
        return ""
    return f" of project '{project}' or no project" if project else " with no project"
