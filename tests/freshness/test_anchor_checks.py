"""Anchored verification: the SSRF guard, the HTTP check against a real local
server, the flag rule and its nudge, per-host backoff, the job across two teams, the
file-anchor report API, and a real beat and worker flagging a broken URL anchor."""

from __future__ import annotations

import importlib
import ipaddress
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.apps import apps
from django.core.cache import cache
from django.test import override_settings
from django_celery_beat.models import PeriodicTask

from freshness import anchor_checks, anchor_http
from freshness.anchor_http import (
    FetchPolicy,
    address_allowed,
    check_anchor_url,
    guarded_client,
    parse_networks,
)
from freshness.models import AnchorCheck, Nudge, NudgeKind, NudgeState
from memories import writes
from memories.models import Memory
from teams.models import JobRun, Team
from teams.scope import team_scope
from tests.conftest import Agent, operator_view
from tests.freshness.anchor_site import Site
from tests.worker import CeleryProcess, schedule_every_second, wait_for

JOB_MIGRATION = importlib.import_module("freshness.migrations.0006_anchor_check_job")
LOCAL = ["127.0.0.0/8"]
JOB_SECONDS = 60.0  # a hang detector


@pytest.fixture(autouse=True)
def _clean_backoff() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


def policy(allowed: list[str] | None = None, **overrides: Any) -> FetchPolicy:
    options: dict[str, Any] = {
        "allowed_networks": parse_networks(LOCAL if allowed is None else allowed),
        "connect_timeout": 2.0,
        "read_timeout": 0.5,
        "max_redirects": 3,
        "deadline_seconds": 5.0,
        **overrides,
    }
    return FetchPolicy(**options)


def check(url: str, expect: int | str | None = None, fetch_policy: FetchPolicy | None = None) -> Any:
    fetch_policy = fetch_policy or policy()
    with guarded_client(fetch_policy) as client:
        return check_anchor_url(client, url, expect, fetch_policy)


JOB_SETTINGS = {
    "MEMORYHUB_ANCHOR_ALLOWED_NETWORKS": LOCAL,
    "MEMORYHUB_ANCHOR_CHECK_INTERVAL_SECONDS": 0,
    "MEMORYHUB_ANCHOR_READ_TIMEOUT": 0.5,
    "MEMORYHUB_ANCHOR_FAILURES_TO_FLAG": 2,
}


# --------------------------------------------------------------------------- the SSRF guard


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "127.5.5.5",
        "10.1.2.3",
        "172.16.0.1",
        "172.31.255.254",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",  # noqa: S104 (an address to refuse, not a bind)
        "224.0.0.1",
        "240.0.0.1",
        "255.255.255.255",
        "::1",
        "::",
        "fc00::1",
        "fd12:3456::1",
        "fe80::1",
        "ff02::1",
        "::ffff:127.0.0.1",
        "::ffff:169.254.169.254",
        "::7f00:1",
        "2002:7f00:1::1",
        "2002:a00:1::1",
        "64:ff9b::a00:1",
        "2001:0:4136:e378:8000:63bf:3fff:fdd2",
    ],
)
def test_the_guard_refuses_addresses_that_are_not_public(address: str) -> None:
    assert not address_allowed(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", ["93.184.215.14", "8.8.8.8", "2606:4700:4700::1111"])
def test_the_guard_lets_public_addresses_through(address: str) -> None:
    assert address_allowed(ipaddress.ip_address(address))


def test_the_operators_allow_list_lets_its_networks_through_and_no_others() -> None:
    allowed = parse_networks(["127.0.0.1/32", "10.9.0.0/16"])

    assert address_allowed(ipaddress.ip_address("127.0.0.1"), allowed)
    assert address_allowed(ipaddress.ip_address("::ffff:127.0.0.1"), allowed)
    assert address_allowed(ipaddress.ip_address("10.9.8.7"), allowed)
    assert not address_allowed(ipaddress.ip_address("127.0.0.2"), allowed)
    assert not address_allowed(ipaddress.ip_address("10.8.0.1"), allowed)
    assert not address_allowed(ipaddress.ip_address("169.254.169.254"), allowed)


def test_a_hostname_resolving_to_loopback_is_refused_and_never_connected(site: Site) -> None:
    site.serve("/page", body=b"hello")

    with pytest.raises(anchor_http.BlockedAddress):
        anchor_http.vetted_address("localhost", site.port, ())
    result = check(site.url("/page", host="localhost"), fetch_policy=policy(allowed=[]))
    direct = check(site.url("/page"), fetch_policy=policy(allowed=[]))

    assert (result.ok, result.detail) == (False, "blocked address")
    assert (direct.ok, direct.detail) == (False, "blocked address")
    assert site.hits == {}


def test_the_connection_goes_to_the_address_that_was_vetted_not_a_second_answer(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DNS rebinding: the name is resolved once, by the guard, and the socket connects to
    that address; a later answer (here a private one) never reaches the socket."""
    site.serve("/page", body=b"hello")
    answers = ["127.0.0.1", "10.0.0.1"]
    calls: list[str] = []
    real = socket.getaddrinfo

    def resolve(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        if host != "anchor.example":  # the socket's own lookup of an address literal
            return real(host, port, *args, **kwargs)
        calls.append(host)
        address = answers[min(len(calls) - 1, 1)]
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

    monkeypatch.setattr(anchor_http.socket, "getaddrinfo", resolve)

    result = check(site.url("/page", host="anchor.example"), fetch_policy=policy(allowed=["127.0.0.1/32"]))

    assert result.ok, result
    assert calls == ["anchor.example"]
    assert site.hosts == [f"anchor.example:{site.port}"]


def test_the_peer_an_answer_came_from_is_vetted_again_before_the_body_is_read(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    site.serve("/page", body=b"hello")
    # A resolver that let anything through: the peer check still refuses loopback.
    monkeypatch.setattr(anchor_http, "vetted_address", lambda host, port, allowed, **_: host)

    result = check(site.url("/page"), expect="hello", fetch_policy=policy(allowed=[]))

    assert (result.ok, result.detail) == (False, "blocked address")


def test_a_resolver_that_does_not_answer_costs_the_connect_timeout_and_backs_the_host_off(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The system resolver waits its own attempts x timeout per name server; a check waits
    for a name no longer than its connect timeout."""
    released, answered = threading.Event(), threading.Event()
    real = socket.getaddrinfo

    def silent(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        if host != "silent.example":
            return real(host, port, *args, **kwargs)
        released.wait(30)  # a resolver that never answers (released at the end)
        answered.set()
        raise socket.gaierror("no answer")

    monkeypatch.setattr(anchor_http.socket, "getaddrinfo", silent)
    try:
        result = check(site.url("/page", host="silent.example"), fetch_policy=policy(connect_timeout=0.3))
        gave_up_before_the_resolver_answered = not answered.is_set()
    finally:
        released.set()

    assert (result.ok, result.detail, result.host_trouble) == (False, "timeout", True)
    # Without the bound the check waits for the resolver's answer (30 s here).
    assert gave_up_before_the_resolver_answered


# --------------------------------------------------------------------------- the HTTP check


def test_the_check_judges_status_expected_text_redirects_and_timeouts(site: Site) -> None:
    site.serve("/page", body=b"<h1>Runbook</h1> deploy with helm")
    site.serve("/moved", status=301, Location="/page")
    site.serve("/loop", status=302, Location="/loop")
    site.serve("/slow", body=b"late", delay=2.0)
    site.serve("/busy", status=503)
    site.serve("/big", body=b"x" * (anchor_http.MAX_BODY_BYTES + 10) + b"needle")
    site.serve("/away", status=302, Location=site.url("/page", host="127.0.0.2"))

    assert check(site.url("/page")).ok
    assert check(site.url("/page"), expect="deploy with helm").ok
    assert check(site.url("/moved"), expect="deploy with helm").ok  # redirects followed
    assert check(site.url("/moved"), expect=301).ok  # a 3xx expected: judged on the first answer
    assert check(site.url("/page"), expect=200).ok
    outcomes = {
        "missing text": check(site.url("/page"), expect="terraform"),
        "404": check(site.url("/gone")),
        "wrong status": check(site.url("/page"), expect=204),
        "loop": check(site.url("/loop")),
        "slow": check(site.url("/slow")),
        "busy": check(site.url("/busy")),
        "past the bound": check(site.url("/big"), expect="needle"),
        "redirect to a refused address": check(site.url("/away"), fetch_policy=policy(["127.0.0.1/32"])),
    }

    found = {name: (r.ok, r.status, r.detail, r.host_trouble) for name, r in outcomes.items()}
    assert found == {
        "missing text": (False, 200, "expected text missing", False),
        "404": (False, 404, "status 404", False),
        "wrong status": (False, 200, "expected status 204, got 200", False),
        "loop": (False, None, "too many redirects", False),
        "slow": (False, None, "timeout", True),
        "busy": (False, 503, "status 503", True),
        "past the bound": (False, 200, "expected text missing", False),
        "redirect to a refused address": (False, None, "blocked address", False),
    }
    assert site.hits["/loop"] == 4  # the first answer and max_redirects more
    assert all("<h1>" not in r.detail for r in outcomes.values())


# --------------------------------------------------------------------------- the job and flags


def _anchored(team: Team, key: str, anchor: dict[str, Any]) -> Memory:
    with team_scope(team.id):
        writes.save_memory(
            team=team, key=key, content=f"{key}: see the anchor.", anchor=anchor, updated_by="t"
        )
        return Memory.objects.get(team=team, key=key, is_active=True)


def _state(memory: Memory) -> tuple[bool, list[str]]:
    with operator_view():
        fresh = Memory.objects.get(id=memory.id)
        nudges = list(
            Nudge.objects.filter(memory=memory, kind=NudgeKind.ANCHOR_BROKEN).values_list("state", flat=True)
        )
    return fresh.anchor_broken_at is not None, sorted(nudges)


@pytest.mark.django_db
@override_settings(**JOB_SETTINGS)
def test_a_url_anchor_breaks_is_flagged_with_one_nudge_and_is_lowered_when_it_answers_again(
    site: Site, team: Team
) -> None:
    site.serve("/runbook", body=b"deploy with helm")
    memory = _anchored(team, "runbook", {"type": "url", "value": site.url("/runbook"), "expect": "helm"})
    with operator_view():
        before = Memory.objects.filter(id=memory.id).values_list("updated_at", flat=True).get()

    first = anchor_checks.check_anchors()
    assert (first.checked, first.ok, first.broken) == (1, 1, 0)
    assert _state(memory) == (False, [])

    site.serve("/runbook", status=404)
    anchor_checks.check_anchors()
    assert _state(memory) == (False, [])  # one failure does not flag: two in a row do
    second = anchor_checks.check_anchors()
    assert (second.broken, second.flagged) == (1, 1)
    assert _state(memory) == (True, ["open"])
    anchor_checks.check_anchors()
    assert _state(memory) == (True, ["open"])  # idempotent: still one nudge
    with operator_view():
        nudge = Nudge.objects.get(memory=memory, kind=NudgeKind.ANCHOR_BROKEN)
        versions = Memory.objects.filter(team=team, key="runbook").count()
        after = Memory.objects.filter(id=memory.id).values_list("updated_at", flat=True).get()
    assert nudge.details["status"] == 404 and nudge.details["detail"] == "status 404"
    assert "'runbook'" in nudge.message and "status 404" in nudge.message and "supersede" in nudge.message
    assert versions == 1 and after == before  # a flag is no new version and moves no updated_at

    site.serve("/runbook", body=b"deploy with helm")
    back = anchor_checks.check_anchors()
    assert (back.ok, back.unflagged) == (1, 1)
    assert _state(memory) == (False, ["resolved"])
    with operator_view():
        checks = list(
            AnchorCheck.objects.filter(memory=memory).order_by("checked_at", "id").values_list("ok")
        )
    assert [ok for (ok,) in checks] == [True, False, False, False, True]


@pytest.mark.django_db
@override_settings(**{**JOB_SETTINGS, "MEMORYHUB_ANCHOR_CHECK_INTERVAL_SECONDS": 3600})
def test_an_anchor_is_checked_at_most_once_per_interval_and_a_run_is_bounded(site: Site, team: Team) -> None:
    site.serve("/a", body=b"ok")
    for number in range(3):
        _anchored(team, f"page-{number}", {"type": "url", "value": site.url("/a")})
    _anchored(team, "a-file", {"type": "file", "value": "docs/a.md"})

    first = anchor_checks.check_anchors(limit=2)
    second = anchor_checks.check_anchors(limit=2)
    third = anchor_checks.check_anchors(limit=2)

    assert (first.checked, second.checked, third.checked) == (2, 1, 0)
    assert site.hits["/a"] == 3


@pytest.mark.django_db
@override_settings(**JOB_SETTINGS, MEMORYHUB_ANCHOR_BACKOFF_BASE_SECONDS=60)
def test_a_troubled_host_is_backed_off_exponentially_and_skipped_meanwhile(
    site: Site, team: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    site.serve("/busy", status=503)
    _anchored(team, "busy", {"type": "url", "value": site.url("/busy")})
    clock = [1_000_000.0]
    monkeypatch.setattr(anchor_checks, "_clock", lambda: clock[0])

    first = anchor_checks.check_anchors()
    skipped = anchor_checks.check_anchors()
    clock[0] += 61  # past the first wait (60 s)
    again = anchor_checks.check_anchors()
    clock[0] += 61  # the second wait is 120 s: still backed off
    still = anchor_checks.check_anchors()
    clock[0] += 60
    site.serve("/busy", body=b"fine")
    recovered = anchor_checks.check_anchors()
    after = anchor_checks.check_anchors()

    assert [(r.checked, r.skipped) for r in (first, skipped, again, still, recovered, after)] == [
        (1, 0), (0, 1), (1, 0), (0, 1), (1, 0), (1, 0),
    ]  # fmt: skip
    assert site.hits["/busy"] == 4


@pytest.mark.django_db
@override_settings(**JOB_SETTINGS, MEMORYHUB_ANCHOR_KEEP_CHECKS=3)
def test_only_the_newest_checks_of_an_entry_are_kept(site: Site, team: Team) -> None:
    site.serve("/a", body=b"ok")
    memory = _anchored(team, "page", {"type": "url", "value": site.url("/a")})

    for _ in range(5):
        anchor_checks.check_anchors()

    with operator_view():
        assert AnchorCheck.objects.filter(memory=memory).count() == 3


@pytest.mark.django_db
@override_settings(**JOB_SETTINGS)
def test_the_job_checks_each_team_in_its_scope_and_one_teams_checks_stay_its_own(
    site: Site, member: Agent, outsider: Agent
) -> None:
    site.serve("/alpha", body=b"alpha page")
    alpha = _anchored(member.team, "alpha-runbook", {"type": "url", "value": site.url("/alpha")})
    bravo = _anchored(outsider.team, "bravo-secret-page", {"type": "url", "value": site.url("/bravo-gone")})

    anchor_checks.check_anchors()
    run = anchor_checks.check_anchors()

    assert (run.teams, run.checked, run.errors) == (2, 2, 0)
    assert _state(alpha) == (False, []) and _state(bravo) == (True, ["open"])
    with operator_view():
        teams = set(AnchorCheck.objects.values_list("memory__team_id", "team_id"))
    assert teams == {(member.team.id, member.team.id), (outsider.team.id, outsider.team.id)}
    # Alpha's token reads alpha's checks; bravo's entry is not there, by key or by team.
    own = member.client.get(member.url("anchors/checks/"), {"key": "alpha-runbook"})
    assert own.status_code == 200 and [c["ok"] for c in own.json()["checks"]] == [True, True]
    for response in (
        member.client.get(member.url("anchors/checks/"), {"key": "bravo-secret-page"}),
        member.client.get(
            member.url("anchors/checks/", team=outsider.team.slug), {"key": "bravo-secret-page"}
        ),
        member.client.get(member.url("anchors/", team=outsider.team.slug)),
    ):
        assert response.status_code == 404
        assert b"bravo-secret-page" not in response.content and b"/bravo-gone" not in response.content
    listed = member.client.get(member.url("anchors/")).content
    assert b"alpha-runbook" in listed and b"bravo" not in listed
    nudges = member.client.get(member.url("nudges/")).content
    assert b"bravo" not in nudges


@pytest.mark.django_db
def test_the_job_is_in_the_default_schedule_once_by_name() -> None:
    PeriodicTask.objects.all().delete()

    JOB_MIGRATION.create_job(apps, None)
    JOB_MIGRATION.create_job(apps, None)
    assert list(PeriodicTask.objects.values_list("task", flat=True)) == ["freshness.check_anchors"]
    JOB_MIGRATION.remove_job(apps, None)
    assert not PeriodicTask.objects.exists()


# --------------------------------------------------------------------------- file anchors API


def report(agent: Agent, body: Any, team: str | None = None) -> Any:
    return agent.client.post(agent.url("anchors/report/", team=team), body, format="json")


@pytest.mark.django_db
def test_file_anchors_are_listed_by_key_a_page_at_a_time(member: Agent, outsider: Agent) -> None:
    for number in range(3):
        _anchored(member.team, f"doc-{number}", {"type": "file", "value": f"docs/{number}.md"})
    _anchored(member.team, "site", {"type": "url", "value": "https://example.com/"})
    _anchored(outsider.team, "bravo-doc", {"type": "file", "value": "bravo/secret.md"})

    first = member.client.get(member.url("anchors/"), {"type": "file", "limit": 2}).json()
    second = member.client.get(first["next"]).json()

    assert [e["key"] for e in first["results"]] == ["doc-0", "doc-1"]
    assert [e["key"] for e in second["results"]] == ["doc-2"] and second["next"] is None
    assert first["results"][0]["anchor"] == {"type": "file", "value": "docs/0.md"}
    assert first["results"][0]["anchor_broken"] is False
    every = member.client.get(member.url("anchors/")).json()
    assert [e["key"] for e in every["results"]] == ["doc-0", "doc-1", "doc-2", "site"]
    assert member.client.get(member.url("anchors/"), {"type": "ftp"}).status_code == 400


@pytest.mark.django_db
def test_a_file_report_flags_a_missing_file_after_two_reports_and_lowers_it_when_found(
    member: Agent, readonly_member: Agent
) -> None:
    memory = _anchored(member.team, "deploy-doc", {"type": "file", "value": "docs/deploy.md"})
    _anchored(member.team, "site", {"type": "url", "value": "https://example.com/"})
    missing = {"results": [{"key": "deploy-doc", "exists": False, "reason": "not found"}]}

    first = report(member, {"results": [*missing["results"], {"key": "site", "exists": True}]})
    assert first.status_code == 200, first.content
    assert first.json() == {"recorded": 1, "flagged": 0, "unflagged": 0, "ignored": ["site"]}
    assert report(member, missing).json()["flagged"] == 1
    assert _state(memory) == (True, ["open"])
    assert report(readonly_member, missing).status_code == 403
    checks = readonly_member.client.get(member.url("anchors/checks/"), {"key": "deploy-doc"}).json()
    assert [(c["source"], c["ok"], c["detail"], c["reported_by"]) for c in checks["checks"]] == [
        ("client", False, "not found", "writer-bot"),
        ("client", False, "not found", "writer-bot"),
    ]
    assert checks["anchor_broken"] is True and checks["anchor"]["value"] == "docs/deploy.md"

    found = report(member, {"results": [{"key": "deploy-doc", "exists": True}]})
    assert found.json()["unflagged"] == 1
    assert _state(memory) == (False, ["resolved"])


@pytest.mark.django_db
def test_another_teams_token_and_keys_change_nothing_and_learn_nothing(
    member: Agent, outsider: Agent
) -> None:
    memory = _anchored(member.team, "alpha-secret-doc", {"type": "file", "value": "alpha/plan.md"})
    body = {"results": [{"key": "alpha-secret-doc", "exists": False}]}

    cross = report(outsider, body, team=member.team.slug)
    own_team = report(outsider, body)
    report(outsider, body)

    assert cross.status_code == 404 and b"alpha-secret-doc" not in cross.content
    assert own_team.status_code == 200 and own_team.json()["ignored"] == ["alpha-secret-doc"]
    assert _state(memory) == (False, [])
    with operator_view():
        assert not AnchorCheck.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "body",
    [
        {"results": "deploy-doc"},
        {"results": [{"key": "deploy-doc", "exists": "yes"}]},
        {"results": [{"key": "deploy-doc", "exists": 1}]},
        {"results": [{"key": 5, "exists": True}]},
        {"results": [{"key": "deploy-doc"}]},
        {"results": [{"key": "deploy-doc", "exists": True, "path": "x"}]},
        {"results": [], "extra": 1},
        {"results": [{"key": "deploy\x00doc", "exists": True}]},
        {"results": [{"key": "deploy-doc", "exists": False, "reason": "gone\x00"}]},
        {"results": [{"key": "k" * 201, "exists": True}]},
        {"results": [{"key": "deploy-doc", "exists": True}, {"key": "deploy-doc", "exists": False}]},
        {"results": [{"key": f"k{n}", "exists": True} for n in range(501)]},
        {"results": ["deploy-doc"]},
        ["deploy-doc"],
    ],
)
def test_bad_reports_are_refused_with_400_in_the_one_error_shape(member: Agent, body: Any) -> None:
    _anchored(member.team, "deploy-doc", {"type": "file", "value": "docs/deploy.md"})

    response = report(member, body)

    assert response.status_code == 400, response.content
    assert set(response.json()) >= {"error", "detail"}
    with operator_view():
        assert not AnchorCheck.objects.exists()


@pytest.mark.django_db
def test_bad_check_queries_are_refused(member: Agent) -> None:
    assert member.client.get(member.url("anchors/checks/")).status_code == 400
    assert member.client.get(member.url("anchors/checks/"), {"key": "a\x00b"}).status_code == 400
    missing = member.client.get(member.url("anchors/checks/"), {"key": "nothing-here"})
    assert missing.status_code == 404 and set(missing.json()) >= {"error", "detail"}


# --------------------------------------------------------------------------- real beat and worker


@pytest.mark.django_db(transaction=True)
@override_settings(MEMORYHUB_ANCHOR_ALLOWED_NETWORKS=LOCAL)  # the saves' side, as the worker's
def test_beat_and_a_worker_check_anchors_and_flag_the_broken_one_in_its_team(
    start_worker: Callable[..., CeleryProcess],
    start_beat: Callable[..., CeleryProcess],
    site: Site,
    member: Agent,
    outsider: Agent,
) -> None:
    site.serve("/alpha", body=b"alpha runbook")
    alpha = _anchored(
        member.team, "runbook", {"type": "url", "value": site.url("/alpha"), "expect": "runbook"}
    )
    bravo = _anchored(outsider.team, "runbook", {"type": "url", "value": site.url("/bravo-removed")})
    schedule_every_second("freshness.check_anchors")

    worker = start_worker(
        MEMORYHUB_ANCHOR_ALLOWED_NETWORKS="127.0.0.1/32", MEMORYHUB_ANCHOR_CHECK_INTERVAL_SECONDS="0"
    )
    start_beat(worker.env["MEMORYHUB_QUEUE"])

    wait_for(lambda: _state(bravo) == (True, ["open"]), JOB_SECONDS, "bravo's broken anchor to be flagged")
    assert _state(alpha) == (False, [])
    with operator_view():
        alpha_checks = list(AnchorCheck.objects.filter(memory=alpha).values_list("ok", "team_id"))
    assert alpha_checks and all(ok and team == member.team.id for ok, team in alpha_checks)
    runs = list(JobRun.objects.filter(job="freshness.check_anchors", succeeded=True))
    assert runs and all(run.outcome["errors"] == 0 for run in runs)
    assert any(run.outcome["broken"] == 1 and run.outcome["ok"] == 1 for run in runs)
    body = member.client.get(member.url("nudges/")).content
    assert b"bravo-removed" not in body and str(bravo.id).encode() not in body
    bravo_nudges = outsider.client.get(outsider.url("nudges/"), {"kind": "anchor_broken"}).json()
    assert [n["keys"] for n in bravo_nudges["results"]] == [["runbook"]]
    assert bravo_nudges["results"][0]["state"] == NudgeState.OPEN
