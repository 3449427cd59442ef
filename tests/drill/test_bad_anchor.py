"""Fault drill: one team's bad anchors never stop the other teams' anchor checks.

A team tries to save the anchor a security review reported (`http://0177.0.0.1:.../h`,
refused with a 400 now) and holds anchors stored before URLs were validated (rows
written by SQL: numeric hosts, a bad port, an IDNA failure, a value that is no string, an
`expect` that is a list, credentials, no value). Other teams hold good anchors, some of
them broken (404) on purpose. The real anchor job runs once on a real Celery worker
against a local HTTP server: the run succeeds, every anchor of every team gets its
outcome in that one run, and the bad rows are failed checks that were never fetched."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test import override_settings

from freshness import tasks as freshness_tasks
from freshness.models import AnchorCheck
from memories import writes
from teams.models import JobRun, Team
from teams.scope import team_scope
from tests.conftest import make_agent, operator_view
from tests.drill.record import record
from tests.factories import TeamFactory
from tests.freshness.anchor_site import Site
from tests.worker import CeleryProcess, wait_for

pytestmark = [pytest.mark.drill, pytest.mark.django_db(transaction=True)]

OTHER_TEAMS = 4
ANCHORS_PER_TEAM = 20
GONE_PER_TEAM = 2  # of which answer 404
RUN_SECONDS = 180.0  # a hang detector; the run's time is recorded, not asserted


def bad_anchors(port: int) -> dict[str, Any]:
    return {
        "reported-octal": {"type": "url", "value": f"http://0177.0.0.1:{port}/h"},
        "hex-host": {"type": "url", "value": f"http://0x7f.1:{port}/h"},
        "integer-host": {"type": "api", "value": f"http://2130706433:{port}/h"},
        "bad-port": {"type": "url", "value": "http://127.0.0.1:99999/h"},
        "bad-idna": {"type": "url", "value": "http://xn--/"},
        "not-a-string": {"type": "url", "value": 12},
        "list-expect": {"type": "url", "value": f"http://127.0.0.1:{port}/h", "expect": ["ok"]},
        "credentials": {"type": "url", "value": f"http://user:pw@127.0.0.1:{port}/h"},
        "no-value": {"type": "url"},
    }


def save(team: Team, key: str, anchor: dict[str, Any] | None) -> Any:
    with team_scope(team.id):
        return writes.save_memory(
            team=team, key=key, content=f"{team.slug}: {key}.", anchor=anchor, updated_by="drill"
        ).memory.id


@override_settings(MEMORYHUB_ANCHOR_ALLOWED_NETWORKS=["127.0.0.1/32"])
def test_a_teams_bad_anchors_never_stop_the_other_teams_checks(
    start_worker: Callable[..., CeleryProcess], site: Site
) -> None:
    bad_team = TeamFactory(slug="drill-bad-anchors")
    writer = make_agent(bad_team, "writer", ["read", "write"])
    refused = writer.client.post(
        writer.url("memories/"),
        {"key": "reported", "content": "Anchored.", "anchor": bad_anchors(18555)["reported-octal"]},
        format="json",
    )
    assert refused.status_code == 400 and "anchor" in refused.json()["fields"], refused.content
    site.serve("/bad-team/page", body=b"the bad team's good page")
    bad_team_good = save(bad_team, "good-page", {"type": "url", "value": site.url("/bad-team/page")})
    bad_rows = {}
    for key, anchor in bad_anchors(site.port).items():
        memory_id = save(bad_team, key, None)
        with operator_view(), connection.cursor() as cursor:
            cursor.execute(
                "UPDATE memories_memory SET anchor = %s::jsonb WHERE id = %s", [json.dumps(anchor), memory_id]
            )
        bad_rows[key] = memory_id

    others: dict[int, list[Any]] = {}
    for number in range(OTHER_TEAMS):
        team = TeamFactory(slug=f"drill-anchors-{number}")
        others[team.id] = []
        for page in range(ANCHORS_PER_TEAM):
            path = f"/team-{number}/page-{page}"
            if page >= GONE_PER_TEAM:
                site.serve(path, body=f"runbook {number}-{page}".encode())
            anchor = {"type": "url", "value": site.url(path), **({"expect": "runbook"} if page % 2 else {})}
            others[team.id].append(save(team, f"page-{page}", anchor))

    start_worker(
        MEMORYHUB_ANCHOR_ALLOWED_NETWORKS="127.0.0.1/32", MEMORYHUB_ANCHOR_CHECK_INTERVAL_SECONDS="0"
    )
    freshness_tasks.check_anchors.delay()

    def finished() -> JobRun | None:
        return JobRun.objects.filter(job="freshness.check_anchors", finished_at__isnull=False).first()

    wait_for(lambda: finished() is not None, RUN_SECONDS, "the anchor job's run")
    run = finished()
    assert run is not None and run.succeeded, run and run.error
    outcome = run.outcome
    good = OTHER_TEAMS * ANCHORS_PER_TEAM + 1
    gone = OTHER_TEAMS * GONE_PER_TEAM
    assert (outcome["checked"], outcome["ok"], outcome["broken"]) == (
        good + len(bad_rows),
        good - gone,
        gone + len(bad_rows),
    )
    assert (outcome["invalid"], outcome["errors"], outcome["teams"]) == (len(bad_rows), 0, OTHER_TEAMS + 1)
    with operator_view():
        checked = dict(
            AnchorCheck.objects.values_list("memory_id", "ok").filter(
                memory_id__in=[*bad_rows.values(), bad_team_good]
            )
        )
        per_team = {
            team_id: AnchorCheck.objects.filter(team_id=team_id, memory_id__in=ids).count()
            for team_id, ids in others.items()
        }
        details = set(
            AnchorCheck.objects.filter(memory_id__in=bad_rows.values()).values_list("detail", flat=True)
        )
    assert checked == {**{memory_id: False for memory_id in bad_rows.values()}, bad_team_good: True}
    assert per_team == {team_id: ANCHORS_PER_TEAM for team_id in others}
    assert all(detail.startswith("invalid anchor: ") for detail in details), details
    assert "/h" not in site.hits  # no bad row was fetched
    assert run.finished_at is not None
    record(
        "a team's bad anchors in the anchor job",
        teams=OTHER_TEAMS + 1,
        anchors_due=outcome["checked"],
        checked=outcome["checked"],
        ok=outcome["ok"],
        failed=outcome["broken"],
        of_which_invalid_rows_never_fetched=outcome["invalid"],
        errors=outcome["errors"],
        other_teams_anchors_checked=f"{sum(per_team.values())} of {OTHER_TEAMS * ANCHORS_PER_TEAM}",
        run_seconds=round((run.finished_at - run.started_at).total_seconds(), 2),
    )
