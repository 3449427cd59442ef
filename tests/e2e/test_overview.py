"""The overview page with a month of realistic team activity. Its screenshot is the one
the README shows: run with MEMORYHUB_UPDATE_SCREENSHOTS=1 to refresh
docs/screenshots/overview.png."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from playwright.sync_api import Page, expect

from agents.sessions import boot_session
from memories.models import IndexState, Memory
from memories.writes import delete_memory, save_memory
from teams import services as team_services
from teams.models import Membership, Team
from teams.scope import dangerously_bypass_team_scope, team_scope
from tests.e2e.conftest import PASSWORD, screenshot, sign_in

DOCS_SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "screenshots" / "overview.png"

# (days ago, key, type, project, content[, reason for a new version])
HISTORY: list[tuple[Any, ...]] = [
    (
        29,
        "team:identity",
        "identity",
        "",
        "We are Platform Agents: three coding agents and two engineers who run "
        "the deploy pipeline, the staging cluster and the developer portal.",
    ),
    (
        28,
        "arch:primary-database",
        "decision",
        "",
        "We use PostgreSQL 16 for every service; no new MongoDB databases.",
    ),
    (27, "deploy:friday-freeze", "lesson", "", "Never deploy to production on Fridays."),
    (26, "queue:broker", "decision", "", "Background jobs run on Celery with Redis as the broker."),
    (25, "runbook:deploy", "reference", "", "https://wiki.example.com/platform/runbooks/deploy"),
    (
        24,
        "staging:cluster-size",
        "context",
        "portal",
        "Staging runs 3 nodes of 8 vCPU; scale to 5 before load tests.",
    ),
    (
        22,
        "ci:flaky-tests",
        "lesson",
        "",
        "Quarantine a flaky test within a day; never retry the whole suite.",
    ),
    (
        21,
        "oncall:rotation",
        "context",
        "",
        "On-call rotates every Monday at 10:00 UTC; the handover is in #platform.",
    ),
    (
        20,
        "api:versioning",
        "decision",
        "portal",
        "Public APIs are versioned in the URL (/v1/), never by header.",
    ),
    (
        19,
        "deploy:friday-freeze",
        "lesson",
        "",
        "Never deploy to production on Fridays or the day before a "
        "holiday: nobody is around to fix what breaks.",
        "the Easter outage happened on a Thursday",
    ),
    (
        17,
        "db:migrations",
        "lesson",
        "",
        "Run schema migrations before the deploy, in a separate step, and make them backwards compatible.",
    ),
    (16, "sprint:goal", "context", "portal", "Sprint 14: ship search in the developer portal."),
    (
        15,
        "incident:cache-stampede",
        "lesson",
        "",
        "Expire cache keys with jitter; a fixed TTL caused the April cache stampede.",
    ),
    (
        13,
        "staging:cluster-size",
        "context",
        "portal",
        "Staging runs 4 nodes of 8 vCPU; scale to 6 before load tests.",
        "a node was added for the search indexer",
    ),
    (12, "migration:k8s-2023", "historical", "", "In 2023 we moved from Nomad to Kubernetes (EKS)."),
    (11, "docs:api", "reference", "portal", "https://portal.example.com/docs/api"),
    (
        10,
        "release:checklist",
        "context",
        "",
        "Release checklist: changelog, migrations, feature flags, dashboards, rollback plan.",
    ),
    (
        9,
        "sprint:goal",
        "context",
        "portal",
        "Sprint 15: portal search GA and the new token page.",
        "sprint 14 ended",
    ),
    (
        8,
        "queue:broker",
        "decision",
        "",
        "Background jobs run on Celery with Redis as the broker; priorities use separate queues.",
        "minor correction",
    ),
    (6, "style:python", "lesson", "", "Format with ruff and type-check with mypy before every commit."),
    (5, "owner:portal", "context", "portal", "Mia owns the developer portal; Adam reviews its API changes."),
    (
        4,
        "arch:feature-flags",
        "decision",
        "",
        "Feature flags live in the vault-backed config service, not in environment variables.",
    ),
    (3, "incident:dns", "lesson", "", "Lower DNS TTLs a day before moving a service."),
    (
        2,
        "release:checklist",
        "context",
        "",
        "Release checklist: changelog, migrations, feature flags, "
        "dashboards, rollback plan, status page note.",
        "status page note was missed twice",
    ),
    (
        1,
        "sprint:retro",
        "context",
        "portal",
        "Retro: search relevance complaints came from stale embeddings.",
    ),
    (0, "deploy:window", "decision", "", "Production deploys happen Monday to Thursday, 10:00-16:00 UTC."),
]


def seed_platform_team(owner_username: str) -> Team:
    team = team_services.create_team(slug="platform", name="Platform Agents")
    Team.objects.filter(pk=team.pk).update(injection_max_tokens=800)
    team.refresh_from_db()
    user = get_user_model().objects.create_user(owner_username, f"{owner_username}@example.com", PASSWORD)
    now = timezone.now()
    with team_scope(team.id):
        Membership.objects.create(team=team, user=user, role=Membership.Role.OWNER)
    for days_ago, key, memory_type, project, content, *reason in HISTORY:
        by = ["claude-code/ci", "codex/portal", "user:mia", "deploy-bot"][days_ago % 4]
        with team_scope(team.id):
            result = save_memory(
                team=team,
                key=key,
                content=content,
                updated_by=by,
                type_name=memory_type,
                project=project,
                supersede_reason=reason[0] if reason else None,
            )
        when = now - timedelta(days=days_ago, hours=(days_ago * 7) % 9)
        with dangerously_bypass_team_scope(reason="test data: back-date history"):
            Memory.objects.filter(pk=result.memory.pk).update(created_at=when, updated_at=when)
    with team_scope(team.id):
        delete_memory(team=team, key="sprint:retro", deleted_by="user:mia")
        team_services.set_vault_entry(
            team=team, key="pagerduty-key", value="pd-live-0123456789", is_secret=True, actor="user:adam"
        )
        token = team_services.create_token(
            team=team, name="claude-code", scopes=["read", "write"], actor="test"
        ).token
        boot_session(
            team=team, token=token, agent="claude-code", project="portal", current_task="portal search"
        )
    with dangerously_bypass_team_scope(reason="test data: index health"):
        live = Memory.objects.filter(team=team, is_active=True).order_by("created_at")
        Memory.objects.filter(pk__in=list(live.values_list("pk", flat=True)[:2])).update(
            index_state=IndexState.PENDING
        )
        Memory.objects.filter(pk=live.last().pk).update(index_state=IndexState.FAILED)  # type: ignore[union-attr]
    return team


@pytest.fixture
def platform(live_server: Any) -> Team:
    return seed_platform_team("olivia")


def test_overview_with_a_month_of_activity(page: Page, live_server: Any, platform: Team) -> None:
    page.set_viewport_size({"width": 1280, "height": 900})
    sign_in(page, live_server.url, "olivia")
    page.get_by_role("link", name="Platform Agents").click()

    expect(page.get_by_role("heading", name="Overview")).to_be_visible()
    expect(page.locator("#memories-heading + p")).to_contain_text("20")
    expect(page.get_by_text("2 pending")).to_be_visible()
    expect(page.get_by_text("1 failed")).to_be_visible()
    expect(page.locator("svg.chart rect.bar")).not_to_have_count(0)
    expect(page.locator("#changes-heading + div")).to_contain_text("deploy:window")

    path = screenshot(page, "overview")
    if os.environ.get("MEMORYHUB_UPDATE_SCREENSHOTS") == "1":
        DOCS_SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        DOCS_SCREENSHOT.write_bytes(path.read_bytes())

    # The retry button re-indexes what is stuck, in-process (no broker in tests).
    page.get_by_role("button", name="Retry pending and failed (3)").click()
    expect(page.get_by_role("status")).to_contain_text("Indexing queued for 3")
    expect(page.get_by_text("0 failed")).to_be_visible()
