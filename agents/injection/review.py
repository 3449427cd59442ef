"""The "Please review" section at the end of an injection block: at most REVIEW_MAX of
the team's open nudges (freshness), so agents are asked at session start to confirm,
fix or dismiss what may be stale.

It is chosen after everything else has been fitted, from what is left of the budget:
identity, skills and the ranked entries are never displaced by it. Contradictions come
first, then broken anchors, due entries and archive proposals, newest first in each.
A contradiction is a guess: only those from freshness.contradictions.INJECT_CONFIDENCE
up are asked about here (the rest wait on the Review page). Messages are scrubbed."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Case, IntegerField, Q, Value, When

from agents.injection.rendering import tokens_of
from freshness.contradictions import INJECT_CONFIDENCE
from freshness.models import NudgeKind
from freshness.selectors import list_nudges
from teams.models import Team
from teams.scrubber import SecretMatcher, scrub

REVIEW_MAX = 3
REVIEW_HEADING = "### Please review"
REVIEW_HINT = "Check these and resolve each with nudge_resolve (confirm, supersede, archive or dismiss)."
# The message of a nudge is bounded (freshness); a line is cut here all the same.
MAX_LINE_CHARS = 400
# A fact contradiction is exact (another value was stated), so it comes right after the
# judged contradictions, as on the Review page.
KIND_ORDER = [
    NudgeKind.CONTRADICTION,
    NudgeKind.FACT_CONTRADICTION,
    NudgeKind.ANCHOR_BROKEN,
    NudgeKind.DUE,
    NudgeKind.PRUNE,
]


@dataclass(frozen=True)
class ReviewItem:
    id: str
    kind: str
    keys: list[str]
    message: str

    def line(self) -> str:
        message = " ".join(self.message.split())
        if len(message) > MAX_LINE_CHARS:
            message = message[: MAX_LINE_CHARS - 1] + "…"
        return f"- [{self.kind}] {message} (nudge {self.id})"


def review_items(
    *, team: Team, project: str | None, budget_left: int, secrets: SecretMatcher
) -> tuple[list[ReviewItem], int]:
    """The nudges that fit in `budget_left` tokens with the section's heading, and the
    tokens they take (0 when none fits or none is open). With a project, only nudges
    whose entries are of that project or team-wide, as the rest of the block."""
    priority = Case(
        *(When(kind=kind, then=Value(rank)) for rank, kind in enumerate(KIND_ORDER)),
        default=Value(len(KIND_ORDER)),
        output_field=IntegerField(),
    )
    nudges = list_nudges(team=team).filter(
        ~Q(kind=NudgeKind.CONTRADICTION) | Q(confidence__gte=INJECT_CONFIDENCE)
    )
    if project is not None:
        in_scope = [project, ""]
        nudges = nudges.filter(memory__project__in=in_scope).filter(
            Q(other_memory__isnull=True) | Q(other_memory__project__in=in_scope)
        )
    nudges = nudges.order_by(priority, "-created_at", "-id")[:REVIEW_MAX]
    used = tokens_of(REVIEW_HEADING) + tokens_of(REVIEW_HINT)
    chosen: list[ReviewItem] = []
    for nudge in nudges:
        keys = [memory.key for memory in (nudge.memory, nudge.other_memory) if memory is not None]
        if nudge.fact is not None:  # its message never holds a `high` fact's values
            keys.append(f"{nudge.fact.entity}/{nudge.fact.key}")
        message = scrub(nudge.message, secrets).text
        item = ReviewItem(id=str(nudge.id), kind=nudge.kind, keys=keys, message=message)
        cost = tokens_of(item.line())
        if used + cost > budget_left:
            continue
        chosen.append(item)
        used += cost
    return (chosen, used) if chosen else ([], 0)


def render_review(items: list[ReviewItem]) -> str:
    if not items:
        return ""
    return "\n\n".join([REVIEW_HEADING, REVIEW_HINT, "\n".join(item.line() for item in items)]) + "\n"
