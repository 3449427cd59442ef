"""Step 1 of an injection, select by type order: the candidates in rank order (every
active identity entry, then pinned entries of any other type, then always-on skills
that fire, then lessons, then decisions, then context, each newest first), read in one
query whose cost follows the cap, not the size of the team. A pinned entry is listed in
its own group only."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, NamedTuple

from agents.injection.entries import INJECTED_TYPES
from core.db_router import read_connection
from teams.models import Team


class RankedRow(NamedTuple):
    grp: int  # 0 identity, 1 pinned, 2 always-on skill, 3 lesson, 4 decision, 5 context
    id: uuid.UUID
    key: str
    type: str
    project: str
    content: str
    created_at: datetime
    confirmed_by_count: int
    last_confirmed_at: datetime
    position: int
    total: int


PINNED_GROUP = 1
SKILL_GROUP = 2

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
# skills (team, skill name); for pinned entries (team, -created_at) WHERE pinned) and
# stops at its LIMIT, so the cost follows the cap, not the
# size of the team: only the window over at most (identities + 4 * limit) rows is
# sorted. Identity has no LIMIT: it is never dropped. Always-on skills are listed in
# their own group only. The count of all candidates rides along as a scalar subquery.
_RANKED_SQL = """
    SELECT grp, id, key, type, project, content, created_at, confirmed_by_count, last_confirmed_at, position,
           (SELECT count(*) FROM memories_memory c
             WHERE c.team_id = %(team)s AND c.is_active
               AND ((c.type = ANY(%(types)s) {project_c} AND NOT {always_on_c} AND NOT c.pinned)
                    OR (c.pinned AND c.type <> 'identity' {project_c})
                    OR ({skill_c} AND NOT c.pinned))) AS total
    FROM (
        SELECT u.*,
               row_number() OVER (ORDER BY grp, created_at DESC, id DESC) AS position,
               count(*) FILTER (WHERE grp = 0) OVER () AS identities
        FROM (
            (SELECT 0 AS grp, id, key, type, project, content, created_at,
                    confirmed_by_count, last_confirmed_at
              FROM memories_memory m
              WHERE m.team_id = %(team)s AND m.is_active AND m.type = 'identity' {project_m})
            UNION ALL
            (SELECT 1, id, key, type, project, content, created_at, confirmed_by_count, last_confirmed_at
              FROM memories_memory m
              WHERE m.team_id = %(team)s AND m.is_active AND m.pinned AND m.type <> 'identity' {project_m}
              ORDER BY created_at DESC, id DESC LIMIT %(limit)s)
            UNION ALL
            (SELECT 2, id, key, type, project, content, created_at, confirmed_by_count, last_confirmed_at
              FROM memories_memory m
              WHERE m.team_id = %(team)s AND m.is_active AND {skill_m} AND NOT m.pinned
              ORDER BY created_at DESC, id DESC LIMIT %(limit)s)
            UNION ALL
            (SELECT 3, id, key, type, project, content, created_at, confirmed_by_count, last_confirmed_at
              FROM memories_memory m
              WHERE m.team_id = %(team)s AND m.is_active AND m.type = 'lesson' {project_m}
                AND NOT {always_on_m} AND NOT m.pinned
              ORDER BY created_at DESC, id DESC LIMIT %(limit)s)
            UNION ALL
            (SELECT 4, id, key, type, project, content, created_at, confirmed_by_count, last_confirmed_at
              FROM memories_memory m
              WHERE m.team_id = %(team)s AND m.is_active AND m.type = 'decision' {project_m}
                AND NOT {always_on_m} AND NOT m.pinned
              ORDER BY created_at DESC, id DESC LIMIT %(limit)s)
            UNION ALL
            (SELECT 5, id, key, type, project, content, created_at, confirmed_by_count, last_confirmed_at
              FROM memories_memory m
              WHERE m.team_id = %(team)s AND m.is_active AND m.type = 'context' {project_m}
                AND NOT {always_on_m} AND NOT m.pinned
              ORDER BY created_at DESC, id DESC LIMIT %(limit)s)
        ) u
    ) ranked
    WHERE position <= identities + %(limit)s
    ORDER BY position
"""


def ranked_rows(team: Team, project: str | None, *, limit_past_identity: int) -> list[RankedRow]:
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
    params: dict[str, Any] = {
        "team": team.id,
        "types": [str(t) for t in INJECTED_TYPES],
        "limit": limit_past_identity,
        # None or blank names no project: only skills without projects fire.
        "project": project or None,
    }
    with read_connection().cursor() as cursor:
        cursor.execute(sql, params)
        return [RankedRow(*row) for row in cursor.fetchall()]
