"""One anchor's failure is that anchor's outcome, never the run's: anchors stored before
their URLs were validated (rows written directly), and an unexpected failure while one
anchor is checked, leave every other anchor of every team checked in the same run."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.cache import cache
from django.db import connection
from django.test import override_settings

from freshness import anchor_checks, anchor_http, tasks
from freshness.models import AnchorCheck, Nudge, NudgeKind
from memories import writes
from memories.models import Memory
from teams.models import JobRun, Team
from teams.scope import team_scope
from teams.services import shutdown_team
from tests.conftest import operator_view
from tests.freshness.anchor_site import Site

JOB_SETTINGS = {
    "MEMORYHUB_ANCHOR_ALLOWED_NETWORKS": ["127.0.0.0/8"],
    "MEMORYHUB_ANCHOR_CHECK_INTERVAL_SECONDS": 0,
    "MEMORYHUB_ANCHOR_READ_TIMEOUT": 0.5,
    "MEMORYHUB_ANCHOR_FAILURES_TO_FLAG": 2,
}


@pytest.fixture(autouse=True)
def _clean_backoff() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


def anchored(team: Team, key: str, anchor: dict[str, Any] | None) -> Memory:
    with team_scope(team.id):
        writes.save_memory(
            team=team, key=key, content=f"{key}: see the anchor.", anchor=anchor, updated_by="t"
        )
        return Memory.objects.get(team=team, key=key, is_active=True)


def stored_directly(team: Team, key: str, anchor: Any) -> Memory:
    """An entry whose anchor was written without the save's validation (a row from before
    it existed): saved without an anchor, then given one by SQL."""
    memory = anchored(team, key, None)
    with operator_view(), connection.cursor() as cursor:
        cursor.execute(
            "UPDATE memories_memory SET anchor = %s::jsonb WHERE id = %s", [json.dumps(anchor), memory.id]
        )
    return memory


def checks_of(memory: Memory) -> list[tuple[bool, str]]:
    with operator_view():
        return list(
            AnchorCheck.objects.filter(memory=memory).order_by("checked_at", "id").values_list("ok", "detail")
        )


def flagged(memory: Memory) -> tuple[bool, int]:
    with operator_view():
        row = Memory.objects.get(id=memory.id)
        nudges = Nudge.objects.filter(memory=memory, kind=NudgeKind.ANCHOR_BROKEN).count()
    return row.anchor_broken_at is not None, nudges


@pytest.mark.django_db
@override_settings(**JOB_SETTINGS)
def test_anchors_stored_before_validation_are_failed_checks_and_every_other_anchor_is_checked(
    site: Site, team: Team, other_team: Team
) -> None:
    site.serve("/alpha", body=b"alpha runbook")
    site.serve("/bravo", body=b"bravo runbook")
    alpha_good = anchored(team, "alpha-good", {"type": "url", "value": site.url("/alpha")})
    bad_shapes = {
        "octal-host": {"type": "url", "value": f"http://0177.0.0.1:{site.port}/alpha"},
        "integer-host": {"type": "url", "value": f"http://2130706433:{site.port}/alpha"},
        "bad-port": {"type": "api", "value": "http://127.0.0.1:99999/alpha"},
        "bad-idna": {"type": "url", "value": "http://xn--/"},
        "not-a-string": {"type": "url", "value": 12},
        "no-value": {"type": "url"},
        "list-expect": {"type": "url", "value": site.url("/alpha"), "expect": ["runbook"]},
        "credentials": {"type": "url", "value": f"http://user:pw@127.0.0.1:{site.port}/alpha"},
    }
    bad = {key: stored_directly(team, key, anchor) for key, anchor in bad_shapes.items()}
    bravo_good = anchored(other_team, "bravo-good", {"type": "url", "value": site.url("/bravo")})
    bravo_gone = anchored(other_team, "bravo-gone", {"type": "url", "value": site.url("/bravo-gone")})

    first = anchor_checks.check_anchors()
    second = tasks.check_anchors()

    assert (first.teams, first.checked, first.ok, first.broken) == (2, 11, 2, 9)
    assert (first.invalid, first.errors) == (8, 0)
    assert second["checked"] == 11 and second["flagged"] == 9
    assert [ok for ok, _ in checks_of(alpha_good)] == [True, True]
    assert [ok for ok, _ in checks_of(bravo_good)] == [True, True]
    assert checks_of(bravo_gone) == [(False, "status 404"), (False, "status 404")]
    for key, memory in bad.items():
        details = checks_of(memory)
        assert [ok for ok, _ in details] == [False, False], key
        assert details[0][1].startswith("invalid anchor: "), (key, details)
        assert flagged(memory) == (True, 1), key
    # A refused anchor is never fetched: only the good ones reached the site.
    assert site.hits == {"/alpha": 2, "/bravo": 2, "/bravo-gone": 2}
    run = JobRun.objects.get(job="freshness.check_anchors")
    assert run.succeeded and run.outcome["invalid"] == 8 and run.outcome["errors"] == 0
    with operator_view():
        nudge = Nudge.objects.get(memory=bad["octal-host"], kind=NudgeKind.ANCHOR_BROKEN)
    assert "invalid anchor" in nudge.message and "Fix the anchor" in nudge.message


@pytest.mark.django_db
@override_settings(**JOB_SETTINGS)
def test_an_unexpected_failure_while_checking_one_anchor_is_that_anchors_error_outcome(
    site: Site, team: Team, other_team: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The resolver fails in a way no check expects (the worker cannot start a thread):
    that anchor gets an error outcome and follows the flag rule like any failed check;
    the other anchors of its team and of the other team are checked in the same run."""
    site.serve("/alpha", body=b"alpha")
    site.serve("/bravo", body=b"bravo")
    real = socket.getaddrinfo

    def resolve(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        if host == "flaky.example":
            raise RuntimeError("can't start new thread")
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(anchor_http.socket, "getaddrinfo", resolve)
    flaky = anchored(team, "flaky", {"type": "url", "value": f"http://flaky.example:{site.port}/alpha"})
    alpha = anchored(team, "alpha", {"type": "url", "value": site.url("/alpha")})
    bravo = anchored(other_team, "bravo", {"type": "url", "value": site.url("/bravo")})

    runs = [anchor_checks.check_anchors(), anchor_checks.check_anchors()]

    assert [(r.checked, r.ok, r.broken, r.errors) for r in runs] == [(3, 2, 1, 1), (3, 2, 1, 1)]
    assert checks_of(flaky) == [(False, "check error (RuntimeError)")] * 2
    assert flagged(flaky) == (True, 1)
    assert [ok for ok, _ in checks_of(alpha)] == [True, True]
    assert [ok for ok, _ in checks_of(bravo)] == [True, True]


@pytest.mark.django_db
@override_settings(**JOB_SETTINGS)
def test_the_reported_anchor_no_longer_stops_the_other_teams_checks(
    site: Site, team: Team, other_team: Team
) -> None:
    """The review's case: a write token's anchor `http://0177.0.0.1:18555/h`, stored, made
    the hourly run die with InvalidURL before any anchor of any team was checked."""
    site.serve("/bravo", body=b"bravo")
    octal = stored_directly(team, "octal", {"type": "url", "value": "http://0177.0.0.1:18555/h"})
    bravo = anchored(other_team, "bravo", {"type": "url", "value": site.url("/bravo")})

    outcome = tasks.check_anchors()

    assert (outcome["checked"], outcome["ok"], outcome["invalid"], outcome["errors"]) == (2, 1, 1, 0)
    assert checks_of(octal) == [
        (False, "invalid anchor: not a valid URL (Invalid IPv4 address: '0177.0.0.1')")
    ]
    assert [ok for ok, _ in checks_of(bravo)] == [True]
    assert JobRun.objects.get(job="freshness.check_anchors").succeeded


@pytest.mark.django_db(transaction=True)
@override_settings(**JOB_SETTINGS)
def test_a_team_shut_down_while_its_anchors_are_fetched_costs_only_its_own_recording(
    site: Site, team: Team, other_team: Team
) -> None:
    """The recording step: an operator shuts a team down while the run fetches its anchor
    (the site's answer waits for it), so its results can no longer be recorded; they are
    logged and counted, and the other team's are recorded in the same run."""

    def shut_down() -> None:
        try:
            shutdown_team(team=Team.objects.get(id=team.id), actor="operator")
        finally:
            connection.close()  # this server thread's own connection

    site.serve("/alpha", body=b"alpha")
    site.serve("/bravo", body=b"bravo")
    site.before["/alpha"] = shut_down
    anchored(team, "alpha", {"type": "url", "value": site.url("/alpha")})
    bravo = anchored(other_team, "bravo", {"type": "url", "value": site.url("/bravo")})

    run = anchor_checks.check_anchors()

    assert (run.checked, run.ok, run.errors) == (2, 2, 1)
    assert not Team.objects.filter(id=team.id).exists()
    assert checks_of(bravo) == [(True, "")]
