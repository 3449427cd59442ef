"""The Review page: the team's open nudges (freshness) and, on its first page, the pending
drafts an extractor proposed, in one queue. Each nudge is resolved in one click (or one
key) through freshness.services.resolve_nudge, except by archiving: the first, default
button never archives, and an archive is a button behind a disclosure of its own, with
no shortcut, so a stray key or the habit of clicking the first button cannot put an
entry aside; each draft is accepted (as edited in its
form), merged into an existing entry or rejected through freshness.drafts. Viewers read
the queue; acting on it is a write, so it needs the member role like every memory write."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from core.errors import DomainError, NotFound
from dashboard import selectors
from dashboard.access import Role, TeamAccess, page_context, person_actor, team_page
from dashboard.forms import parse_version
from freshness import drafts as draft_services
from freshness import services as freshness_services
from freshness.fact_contradictions import nudge_fact_payload
from freshness.models import Nudge, NudgeAction, NudgeKind
from memories.models import Memory
from memories.types import MemoryType


@dataclass(frozen=True)
class ReviewAction:
    action: str  # a NudgeAction value, posted to review_resolve
    label: str
    shortcut: str  # the key that presses the button on the selected item ("": none)
    primary: bool = False
    # Puts an entry aside (archives it): shown behind a disclosure, without a shortcut.
    archives: bool = False


CONFIRM = ReviewAction(NudgeAction.CONFIRM, "Confirm", "c", primary=True)
DISMISS = ReviewAction(NudgeAction.DISMISS, "Dismiss", "d")
KEEP = ReviewAction(NudgeAction.DISMISS, "Keep it", "d", primary=True)
KEEP_BOTH = ReviewAction(NudgeAction.COMPATIBLE, "Keep both", "b", primary=True)
ARCHIVE_OLDER = ReviewAction(NudgeAction.SUPERSEDE, "Archive the older entry", "", archives=True)
ARCHIVE = ReviewAction(NudgeAction.ARCHIVE, "Archive this entry", "", archives=True)
KEEP_FACT = ReviewAction(NudgeAction.DISMISS, "Keep the current value", "d", primary=True)
USE_NEW_VALUE = ReviewAction(NudgeAction.SUPERSEDE, "Use the new value", "u")

# The buttons each kind of nudge offers, in order; the first is the default and never
# archives. The service decides what resolves what; this only chooses what the page
# offers (e.g. a contradiction's "confirm" is the same as "keep both", so it is offered
# once).
ACTIONS_BY_KIND: dict[str, list[ReviewAction]] = {
    NudgeKind.CONTRADICTION: [KEEP_BOTH, DISMISS, ARCHIVE_OLDER],
    NudgeKind.ANCHOR_BROKEN: [CONFIRM, DISMISS],
    NudgeKind.DUE: [CONFIRM, DISMISS],
    NudgeKind.PRUNE: [KEEP, ARCHIVE],
    NudgeKind.FACT_CONTRADICTION: [KEEP_FACT, USE_NEW_VALUE],
}
KIND_LABELS: dict[str, str] = {
    NudgeKind.CONTRADICTION: "Contradiction",
    NudgeKind.ANCHOR_BROKEN: "Broken anchor",
    NudgeKind.DUE: "Due for confirmation",
    NudgeKind.PRUNE: "Archive proposal",
    NudgeKind.FACT_CONTRADICTION: "Fact contradiction",
}
# A draft's buttons: all three submit the draft's form (its edited type, key and text).
ACCEPT_DRAFT = ReviewAction("accept", "Accept", "y", primary=True)
MERGE_DRAFT = ReviewAction("merge", "Merge into", "m")
REJECT_DRAFT = ReviewAction("reject", "Reject", "r")
DRAFT_ACTIONS = [ACCEPT_DRAFT, MERGE_DRAFT, REJECT_DRAFT]
FACT_DRAFT_ACTIONS = [ACCEPT_DRAFT, REJECT_DRAFT]  # a fact is set or not: nothing to merge into
DRAFT_DONE = {"accept": "Accepted", "merge": "Merged", "reject": "Rejected"}
SHORTCUTS = [
    ("j / k", "next / previous item"),
    *[
        (a.shortcut, a.label)
        for a in (CONFIRM, KEEP_BOTH, DISMISS, USE_NEW_VALUE, ACCEPT_DRAFT, MERGE_DRAFT, REJECT_DRAFT)
    ],
]
DONE: dict[str, str] = {
    NudgeAction.CONFIRM: "Confirmed",
    NudgeAction.DISMISS: "Dismissed",
    NudgeAction.SUPERSEDE: "Kept the newer entry and archived the older",
    NudgeAction.COMPATIBLE: "Kept both entries",
    NudgeAction.ARCHIVE: "Archived",
}
DONE_BY_KIND: dict[tuple[str, str], str] = {
    (NudgeAction.SUPERSEDE, NudgeKind.FACT_CONTRADICTION): "Set the new value",
    (NudgeAction.DISMISS, NudgeKind.FACT_CONTRADICTION): "Kept the current value",
}


@dataclass(frozen=True)
class ReviewItem:
    nudge: Nudge
    kind_label: str
    actions: list[ReviewAction]

    @property
    def buttons(self) -> list[ReviewAction]:
        """The actions offered as buttons, the default first: none of them archives."""
        return [a for a in self.actions if not a.archives]

    @property
    def archive_actions(self) -> list[ReviewAction]:
        """The actions behind the disclosure: they archive an entry."""
        return [a for a in self.actions if a.archives]

    # A fact contradiction's fact and values (values None: hidden, a `high` fact).
    fact: dict[str, Any] | None = None

    @property
    def entries(self) -> list[Memory]:
        """The entry, or a contradiction's newer and older entries, in that order."""
        return [m for m in (self.nudge.memory, self.nudge.other_memory) if m is not None]


@team_page()
def review(request: HttpRequest, access: TeamAccess) -> HttpResponse:
    after = _nudge_id(request.GET.get("after")) if request.GET.get("after") else None
    page = selectors.review_queue(team=access.team, after=after)
    items = [
        ReviewItem(
            nudge=n,
            kind_label=KIND_LABELS.get(n.kind, n.kind),
            actions=ACTIONS_BY_KIND.get(n.kind, []),
            # A `high` fact's values stay masked here, as on the facts page (reveal there).
            fact=nudge_fact_payload(n, may_see_high=False),
        )
        for n in page.nudges
    ]
    drafts = selectors.review_drafts(team=access.team) if after is None else selectors.ReviewDrafts([], 0)
    context = page_context(
        access,
        items=items,
        drafts=drafts,
        draft_actions=DRAFT_ACTIONS,
        fact_draft_actions=FACT_DRAFT_ACTIONS,
        memory_types=MemoryType.values,
        after=after,
        next_after=page.next_after,
        is_first_page=after is None,
        shortcuts=SHORTCUTS,
    )
    return render(request, "dashboard/review.html", context)


@team_page(Role.MEMBER)
@require_POST
def review_resolve(request: HttpRequest, access: TeamAccess, nudge_id: str) -> HttpResponse:
    action = request.POST.get("action", "")
    try:
        nudge = freshness_services.resolve_nudge(
            team=access.team, nudge_id=_nudge_id(nudge_id), action=action, actor=person_actor(request)
        )
    except NotFound:
        raise  # another team's nudge, or none: the one 404 page (team_page)
    except DomainError as error:
        # Closed already, or an action that does not fit (the entry moved on since).
        messages.error(request, error.detail)
    else:
        keys = ", ".join(m.key for m in (nudge.memory, nudge.other_memory) if m)
        if nudge.fact is not None:
            keys = f"{nudge.fact.entity}/{nudge.fact.key}"
        done = DONE_BY_KIND.get((action, nudge.kind)) or DONE.get(action, "Resolved")
        messages.success(request, f"{done}: {keys}.")
    return redirect(_back_to_queue(access, request.POST.get("after")))


@team_page(Role.MEMBER)
@require_POST
def review_draft(request: HttpRequest, access: TeamAccess, draft_id: str) -> HttpResponse:
    """Accept (with the form's edits), merge (into the form's key) or reject a draft."""
    action, actor, draft_uuid = request.POST.get("action", ""), person_actor(request), _draft_id(draft_id)
    try:
        if action == "accept":
            draft = draft_services.accept_draft(
                team=access.team,
                draft_id=draft_uuid,
                actor=actor,
                type=request.POST.get("type") or None,
                key=request.POST.get("key") or None,
                content=request.POST.get("content") or None,
                value=request.POST.get("value") or None,
            )
        elif action == "merge":
            draft = draft_services.merge_draft(
                team=access.team,
                draft_id=draft_uuid,
                actor=actor,
                into_key=request.POST.get("into_key", "").strip(),
            )
        elif action == "reject":
            draft = draft_services.reject_draft(team=access.team, draft_id=draft_uuid, actor=actor)
        else:
            messages.error(request, "Choose accept, merge or reject.")
            return redirect(_back_to_queue(access, None))
    except draft_services.DraftNotFound:
        raise  # another team's draft, or none: the one 404 page (team_page)
    except DomainError as error:
        # Reviewed already, a key that is taken, a text another key holds, a bad edit, a
        # merge into a key with no active entry.
        messages.error(request, error.detail)
    else:
        messages.success(request, f"{DRAFT_DONE[action]}: {draft.key}.")
    return redirect(_back_to_queue(access, None))


def _draft_id(value: str) -> uuid.UUID:
    parsed = parse_version(value)
    if parsed is None:
        raise NotFound("malformed draft id")
    return parsed


def _nudge_id(value: str | None) -> uuid.UUID:
    """A nudge id from the URL or the query: malformed is a nudge that does not exist."""
    parsed = parse_version(value)
    if parsed is None:
        raise NotFound("malformed nudge id")
    return parsed


def _back_to_queue(access: TeamAccess, after: str | None) -> str:
    """The page of the queue the action was taken on (its cursor, when well-formed)."""
    url = reverse("dashboard:review", kwargs={"slug": access.team.slug})
    cursor = parse_version(after)
    return f"{url}?after={cursor}" if cursor else url
