"""Windows by scope (docs/freshness.md, "Freshness state and windows"): an entry's confirmation
window and its search decay half-life are capped by its scope's window, per team (team
90 days, project the team's unless set, user 30 by default)."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace
from typing import Any

import pytest
from django.utils import timezone

from freshness import services
from freshness.models import Nudge
from memories.freshness import FreshnessWindows
from memories.models import Memory
from memories.scopes import ScopeWindows, fact_scope_kind, memory_scope_kind, memory_scope_q
from search.retrieval.candidates import Candidate
from search.retrieval.scoring import Weights, score_candidates
from teams.models import Team
from tests.conftest import Agent, operator_view

pytestmark = pytest.mark.django_db


def age(memory_id: str, days: float) -> None:
    with operator_view():
        past = timezone.now() - dt.timedelta(days=days)
        Memory.objects.filter(id=memory_id).update(created_at=past, last_confirmed_at=past)


def due_keys(team: Team) -> set[str]:
    with operator_view():
        return {n.memory.key for n in Nudge.objects.filter(team=team).select_related("memory")}


def test_the_scope_of_a_memory_and_of_a_fact() -> None:
    assert memory_scope_kind(SimpleNamespace(key="deploy", project="")) == "team"
    assert memory_scope_kind(SimpleNamespace(key="deploy", project="web")) == "project"
    # a personal key (its owner's @<username>) makes it personal, whatever its project
    assert memory_scope_kind(SimpleNamespace(key="@ada:notes", project="web")) == "user"
    assert memory_scope_kind(SimpleNamespace(key="ada@example.com", project="")) == "team"
    assert [fact_scope_kind(s) for s in ("team", "project:web", "user:ada")] == ["team", "project", "user"]


def test_the_defaults_leave_every_type_window_and_the_half_life_as_they_were(team: Team) -> None:
    windows = FreshnessWindows.for_team(team)
    scopes = ScopeWindows.for_team(team)
    assert (scopes.team, scopes.project, scopes.user) == (90, 90, 30)
    for memory_type, days in windows.by_type.items():
        assert windows.window_days(memory_type, 0, "team") == days
        assert windows.window_days(memory_type, 0, "project") == days
        assert windows.window_days(memory_type, 0, "user") == (None if days is None else min(days, 30))
    assert scopes.half_life(team.decay_half_life_days, "team") == team.decay_half_life_days == 30
    assert scopes.half_life(0, "user") == 0  # decay off stays off
    assert scopes.half_life(120, "user") == 30


def test_a_project_window_set_for_the_team_makes_project_entries_due_sooner(
    member: Agent, outsider: Agent, save: Any
) -> None:
    Team.objects.filter(id=member.team.id).update(scope_window_project_days=10)
    project_lesson = save(member, "web-lesson", "Never cache the login page.", type="lesson", project="web")
    team_lesson = save(member, "team-lesson", "Never deploy on Fridays.", type="lesson")
    theirs = save(outsider, "bravo-lesson", "Never skip the canary.", type="lesson", project="web")
    for memory in (project_lesson, team_lesson, theirs):
        age(memory["id"], 20)

    services.mark_due_entries()

    assert due_keys(member.team) == {"web-lesson"}
    assert due_keys(outsider.team) == set()  # bravo keeps the defaults
    assert member.client.get(member.url("memories/web-lesson/")).json()["freshness"] == "due"
    assert member.client.get(member.url("memories/team-lesson/")).json()["freshness"] == "fresh"


def test_the_sql_form_of_a_scope_matches_the_helper(member: Agent, save: Any) -> None:
    save(member, "a", "Team-wide note about the build cache.")
    save(member, "b", "Project note about the build cache.", project="web")
    with operator_view():
        rows = Memory.objects.filter(team=member.team)
        assert {m.key for m in rows.filter(memory_scope_q("team"))} == {"a"}
        assert {m.key for m in rows.filter(memory_scope_q("project"))} == {"b"}
        assert not rows.filter(memory_scope_q("user")).exists()
        assert all(memory_scope_kind(m) == ("team" if m.key == "a" else "project") for m in rows)


def test_search_decay_uses_the_scopes_half_life() -> None:
    now = timezone.now()
    team_entry = Memory(
        key="t", content="x", type="context", project="", created_at=now - dt.timedelta(days=10)
    )
    project_entry = Memory(
        key="p", content="x", type="context", project="web", created_at=now - dt.timedelta(days=10)
    )
    candidates = [
        Candidate(memory_id=m.id, keyword_rank=1.0, found_by={"keyword"}) for m in (team_entry, project_entry)
    ]
    memories = {team_entry.id: team_entry, project_entry.id: project_entry}

    def scores(scopes: ScopeWindows | None) -> dict[str, float]:
        ranked = score_candidates(
            candidates,
            memories,
            mode="keyword",
            weights=Weights(vector=0.7, keyword=0.3),
            half_life_days=30,
            now=now,
            scopes=scopes,
        )
        return {memories[s.candidate.memory_id].key: s.score for s in ranked}

    assert scores(None) == scores(ScopeWindows(team=90, project=90, user=30))  # the defaults change nothing
    shorter = scores(ScopeWindows(team=90, project=10, user=30))
    assert shorter["t"] == pytest.approx(0.5 ** (10 / 30), abs=1e-5)
    assert shorter["p"] == pytest.approx(0.5, abs=1e-5)
