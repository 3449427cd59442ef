"""The Review page: the team's open nudges in one queue (contradictions, broken
anchors, due entries, prune proposals; newest first in each), each resolved in one POST
through freshness.services.resolve_nudge as the signed-in person; viewers read, members
act; another team's queue and nudges are 404 with nothing of theirs in the body. Also the
overview's freshness panel: active entries by state, and entries confirmed per week."""

from __future__ import annotations

import datetime as dt
import re
import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from dashboard import selectors
from freshness.fact_contradictions import open_fact_contradiction
from freshness.models import Draft, Nudge, NudgeKind, NudgeState
from memories import writes
from memories.facts.models import Fact
from memories.facts.services import set_fact
from memories.models import Confirmation, Memory
from teams.models import JobRun, Team
from teams.scope import team_scope
from tests.conftest import operator_view
from tests.dashboard.conftest import BravoData, Cast, client_for, save


def url(name: str, slug: str = "alpha", **kwargs: Any) -> str:
    return reverse(f"dashboard:{name}", kwargs={"slug": slug, **kwargs})


def resolve_url(nudge: Nudge | uuid.UUID | str, slug: str = "alpha") -> str:
    nudge_id = nudge.id if isinstance(nudge, Nudge) else nudge
    return url("review_resolve", slug=slug, nudge_id=str(nudge_id))


def age(memory: Memory, days: float) -> None:
    with operator_view():
        past = timezone.now() - dt.timedelta(days=days)
        Memory.objects.filter(id=memory.id).update(created_at=past, last_confirmed_at=past)


def open_nudge(
    team: Team,
    kind: str,
    memory: Memory,
    *,
    other: Memory | None = None,
    minutes_ago: int = 0,
    message: str | None = None,
) -> Nudge:
    """A nudge as the jobs would record it, made `minutes_ago` (the queue's order)."""
    with team_scope(team.id):
        nudge = Nudge.objects.create(
            team=team,
            kind=kind,
            memory=memory,
            other_memory=other,
            message=message or f"{kind} nudge about '{memory.key}'.",
        )
        Nudge.objects.filter(id=nudge.id).update(
            created_at=timezone.now() - dt.timedelta(minutes=minutes_ago)
        )
        if kind == NudgeKind.CONTRADICTION and other is not None:
            writes.set_freshness_flag(team=team, memory_ids=[other.id], flag="contradicted_at", on=True)
        if kind == NudgeKind.ANCHOR_BROKEN:
            writes.set_freshness_flag(team=team, memory_ids=[memory.id], flag="anchor_broken_at", on=True)
        return Nudge.objects.get(id=nudge.id)


def state_of(nudge: Nudge) -> tuple[str, str, str]:
    with operator_view():
        fresh = Nudge.objects.get(id=nudge.id)
    return fresh.state, fresh.resolution, fresh.resolved_by


@dataclass
class Queue:
    due_old: Nudge
    due_new: Nudge
    broken: Nudge
    contradiction: Nudge
    prune: Nudge

    def in_order(self) -> list[Nudge]:
        return [self.contradiction, self.broken, self.due_new, self.due_old, self.prune]


@pytest.fixture
def queue(team: Team, cast: Cast) -> Queue:
    deploy = save(team, "deploy-day", "We deploy on Tuesdays after the standup.", type_name="decision")
    runbook = save(team, "runbook-url", "The on-call runbook lives in the wiki under Ops.")
    coffee = save(team, "coffee-machine", "The coffee machine on floor 3 needs descaling monthly.")
    billing_old = save(team, "billing-old", "We use Stripe for billing.")
    billing_new = save(team, "billing-new", "We moved billing to Paddle.", allow_duplicate=True)
    legacy = save(team, "legacy-fax", "Invoices used to be faxed to accounting.")
    age(deploy, 45)
    age(coffee, 60)
    # The newest nudge of all is a prune proposal: kinds order first, age second.
    return Queue(
        due_old=open_nudge(team, NudgeKind.DUE, coffee, minutes_ago=50),
        due_new=open_nudge(team, NudgeKind.DUE, deploy, minutes_ago=10),
        broken=open_nudge(team, NudgeKind.ANCHOR_BROKEN, runbook, minutes_ago=40),
        contradiction=open_nudge(
            team,
            NudgeKind.CONTRADICTION,
            billing_new,
            other=billing_old,
            minutes_ago=30,
            message="You previously recorded 'We use Stripe for billing'. Update to 'We moved billing to Paddle'?",
        ),
        prune=open_nudge(team, NudgeKind.PRUNE, legacy, minutes_ago=1),
    )


@pytest.fixture
def bravo_nudge(other_team: Team, bravo: BravoData) -> Nudge:
    with team_scope(other_team.id):
        memory = Memory.objects.get(team=other_team, key=bravo.memory_key, is_active=True)
    return open_nudge(other_team, NudgeKind.DUE, memory, message="Is the zeppelin launch of Bravo still on?")


# --- the queue ---------------------------------------------------------------------------------


def test_queue_lists_contradictions_then_broken_anchors_due_and_prune_newest_first(
    cast: Cast, queue: Queue
) -> None:
    response = cast.client("viewer").get(url("review"))

    assert response.status_code == 200
    items = response.context["items"]
    assert [item.nudge.id for item in items] == [n.id for n in queue.in_order()]
    body = response.content.decode()
    order = [body.index(f'data-nudge="{n.id}"') for n in queue.in_order()]
    assert order == sorted(order)
    # Each item says what to do and shows its entries with a link to the key's page.
    assert "Update to &#x27;We moved billing to Paddle&#x27;?" in body
    assert f'href="{url("memory", key="billing-new")}"' in body
    assert f'href="{url("memory", key="billing-old")}"' in body
    assert "We use Stripe for billing." in body and "We moved billing to Paddle." in body


def test_each_kind_offers_its_buttons_with_their_shortcuts(cast: Cast, queue: Queue) -> None:
    response = cast.client("member").get(url("review"))

    items = response.content.decode().split('<li class="nudge ')[1:]

    def buttons(nudge: Nudge) -> list[tuple[str, str]]:
        (item,) = [i for i in items if f'id="nudge-{nudge.id}"' in i]
        return re.findall(r'name="action" value="(\w+)">.*?data-shortcut="(\w)"', item, flags=re.S)

    assert buttons(queue.due_new) == [("confirm", "c"), ("dismiss", "d")]
    assert buttons(queue.broken) == [("confirm", "c"), ("dismiss", "d")]
    assert buttons(queue.contradiction) == [("compatible", "b"), ("dismiss", "d")]
    assert buttons(queue.prune) == [("dismiss", "d")]
    body = response.content.decode()
    assert 'id="review-shortcuts"' in body and "<kbd>j / k</kbd>" in body
    assert "dashboard/review.js" in body


def test_the_first_button_never_archives_and_archiving_sits_behind_its_own_disclosure(
    cast: Cast, queue: Queue
) -> None:
    """Keep both (or keep it) comes first; the archive is a second, explicit choice: a
    button inside a closed <details>, with no keyboard shortcut."""
    items = cast.client("member").get(url("review")).content.decode().split('<li class="nudge ')[1:]

    def item_of(nudge: Nudge) -> str:
        (item,) = [i for i in items if f'id="nudge-{nudge.id}"' in i]
        return item

    for nudge, default, archiving in [
        (queue.contradiction, ("compatible", "Keep both"), "supersede"),
        (queue.prune, ("dismiss", "Keep it"), "archive"),
    ]:
        item = item_of(nudge)
        actions = re.findall(
            r'name="action" value="(\w+)">\s*(?:<input[^>]*>\s*)?<button([^>]*)>([^<]*)', item
        )
        assert (actions[0][0], actions[0][2].strip()) == default
        assert 'class="secondary"' not in actions[0][1]
        before, _, disclosure = item.partition('<details class="archive-choice">')
        assert f'value="{archiving}"' not in before
        assert (
            f'value="{archiving}"' in disclosure and "data-shortcut" not in disclosure.split("</details>")[0]
        )
        assert '<details class="archive-choice" open' not in item


def test_nav_links_the_review_page_with_the_open_count(cast: Cast, queue: Queue) -> None:
    body = cast.client("viewer").get(url("overview")).content.decode()

    link = re.search(r'<a href="/teams/alpha/review/"[^>]*>Review(.*?)</a>', body)
    assert link is not None
    assert 'class="count">5<' in link.group(1)


def test_nav_count_is_capped(team: Team, cast: Cast) -> None:
    pile = [
        save(team, f"pile-{n}", f"Entry number {n} of the pile.") for n in range(selectors.OPEN_COUNT_CAP + 1)
    ]
    with team_scope(team.id):
        Nudge.objects.bulk_create(
            [Nudge(team=team, kind=NudgeKind.DUE, memory=m, message="due") for m in pile]
        )

    body = cast.client("viewer").get(url("review")).content.decode()

    assert f'class="count">{selectors.OPEN_COUNT_CAP}+<' in body
    assert len(re.findall(r'<li class="nudge ', body)) == selectors.REVIEW_PAGE_SIZE


def test_empty_queue_says_so(cast: Cast, team: Team) -> None:
    body = cast.client("member").get(url("review")).content.decode()

    assert 'id="review-empty"' in body
    assert 'class="count"' not in body


def test_keyset_pages_follow_the_queue_order_across_kinds(team: Team, cast: Cast, queue: Queue) -> None:
    with team_scope(team.id):
        seen: list[uuid.UUID] = []
        page = selectors.review_queue(team=team, page_size=2)
        seen += [n.id for n in page.nudges]
        while page.next_after is not None:
            page = selectors.review_queue(team=team, after=page.next_after, page_size=2)
            seen += [n.id for n in page.nudges]
    assert seen == [n.id for n in queue.in_order()]


def test_next_page_link_and_resolving_keeps_the_place(team: Team, cast: Cast) -> None:
    entries = [save(team, f"note-{n:02d}", f"Note {n} about something else.") for n in range(22)]
    nudges = [open_nudge(team, NudgeKind.DUE, m, minutes_ago=100 - n) for n, m in enumerate(entries)]
    newest_first = nudges[::-1]
    client = cast.client("member")

    first = client.get(url("review"))
    cursor = first.context["next_after"]
    second = client.get(url("review"), {"after": str(cursor)})

    assert [i.nudge.id for i in first.context["items"]] == [n.id for n in newest_first[:20]]
    assert f'href="/teams/alpha/review/?after={cursor}"' in first.content.decode()
    assert [i.nudge.id for i in second.context["items"]] == [n.id for n in newest_first[20:]]
    response = client.post(resolve_url(newest_first[21]), {"action": "confirm", "after": str(cursor)})
    assert response.status_code == 302
    assert response["Location"] == url("review") + f"?after={cursor}"


def test_malformed_or_foreign_cursor_is_404(cast: Cast, queue: Queue, bravo_nudge: Nudge) -> None:
    client = cast.client("member")
    for cursor in ["not-a-uuid", str(uuid.uuid4()), str(bravo_nudge.id)]:
        response = client.get(url("review"), {"after": cursor})
        assert response.status_code == 404, cursor
        assert "zeppelin" not in response.content.decode()


# --- actions -----------------------------------------------------------------------------------


def test_confirm_resolves_a_due_nudge_as_the_signed_in_person(cast: Cast, queue: Queue) -> None:
    client = cast.client("member")
    response = client.post(resolve_url(queue.due_new), {"action": "confirm"})

    assert response.status_code == 302 and response["Location"] == url("review")
    assert state_of(queue.due_new) == (NudgeState.RESOLVED, "confirm", "user:mia")
    with operator_view():
        confirmation = Confirmation.objects.get(memory_id=queue.due_new.memory_id)
        memory = Memory.objects.get(id=queue.due_new.memory_id)
    assert confirmation.confirmed_by == "user:mia"
    assert memory.last_confirmed_at >= confirmation.confirmed_at - dt.timedelta(seconds=1)
    page = client.get(response["Location"])
    assert "Confirmed: deploy-day." in page.content.decode()
    assert queue.due_new.id not in [i.nudge.id for i in page.context["items"]]


def test_confirm_resolves_a_broken_anchor(cast: Cast, queue: Queue) -> None:
    cast.client("member").post(resolve_url(queue.broken), {"action": "confirm"})

    assert state_of(queue.broken) == (NudgeState.RESOLVED, "confirm", "user:mia")
    with operator_view():
        assert Memory.objects.get(id=queue.broken.memory_id).anchor_broken_at is None


def test_dismiss_closes_without_confirming(cast: Cast, queue: Queue) -> None:
    cast.client("member").post(resolve_url(queue.due_old), {"action": "dismiss"})

    assert state_of(queue.due_old) == (NudgeState.DISMISSED, "dismiss", "user:mia")
    with operator_view():
        assert not Confirmation.objects.filter(memory_id=queue.due_old.memory_id).exists()


def test_keep_newer_archives_the_older_entry(cast: Cast, queue: Queue) -> None:
    cast.client("member").post(resolve_url(queue.contradiction), {"action": "supersede"})

    assert state_of(queue.contradiction) == (NudgeState.RESOLVED, "supersede", "user:mia")
    with operator_view():
        older = Memory.objects.get(id=queue.contradiction.other_memory_id)
        newer = Memory.objects.get(id=queue.contradiction.memory_id)
    assert older.archived_at is not None and older.archived_by == "user:mia" and not older.is_active
    assert newer.is_active and newer.contradicted_at is None and newer.confirmed_by_count == 1


def test_both_true_confirms_both_entries(cast: Cast, queue: Queue) -> None:
    cast.client("member").post(resolve_url(queue.contradiction), {"action": "compatible"})

    assert state_of(queue.contradiction) == (NudgeState.RESOLVED, "compatible", "user:mia")
    with operator_view():
        both = list(
            Memory.objects.filter(id__in=[queue.contradiction.memory_id, queue.contradiction.other_memory_id])
        )
    assert all(m.is_active and m.confirmed_by_count == 1 and m.contradicted_at is None for m in both)


def test_archive_accepts_a_prune_proposal(cast: Cast, queue: Queue) -> None:
    cast.client("admin").post(resolve_url(queue.prune), {"action": "archive"})

    assert state_of(queue.prune) == (NudgeState.RESOLVED, "archive", "user:adam")
    with operator_view():
        assert Memory.objects.get(id=queue.prune.memory_id).archived_at is not None


def test_an_action_that_does_not_fit_changes_nothing_and_says_why(cast: Cast, queue: Queue) -> None:
    client = cast.client("member")

    response = client.post(resolve_url(queue.due_new), {"action": "archive"}, follow=True)

    assert response.status_code == 200
    assert "does not resolve a due nudge" in response.content.decode()
    assert state_of(queue.due_new) == (NudgeState.OPEN, "", "")
    with operator_view():
        assert Memory.objects.get(id=queue.due_new.memory_id).is_active


def test_a_closed_nudge_is_not_resolved_twice(cast: Cast, queue: Queue) -> None:
    client = cast.client("member")
    client.post(resolve_url(queue.due_new), {"action": "dismiss"})

    response = client.post(resolve_url(queue.due_new), {"action": "confirm"}, follow=True)

    assert "dismissed already" in response.content.decode()
    assert state_of(queue.due_new) == (NudgeState.DISMISSED, "dismiss", "user:mia")


@pytest.mark.parametrize(
    "nudge_id", ["not-a-uuid", "00000000-0000-0000-0000-000000000000", "7a9e4c2d-1b3f-4e58-8c6d-2f0a9b1e3d75"]
)
def test_bad_nudge_ids_are_404(cast: Cast, queue: Queue, nudge_id: str) -> None:
    response = cast.client("member").post(resolve_url(nudge_id), {"action": "confirm"})

    assert response.status_code == 404


def test_get_on_an_action_is_refused(cast: Cast, queue: Queue) -> None:
    assert cast.client("member").get(resolve_url(queue.due_new)).status_code == 405
    assert state_of(queue.due_new)[0] == NudgeState.OPEN


# --- roles and CSRF -------------------------------------------------------------------------------


def test_viewers_read_the_queue_without_buttons_and_get_403_on_actions(cast: Cast, queue: Queue) -> None:
    viewer = cast.client("viewer")

    page = viewer.get(url("review"))
    body = page.content.decode()
    assert page.status_code == 200 and len(page.context["items"]) == 5
    assert 'name="action"' not in body and "review.js" not in body
    for nudge, action in [
        (queue.due_new, "confirm"),
        (queue.contradiction, "supersede"),
        (queue.prune, "archive"),
        (queue.broken, "dismiss"),
    ]:
        response = viewer.post(resolve_url(nudge), {"action": action})
        assert response.status_code == 403
        assert "this needs the <strong>member</strong> role" in response.content.decode()
        assert state_of(nudge)[0] == NudgeState.OPEN


def test_posts_without_a_csrf_token_are_refused(cast: Cast, queue: Queue) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(cast.member)

    assert client.post(resolve_url(queue.due_new), {"action": "confirm"}).status_code == 403
    assert state_of(queue.due_new)[0] == NudgeState.OPEN


def test_posts_with_the_csrf_token_of_the_page_go_through(cast: Cast, queue: Queue) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(cast.member)
    page = client.get(url("review")).content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)  # type: ignore[union-attr]

    response = client.post(resolve_url(queue.due_new), {"csrfmiddlewaretoken": token, "action": "confirm"})

    assert response.status_code == 302
    assert state_of(queue.due_new) == (NudgeState.RESOLVED, "confirm", "user:mia")


# --- isolation -----------------------------------------------------------------------------------

LEAKS = ["bravo", "Bravo", "zeppelin", "Zeppelin"]


def test_another_teams_review_page_is_404_with_nothing_of_it(
    cast: Cast, queue: Queue, bravo_nudge: Nudge
) -> None:
    # alpha's owner: the strongest role in alpha carries nothing over to bravo.
    response = cast.client("owner").get(url("review", slug="bravo"))

    assert response.status_code == 404
    body = response.content.decode()
    assert not [leak for leak in LEAKS if leak in body]
    assert str(bravo_nudge.id) not in body


def test_another_teams_nudge_is_404_through_either_url_and_stays_open(
    cast: Cast, queue: Queue, bravo_nudge: Nudge
) -> None:
    client = cast.client("owner")
    for slug in ["alpha", "bravo"]:
        for action in ["confirm", "dismiss", "archive"]:
            response = client.post(resolve_url(bravo_nudge, slug=slug), {"action": action})
            assert response.status_code == 404, (slug, action)
            body = response.content.decode()
            assert not [leak for leak in LEAKS if leak in body], (slug, action)
    assert state_of(bravo_nudge) == (NudgeState.OPEN, "", "")
    with operator_view():
        assert not Confirmation.objects.filter(memory_id=bravo_nudge.memory_id).exists()


def test_alphas_queue_shows_nothing_of_bravo(cast: Cast, queue: Queue, bravo_nudge: Nudge) -> None:
    response = cast.client("owner").get(url("review"))

    body = response.content.decode()
    assert len(response.context["items"]) == 5
    assert not [leak for leak in LEAKS if leak in body]
    assert 'class="count">5<' in body


def test_bravos_owner_sees_only_bravos_nudge(cast: Cast, queue: Queue, bravo_nudge: Nudge) -> None:
    response = client_for(cast.outsider).get(url("review", slug="bravo"))

    assert [i.nudge.id for i in response.context["items"]] == [bravo_nudge.id]
    assert "billing" not in response.content.decode()


# --- the overview's freshness panel ------------------------------------------------------------


@pytest.fixture
def freshness_mix(team: Team) -> None:
    """Active entries: 2 fresh, 1 due, 1 anchor broken, 2 contradicted (one of them also
    broken and due: contradicted wins), an identity entry never due; plus inactive
    versions that count for nothing."""
    save(team, "fresh-1", "We write tests first.")
    save(team, "fresh-2", "Code review within a day.", type_name="lesson")
    due = save(team, "due-1", "Releases go out on Thursday.", type_name="decision")
    age(due, 31)
    broken = save(team, "broken-1", "The status page is at status.example.com.")
    both = save(team, "contradicted-1", "The API rate limit is 100 per minute.", type_name="decision")
    age(both, 400)
    plain_contradicted = save(team, "contradicted-2", "Staging resets nightly.")
    identity = save(team, "who-we-are", "We are the platform team.", type_name="identity")
    age(identity, 1000)
    old = save(team, "moved-on", "Old text of a key.", type_name="decision")
    save(team, "moved-on", "New text of the key.", type_name="decision", reason="changed")
    age(old, 400)
    with team_scope(team.id):
        writes.set_freshness_flag(
            team=team, memory_ids=[broken.id, both.id, old.id], flag="anchor_broken_at", on=True
        )
        writes.set_freshness_flag(
            team=team, memory_ids=[both.id, plain_contradicted.id, old.id], flag="contradicted_at", on=True
        )


def test_freshness_panel_counts_active_entries_by_state(cast: Cast, team: Team, freshness_mix: None) -> None:
    response = cast.client("viewer").get(url("overview"))

    counts = response.context["freshness"]
    # fresh: fresh-1, fresh-2, who-we-are (identity is never due), moved-on (new version).
    assert (counts.fresh, counts.due, counts.anchor_broken, counts.contradicted) == (4, 1, 1, 2)
    body = response.content.decode()
    for state, n in [("fresh", 4), ("due", 1), ("anchor_broken", 1), ("contradicted", 2)]:
        assert f'data-state="{state}">{n}</td>' in body
    assert 'href="/teams/alpha/review/"' in body


def test_freshness_counts_are_one_aggregate_query(
    team: Team, freshness_mix: None, django_assert_num_queries: Any
) -> None:
    with team_scope(team.id), django_assert_num_queries(1):
        counts = selectors.freshness_counts(team=team)
    assert counts.total == 8


def test_freshness_counts_follow_the_teams_windows(team: Team, freshness_mix: None) -> None:
    with operator_view():
        Team.objects.filter(id=team.id).update(freshness_decision_days=None)
    team.refresh_from_db()
    with team_scope(team.id):
        counts = selectors.freshness_counts(team=team)
    assert (counts.fresh, counts.due) == (5, 0)


def test_confirmations_per_week_counts_distinct_entries_for_twelve_weeks(
    team: Team, cast: Cast, freshness_mix: None
) -> None:
    today = dt.date(2026, 11, 25)  # a Wednesday; its week starts Monday the 23rd
    with team_scope(team.id):
        for key in ["fresh-1", "fresh-2"]:
            writes.confirm_memory(team=team, key=key, confirmed_by="user:mia")
        writes.confirm_memory(team=team, key="fresh-1", confirmed_by="user:adam")
        writes.confirm_memory(team=team, key="due-1", confirmed_by="user:mia")
        writes.confirm_memory(team=team, key="who-we-are", confirmed_by="user:mia")
        placed = {
            "fresh-1": dt.datetime(2026, 11, 24, 9, tzinfo=dt.UTC),  # this week, twice
            "fresh-2": dt.datetime(2026, 11, 23, 0, 0, 1, tzinfo=dt.UTC),  # this week's first second
            "due-1": dt.datetime(2026, 9, 8, 12, tzinfo=dt.UTC),  # the first of the 12 weeks (Sep 7)
            "who-we-are": dt.datetime(2026, 9, 6, 23, 59, tzinfo=dt.UTC),  # just before them
        }
        for key, when in placed.items():
            Confirmation.objects.filter(team=team, memory__key=key).update(confirmed_at=when)

        weeks = selectors.confirmations_per_week(team=team, weeks=12, today=today)

    assert len(weeks) == 12
    assert weeks[0] == (dt.date(2026, 9, 7), 1)
    assert weeks[-1] == (dt.date(2026, 11, 23), 2)
    assert sum(n for _, n in weeks) == 3
    assert all(day.weekday() == 0 for day, _ in weeks)


def test_overview_draws_the_confirmations_chart(cast: Cast, team: Team, freshness_mix: None) -> None:
    with team_scope(team.id):
        writes.confirm_memory(team=team, key="fresh-1", confirmed_by="user:mia")
    this_monday = timezone.now().date() - dt.timedelta(days=timezone.now().date().weekday())

    body = cast.client("viewer").get(url("overview")).content.decode()

    assert 'id="chart-confirmations-title"' in body
    assert f"{this_monday.isoformat()}: 1" in body
    assert "1 in the last 12 weeks" in body


# --- the overview's freshness jobs ----------------------------------------------------------------


def test_freshness_jobs_show_the_last_run_and_only_this_teams_share_of_it(
    cast: Cast, team: Team, other_team: Team
) -> None:
    from freshness import tasks

    age(save(team, "alpha-due", "Releases go out on Thursday.", type_name="decision"), 40)
    for n in range(3):
        age(
            save(other_team, f"bravo-due-{n}", f"Bravo rule number {n} of the hangar.", type_name="decision"),
            40,
        )

    with operator_view():
        tasks.mark_due()

    body = cast.client("viewer").get(url("overview")).content.decode()
    row = re.search(r'<tr data-job="Mark entries due">(.*?)</tr>', body, re.S)
    assert row is not None
    assert "ok</span>" in row.group(1)
    # The run's own counts (4 due entries over both teams) stay in the admin.
    with operator_view():
        assert JobRun.objects.get(job="freshness.mark_due").outcome["checked"] == 4
    assert '<td class="muted">1 due nudge opened here</td>' in row.group(1)
    assert "bravo" not in body.lower()
    never_run = re.search(r'<tr data-job="Check anchors">(.*?)</tr>', body, re.S)
    assert never_run is not None and "not run yet" in never_run.group(1)


def test_a_failed_run_shows_as_failed(cast: Cast, team: Team, monkeypatch: pytest.MonkeyPatch) -> None:
    from freshness import services, tasks

    def broken(**kwargs: Any) -> None:
        raise RuntimeError("database went away")

    monkeypatch.setattr(services, "propose_prunes", broken)
    with operator_view(), pytest.raises(RuntimeError):
        tasks.propose_prunes()

    body = cast.client("viewer").get(url("overview")).content.decode()
    row = re.search(r'<tr data-job="Propose archiving">(.*?)</tr>', body, re.S)
    assert row is not None and "failed</span>" in row.group(1)


# --- drafts in the review queue -----------------------------------------------------------------


def make_draft(team: Team, key: str, content: str, **extra: Any) -> Draft:
    with team_scope(team.id):
        return Draft.objects.create(
            team=team,
            type=extra.pop("type", "lesson"),
            key=key,
            content=content,
            why="lesson",
            extractor="rules",
            source_session="sess-42",
            source_excerpt=content,
            **extra,
        )


def draft_state(draft: Draft) -> Draft:
    with operator_view():
        return Draft.objects.select_related("memory").get(id=draft.id)


def draft_url(draft: Draft | str, slug: str = "alpha") -> str:
    return url("review_draft", slug=slug, draft_id=str(draft.id if isinstance(draft, Draft) else draft))


def test_pending_drafts_are_in_the_queue_with_a_form_for_members_only(cast: Cast, team: Team) -> None:
    draft = make_draft(team, "redis-flake", "Turns out the CI Redis starts after the tests do.")
    reviewed = make_draft(team, "old-one", "An old reviewed draft that is done.")
    with team_scope(team.id):
        Draft.objects.filter(id=reviewed.id).update(state="rejected", reviewed_at=timezone.now())

    member_body = cast.client("member").get(url("review")).content.decode()
    viewer_body = cast.client("viewer").get(url("review")).content.decode()

    assert f'id="draft-{draft.id}"' in member_body
    assert 'name="content"' in member_body and "sess-42" in member_body
    assert "An old reviewed draft" not in member_body
    assert f'id="draft-{draft.id}"' in viewer_body and 'name="content"' not in viewer_body
    nav = re.search(r"Review\s*<span[^>]*>(\d+)", member_body)
    assert nav is not None and nav.group(1) == "1"


def test_a_draft_found_again_says_how_often(cast: Cast, team: Team) -> None:
    once = make_draft(team, "redis-flake", "Turns out the CI Redis starts after the tests do.")
    again = make_draft(
        team, "npm-ci", "npm ci needs the lock file.", corroborated=3, last_corroborated_at=timezone.now()
    )

    body = cast.client("viewer").get(url("review")).content.decode()

    assert f'id="draft-{once.id}"' in body and f'id="draft-{again.id}"' in body
    assert body.count("Found again") == 1 and "Found again 3 times since" in body


def test_a_member_accepts_an_edited_draft_with_its_provenance(cast: Cast, team: Team) -> None:
    draft = make_draft(team, "redis-flake", "Turns out the CI Redis starts after the tests do.")

    response = cast.client("member").post(
        draft_url(draft),
        {
            "action": "accept",
            "type": "lesson",
            "key": "ci-redis-start-order",
            "content": "CI: wait for Redis before the tests start (it starts after them).",
            "into_key": "",
        },
        follow=True,
    )

    assert "Accepted: ci-redis-start-order." in response.content.decode()
    stored = draft_state(draft)
    assert stored.state == "accepted" and stored.reviewed_by == "user:mia"
    assert stored.memory is not None and stored.memory.key == "ci-redis-start-order"
    assert stored.memory.content == "CI: wait for Redis before the tests start (it starts after them)."
    assert stored.memory.metadata["draft"]["source_session"] == "sess-42"
    assert stored.memory.metadata["draft"]["reviewed_by"] == "user:mia"


def test_a_draft_merged_into_the_entry_it_duplicates_supersedes_it(cast: Cast, team: Team) -> None:
    existing = save(team, "deploy-day", "We deploy on Tuesdays.", type_name="decision")
    draft = make_draft(
        team,
        "deploy-tuesday",
        "Deploys happen on Tuesday afternoons.",
        conflict="duplicate",
        conflict_memory=existing,
    )
    page = cast.client("member").get(url("review")).content.decode()
    assert f'id="draft-{draft.id}-into" class="mono" maxlength="200" value="deploy-day"' in page

    cast.client("member").post(draft_url(draft), {"action": "merge", "into_key": "deploy-day"})

    stored = draft_state(draft)
    assert stored.state == "merged" and stored.memory is not None
    assert stored.memory.key == "deploy-day" and stored.memory.supersedes_id == existing.id
    assert "Deploys happen on Tuesday afternoons." in stored.memory.content


def test_rejecting_a_draft_stores_nothing(cast: Cast, team: Team) -> None:
    draft = make_draft(team, "noise", "Something nobody wants to keep around.")

    cast.client("member").post(draft_url(draft), {"action": "reject"})

    assert draft_state(draft).state == "rejected"
    with team_scope(team.id):
        assert not Memory.objects.filter(team=team, key="noise").exists()


def test_accepting_onto_a_taken_key_says_why_and_keeps_the_draft_pending(cast: Cast, team: Team) -> None:
    save(team, "deploy-day", "We deploy on Tuesdays.")
    draft = make_draft(team, "deploy-day", "We deploy on Wednesdays now.")

    response = cast.client("member").post(
        draft_url(draft), {"action": "accept", "key": "deploy-day", "content": draft.content}, follow=True
    )

    assert "already has an active entry" in response.content.decode()
    assert draft_state(draft).state == "pending"


def test_viewers_cannot_review_drafts(cast: Cast, team: Team) -> None:
    draft = make_draft(team, "noise", "Something nobody wants to keep around.")

    response = cast.client("viewer").post(draft_url(draft), {"action": "reject"})

    assert response.status_code == 403
    assert draft_state(draft).state == "pending"


def test_another_teams_draft_is_404_with_nothing_of_it(cast: Cast, team: Team, other_team: Team) -> None:
    theirs = make_draft(other_team, "bravo-zeppelin", "Bravo inflates the zeppelin at dawn.")

    for target in (draft_url(theirs), draft_url(theirs, slug="bravo"), draft_url("not-a-uuid")):
        response = cast.client("member").post(target, {"action": "reject"})
        assert response.status_code == 404, target
        assert b"zeppelin" not in response.content
    assert b"zeppelin" not in cast.client("member").get(url("review")).content
    assert draft_state(theirs).state == "pending"


# --- fact drafts and fact contradictions in the review queue --------------------------------------


def make_fact_draft(team: Team, entity: str, key: str, value: str) -> Draft:
    return make_draft(
        team,
        f"{entity}/{key}",
        f"{entity}/{key} = {value}",
        type="fact",
        kind="fact",
        entity=entity,
        fact_key=key,
        value=value,
    )


def test_a_fact_draft_offers_its_value_and_accept_sets_the_fact(cast: Cast, team: Team) -> None:
    draft = make_fact_draft(team, "payments", "provider", "Paddle")

    body = cast.client("member").get(url("review")).content.decode()
    assert f'id="draft-{draft.id}-value"' in body and 'value="Paddle"' in body
    assert 'name="into_key"' not in body  # a fact is not merged

    response = cast.client("member").post(
        draft_url(draft), {"action": "accept", "value": "Paddle Billing"}, follow=True
    )

    assert "Accepted: payments/provider." in response.content.decode()
    with operator_view():
        fact = Fact.objects.get(team=team, entity="payments", key="provider", is_active=True)
    assert fact.value == "Paddle Billing" and fact.source_draft == draft.id and fact.updated_by == "user:mia"


def test_a_fact_contradiction_masks_a_high_value_and_keeps_or_sets_the_fact(cast: Cast, team: Team) -> None:
    with team_scope(team.id):
        public = set_fact(team=team, entity="payments", key="provider", value="Paddle", actor="t").fact
        secret = set_fact(
            team=team, entity="vault", key="region", value="alpha-Secret-77", actor="t", sensitivity="high"
        ).fact
        plain = open_fact_contradiction(team=team, fact=public, extracted_value="Stripe", source_session="s1")
        hidden = open_fact_contradiction(team=team, fact=secret, extracted_value="Other-9", source_session="")
    assert plain is not None and hidden is not None

    body = cast.client("member").get(url("review")).content.decode()

    assert "Fact contradiction" in body and "Stripe" in body and "Paddle" in body
    assert "alpha-Secret-77" not in body and "Other-9" not in body and "hidden (high sensitivity)" in body
    assert 'aria-keyshortcuts="u"' in body

    response = cast.client("member").post(resolve_url(plain), {"action": "supersede"}, follow=True)
    assert "Set the new value: payments/provider." in response.content.decode()
    response = cast.client("member").post(resolve_url(hidden), {"action": "dismiss"}, follow=True)
    assert "Kept the current value: vault/region." in response.content.decode()
    with operator_view():
        current = Fact.objects.get(team=team, entity="payments", is_active=True)
        assert current.value == "Stripe" and current.supersede_reason == "from conversation s1"
        assert Fact.objects.get(team=team, entity="vault", is_active=True).value == "alpha-Secret-77"
