"""Step 5, skills: up to MEMORYHUB_SKILLS_PER_SEARCH (5) active skills with a keyword
in the query (memories.skills.triggered_skills), in the project asked for and passing
the type and tag/people filters, go above the k results (not counted in k), with score
1.0, source "skill_trigger" and `via_skill_trigger`; they are left out of the k."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from django.conf import settings

from memories.models import Annotation, Memory
from memories.skills import triggered_skills
from search.retrieval.candidates import Candidate
from search.retrieval.results import SearchResult, shorten

SKILL_SCORE = 1.0
SKILL_SOURCE = "skill_trigger"

# A skill the query fired, with the keyword that fired it.
FiredSkill = tuple[Memory, str]


def fire_skills(
    *,
    team_id: int,
    query: str,
    project: str | None,
    types: list[str] | None,
    tags: list[str] | None,
    people: list[str] | None,
    topics: list[str] | None = None,
) -> list[FiredSkill]:
    return triggered_skills(
        team_id=team_id,
        query=query,
        project=project,
        types=types,
        tags=tags,
        people=people,
        topics=topics,
        limit=settings.MEMORYHUB_SKILLS_PER_SEARCH,
    )


def drop_fired(candidates: dict[uuid.UUID, Candidate], fired: list[FiredSkill]) -> None:
    """Fired skills are listed above the others, never twice."""
    for memory, _keyword in fired:
        candidates.pop(memory.id, None)


def skill_results(fired: list[FiredSkill], notes: Mapping[uuid.UUID, list[Annotation]]) -> list[SearchResult]:
    return [
        SearchResult(
            memory_id=memory.id,
            key=memory.key,
            snippet=shorten(memory.content),
            score=SKILL_SCORE,
            type=memory.type,
            is_active=memory.is_active,
            source=SKILL_SOURCE,
            created_at=memory.created_at,
            rating=memory.rating,
            annotations=notes.get(memory.id, []),
            via_skill_trigger=True,
            skill=(memory.skill_trigger or {}).get("name"),
            matched_keyword=keyword,
        )
        for memory, keyword in fired
    ]
