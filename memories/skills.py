"""Skills: memories that fire on their own.

A memory may carry a `skill_trigger` {name, keywords, projects, always_on}:

- `GET skills/{name}/` loads the active entry carrying the name;
- search puts the active skills whose keywords occur in the query above its other
  results (`triggered_skills`);
- injection adds the active always_on skills in a section of their own (the SQL of
  agents.injection applies the same project rule as `fires_in_project`).

Only active entries fire: a superseded or deleted skill never does, and gives up its
name (a partial unique index keeps one active skill per (team, name)).

A keyword matches when it occurs in the query as a whole word or phrase, ignoring case
and runs of whitespace: `deploy` matches "how do I deploy?" but not "redeploy" or
"deployment". A skill with `projects` fires only where one of them is the project asked
for; a skill without projects fires everywhere.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from django.db.models import BooleanField
from django.db.models.expressions import RawSQL

from core.compiled_once import CompiledOnce
from core.errors import InvalidInput
from memories.exceptions import MemoryNotFound
from memories.metadata_extraction import metadata_filter_q
from memories.models import Memory, MemoryQuerySet
from teams.models import Team

SKILL_NAME_PATTERN = r"^[a-z0-9][a-z0-9-]{0,62}$"
MAX_KEYWORDS = 20
MAX_KEYWORD_CHARS = 100
MAX_PROJECTS = 20
MAX_PROJECT_CHARS = 200
TRIGGER_FIELDS = ("name", "keywords", "projects", "always_on")
DEFAULT_SKILLS_PER_SEARCH = 5

_name_re = re.compile(SKILL_NAME_PATTERN)
_word = re.compile(r"\w")


def is_skill_name(value: str) -> bool:
    return bool(_name_re.fullmatch(value))


def normalise_phrase(text: str) -> str:
    """Lowercase with runs of whitespace as one space: how keywords are stored and how a
    query is compared with them."""
    return " ".join(text.split()).lower()


def normalise_skill_trigger(value: Any) -> dict[str, Any]:
    """The stored form of a trigger: every field present, keywords lowercased and
    deduplicated in order, projects trimmed and deduplicated. Raises InvalidInput."""

    def fail(message: str) -> InvalidInput:
        return InvalidInput(f"skill_trigger: {message}", field="skill_trigger")

    if not isinstance(value, dict):
        raise fail("an object {name, keywords, projects, always_on}")
    unknown = sorted(set(value) - set(TRIGGER_FIELDS))
    if unknown:
        raise fail(f"unknown field(s): {', '.join(map(str, unknown))}")
    name = value.get("name")
    if not isinstance(name, str) or not is_skill_name(name):
        raise fail(
            "name is 1-63 characters: lowercase letters, digits and '-', starting with a letter or digit"
        )
    keywords = _string_list(value.get("keywords", []), "keywords", MAX_KEYWORDS, MAX_KEYWORD_CHARS, fail)
    normalised = list(dict.fromkeys(normalise_phrase(k) for k in keywords))
    if any(not _word.search(k) for k in normalised):
        raise fail("a keyword needs at least one letter or digit")
    projects = _string_list(value.get("projects", []), "projects", MAX_PROJECTS, MAX_PROJECT_CHARS, fail)
    always_on = value.get("always_on", False)
    if not isinstance(always_on, bool):
        raise fail("always_on is true or false")
    return {
        "name": name,
        "keywords": normalised,
        "projects": list(dict.fromkeys(p.strip() for p in projects)),
        "always_on": always_on,
    }


def _string_list(
    value: Any, name: str, max_items: int, max_chars: int, fail: Callable[[str], InvalidInput]
) -> list[str]:
    if not isinstance(value, list):
        raise fail(f"{name} is a list of strings")
    if len(value) > max_items:
        raise fail(f"at most {max_items} {name}")
    for item in value:
        if not isinstance(item, str) or not item.strip():
            raise fail(f"{name} are non-empty strings")
        if len(item) > max_chars:
            raise fail(f"one of the {name} is longer than {max_chars} characters")
    return value


def fires_in_project(trigger: dict[str, Any], project: str | None) -> bool:
    """A skill without projects fires everywhere; one with projects only where the
    project asked for is one of them (no project asked for: it does not fire)."""
    projects = trigger.get("projects") or []
    return not projects or (bool(project) and project in projects)


def matching_keyword(keywords: list[str], normalised_query: str) -> str | None:
    """The longest keyword that occurs in the (normalised) query as a whole word or
    phrase, or None."""
    found = [
        keyword
        for keyword in keywords
        if re.search(rf"(?<!\w){re.escape(keyword)}(?!\w)", normalised_query) is not None
    ]
    return max(found, key=lambda k: (len(k), k)) if found else None


# --------------------------------------------------------------------------- reads


def _active_skills(team_id: int) -> MemoryQuerySet:
    return Memory.objects.for_team(team_id).active().filter(skill_trigger__isnull=False)


def get_skill(*, team: Team, name: str) -> Memory:
    """The active entry carrying the skill. Raises MemoryNotFound (the message does not
    repeat the name)."""
    memory = _active_skills(team.id).filter(skill_trigger__name=name).first() if is_skill_name(name) else None
    if memory is None:
        raise MemoryNotFound("no active entry carries this skill")
    return memory


def active_skill_holder(*, team_id: int, name: str) -> Memory | None:
    return _active_skills(team_id).filter(skill_trigger__name=name).first()


def _skills_with_a_keyword_in(team_id: int, normalised_query: str) -> MemoryQuerySet:
    """The active skills with a keyword that is a substring of the query."""
    has_keyword = RawSQL(
        "EXISTS (SELECT 1 FROM jsonb_array_elements_text(memories_memory.skill_trigger -> 'keywords') AS kw"
        " WHERE strpos(%s, kw) > 0)",
        [normalised_query],
        output_field=BooleanField(),
    )
    return _active_skills(team_id).alias(has_keyword=has_keyword).filter(has_keyword=True)


_UNFILTERED_SKILLS = CompiledOnce(
    lambda team_id, normalised_query: _skills_with_a_keyword_in(team_id, normalised_query).order_by(
        "created_at", "id"
    ),
    team_id=int,
    normalised_query=str,
)


def triggered_skills(
    *,
    team_id: int,
    query: str,
    project: str | None = None,
    types: list[str] | None = None,
    tags: list[str] | None = None,
    people: list[str] | None = None,
    limit: int = DEFAULT_SKILLS_PER_SEARCH,
    topics: list[str] | None = None,
) -> list[tuple[Memory, str]]:
    """Active skills with a keyword in the query, as (entry, keyword that matched), the
    most specific (longest keyword) first, then by name; at most `limit`.

    One query: PostgreSQL keeps the skills with a keyword that is a substring of the
    query, and the whole-word rule is checked here on those few."""
    if limit <= 0:
        return []
    normalised = normalise_phrase(query)
    rows: Iterable[Memory]
    if types or tags or people or topics:
        rows = (
            _skills_with_a_keyword_in(team_id, normalised)
            .filter(**({"type__in": types} if types else {}))
            .filter(metadata_filter_q(tags, people, topics))
            .order_by("created_at", "id")
        )
    else:  # every search asks this; the SQL is compiled once
        rows = _UNFILTERED_SKILLS.rows(team_id=team_id, normalised_query=normalised)
    fired: list[tuple[Memory, str]] = []
    for memory in rows:
        trigger = memory.skill_trigger or {}
        if not fires_in_project(trigger, project):
            continue
        keyword = matching_keyword(trigger.get("keywords") or [], normalised)
        if keyword is not None:
            fired.append((memory, keyword))
    fired.sort(key=lambda pair: (-len(pair[1]), str((pair[0].skill_trigger or {}).get("name", ""))))
    return fired[:limit]
