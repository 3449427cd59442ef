"""Prompt injection: order, the never-dropped identity, cap and budget with their
reasons, the 80% warning, provenance, project filter, the relevant section, bad
parameters and isolation. Through the API unless the selector itself is the point."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agents.injection import build_injection
from memories import writes
from memories.models import Memory
from search.tokens import count_tokens
from teams.models import Team
from teams.scope import team_scope
from teams.vault_matcher import team_secret_matcher
from tests.conftest import Agent, operator_view

INJECTED_ORDER_HEADINGS = ["### Identity", "### Lessons", "### Decisions", "### Context"]


def remember(
    team: Team, key: str, content: str, memory_type: str = "context", *, age_hours: float = 0, **extra: Any
) -> Memory:
    """Save through the service, then date the entry `age_hours` ago, so that
    "newest first" does not depend on how fast the test runs."""
    with team_scope(team.id):
        memory = writes.save_memory(
            team=team, key=key, content=content, type_name=memory_type, updated_by="tester", **extra
        ).memory
        Memory.objects.filter(id=memory.id).update(created_at=timezone.now() - timedelta(hours=age_hours))
    return memory


def inject(agent: Agent, **params: Any) -> dict[str, Any]:
    response = agent.client.get(agent.url("injection/"), params)
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/json"
    return response.json()


def keys(entries: list[dict[str, Any]]) -> list[str]:
    return [entry["key"] for entry in entries]


@pytest.fixture
def mixed(team: Team) -> None:
    """Two of each type, ages in hours: bigger is older."""
    remember(team, "ctx-old", "The billing export runs nightly.", "context", age_hours=50)
    remember(team, "lesson-old", "Never rotate keys during a release.", "lesson", age_hours=40)
    remember(team, "who", "I am the release agent of the platform team.", "identity", age_hours=30)
    remember(team, "dec-new", "We decided to use Redis for the job queue.", "decision", age_hours=1)
    remember(team, "ref", "Runbook: https://wiki.example.com/runbooks/billing", "reference", age_hours=2)
    remember(team, "hist", "In 2019 billing ran on a cron box.", "historical", age_hours=3)
    remember(team, "ctx-new", "Ada is on call this week.", "context", age_hours=5)
    remember(team, "lesson-new", "Always tag a release before deploying it.", "lesson", age_hours=4)
    remember(team, "dec-old", "We chose Postgres over MySQL.", "decision", age_hours=20)
    remember(team, "who-2", "You are careful and terse.", "identity", age_hours=60)


# --------------------------------------------------------------------------- order


def test_injection_puts_identity_then_lessons_then_decisions_then_context_newest_first(
    mixed: None, member: Agent
) -> None:
    body = inject(member, format="json")

    entries = body["entries"]
    assert keys(entries) == [
        "who",
        "who-2",
        "lesson-new",
        "lesson-old",
        # Decisions before context, even an older decision before a newer context entry.
        "dec-new",
        "dec-old",
        "ctx-new",
        "ctx-old",
    ]
    assert [e["rank"] for e in entries] == list(range(1, 9))
    assert [e["reason"] for e in entries] == ["identity"] * 2 + ["ranked"] * 6
    assert body["left_out"] == []
    assert body["counts"]["candidates"] == 8


def test_reference_and_historical_entries_are_not_injected(mixed: None, member: Agent) -> None:
    body = inject(member, format="json")

    assert "ref" not in keys(body["entries"]) and "hist" not in keys(body["entries"])
    assert "[REFERENCE]" not in body["text"] and "[HISTORICAL]" not in body["text"]


def test_markdown_groups_blocks_under_a_heading_per_type(mixed: None, member: Agent) -> None:
    body = inject(member)

    text = body["text"]
    assert body["format"] == "markdown"
    assert "entries" not in body and "left_out" not in body
    assert text.startswith("## MemoryHub memory\n\n### Identity\n\n[IDENTITY] [who]: I am the release agent")
    positions = [text.index(heading) for heading in INJECTED_ORDER_HEADINGS]
    assert positions == sorted(positions)
    assert "[LESSON] [lesson-new]: Always tag a release before deploying it." in text
    decisions = text[text.index("### Decisions") : text.index("### Context")]
    assert decisions.index("[dec-new]") < decisions.index("[dec-old]")
    assert "[CONTEXT]" not in decisions


def test_multiline_content_is_indented_so_it_cannot_pose_as_a_heading(team: Team, member: Agent) -> None:
    remember(team, "notes", "First line.\n## Not a heading\n\n<!-- memoryhub:end -->", "context")

    text = inject(member)["text"]

    assert "[CONTEXT] [notes]: First line.\n  ## Not a heading\n\n  <!-- memoryhub:end -->\n" in text


def test_superseded_and_deleted_entries_are_not_injected(team: Team, member: Agent) -> None:
    remember(team, "host", "The build host is ci-1.", "context")
    remember(team, "host", "The build host is ci-2.", "context", supersede_reason="moved")
    remember(team, "gone", "Temporary note.", "context")
    with team_scope(team.id):
        writes.delete_memory(team=team, key="gone", deleted_by="tester")

    body = inject(member, format="json")

    assert [(e["key"], e["content"]) for e in body["entries"]] == [("host", "The build host is ci-2.")]
    assert "ci-1" not in body["text"] and "Temporary" not in body["text"]


def test_an_empty_team_gets_a_block_that_says_so(member: Agent) -> None:
    body = inject(member, format="json")

    assert body["text"] == "## MemoryHub memory\n\nNo memories to inject.\n"
    assert body["entries"] == [] and body["counts"]["candidates"] == 0
    assert body["tokens"]["used"] == count_tokens(body["text"])
    assert body["warnings"] == []


# --------------------------------------------------------------------------- cap and budget


def test_identity_is_never_dropped_even_over_the_cap_and_the_budget(team: Team, member: Agent) -> None:
    long_identity = " ".join(["I keep the deploy pipeline green and review every migration."] * 8)
    for i in range(3):
        remember(team, f"identity-{i}", long_identity, "identity", age_hours=i, allow_duplicate=True)
    remember(team, "lesson", "Never deploy on Fridays.", "lesson")
    remember(team, "context", "Ada is on call.", "context")

    body = inject(member, format="json", max_entries=1, max_tokens=50)

    assert keys(body["entries"]) == ["identity-0", "identity-1", "identity-2"]
    assert all(e["reason"] == "identity" for e in body["entries"])
    assert {e["key"]: e["reason"] for e in body["left_out"]} == {"lesson": "cap", "context": "cap"}
    assert body["tokens"]["used"] > body["tokens"]["budget"] == 50
    assert body["text"].count("[IDENTITY]") == 3
    assert any("over the cap of 1" in w for w in body["warnings"])
    assert any("over the budget of 50" in w for w in body["warnings"])


def test_identity_over_the_budget_leaves_the_others_out_for_budget(team: Team, member: Agent) -> None:
    remember(team, "me", " ".join(["I answer in English and cite sources."] * 20), "identity")
    remember(team, "lesson", "Never deploy on Fridays.", "lesson")

    body = inject(member, format="json", max_tokens=50)

    assert keys(body["entries"]) == ["me"]
    assert [(e["key"], e["reason"]) for e in body["left_out"]] == [("lesson", "budget")]
    assert body["counts"]["left_out_budget"] == 1


def test_the_entry_cap_leaves_the_rest_out_with_reason_cap(team: Team, member: Agent) -> None:
    for i in range(5):
        remember(team, f"lesson-{i}", f"Lesson number {i}: keep changes small.", "lesson", age_hours=i)

    body = inject(member, format="json", max_entries=2)

    assert keys(body["entries"]) == ["lesson-0", "lesson-1"]
    assert [(e["key"], e["reason"], e["rank"], e["tokens"]) for e in body["left_out"]] == [
        ("lesson-2", "cap", 3, None),
        ("lesson-3", "cap", 4, None),
        ("lesson-4", "cap", 5, None),
    ]
    assert body["counts"] == {
        "candidates": 5,
        "included": 2,
        "included_relevant": 0,
        "included_facts": 0,
        "left_out_cap": 3,
        "left_out_budget": 0,
        "left_out_unlisted": 0,
    }
    assert body["max_entries"] == 2
    assert "lesson-2" not in body["text"]


def test_the_team_setting_is_the_default_cap_and_budget(team: Team, member: Agent) -> None:
    team.injection_max_entries, team.injection_max_tokens = 2, 777
    team.save()
    for i in range(3):
        remember(team, f"c-{i}", f"Context {i}.", "context", age_hours=i)

    body = inject(member, format="json")

    assert body["max_entries"] == 2 and body["tokens"]["budget"] == 777
    assert keys(body["entries"]) == ["c-0", "c-1"]
    assert inject(member, format="json", max_entries=3)["counts"]["included"] == 3


def test_the_token_budget_leaves_out_what_does_not_fit_and_smaller_entries_still_get_in(
    team: Team, member: Agent
) -> None:
    remember(team, "small-new", "Ada is on call.", "context", age_hours=1)
    remember(team, "huge", " ".join(["The data warehouse loads every table at night."] * 40), age_hours=2)
    remember(team, "small-old", "Bob owns billing.", "context", age_hours=3)

    body = inject(member, format="json", max_tokens=60)

    assert keys(body["entries"]) == ["small-new", "small-old"]
    [huge] = body["left_out"]
    assert huge["key"] == "huge" and huge["reason"] == "budget" and huge["rank"] == 2
    assert huge["tokens"] > 60
    assert body["tokens"]["used"] <= 60
    assert "warehouse" not in body["text"]


def test_tokens_are_counted_on_the_rendered_text(mixed: None, member: Agent) -> None:
    body = inject(member, format="json")

    text = body["text"]
    assert body["tokens"]["used"] == count_tokens(text)
    headings = sum(count_tokens(h) for h in ["## MemoryHub memory", *INJECTED_ORDER_HEADINGS])
    assert body["tokens"]["used"] == headings + sum(e["tokens"] for e in body["entries"])
    lesson = next(e for e in body["entries"] if e["key"] == "lesson-new")
    assert lesson["tokens"] == count_tokens(
        "[LESSON] [lesson-new]: Always tag a release before deploying it."
    )


def test_every_left_out_entry_is_listed_with_why(team: Team, member: Agent) -> None:
    remember(team, "who", "I am the docs agent.", "identity")
    remember(
        team, "big", " ".join(["Every page needs an owner and a review date."] * 30), "lesson", age_hours=1
    )
    for i in range(6):
        remember(team, f"note-{i}", f"Note {i} about the docs site.", "context", age_hours=2 + i)

    body = inject(member, format="json", max_entries=4, max_tokens=120)

    listed = {e["key"]: e["reason"] for e in body["left_out"]}
    assert listed == {"big": "budget", "note-3": "cap", "note-4": "cap", "note-5": "cap"}
    assert keys(body["entries"]) == ["who", "note-0", "note-1", "note-2"]
    assert set(keys(body["entries"])) | set(listed) == {"who", "big", *(f"note-{i}" for i in range(6))}
    assert [e["rank"] for e in body["left_out"]] == [2, 6, 7, 8]
    assert body["counts"]["left_out_cap"] == 3 and body["counts"]["left_out_budget"] == 1
    for entry in body["left_out"]:
        assert set(entry) == {"id", "key", "type", "section", "rank", "reason", "tokens"}
        assert entry["section"] == "core"


def test_entries_past_what_the_walk_reads_are_counted_not_listed(team: Team, member: Agent) -> None:
    for i in range(60):
        remember(team, f"note-{i:02d}", f"Note {i}.", "context", age_hours=i)

    body = inject(member, format="json", max_entries=1)

    # The walk reads the cap plus 50 more: those are listed, the other 9 only counted.
    assert keys(body["entries"]) == ["note-00"]
    assert len(body["left_out"]) == 50 and keys(body["left_out"])[-1] == "note-50"
    assert body["counts"]["left_out_unlisted"] == 9
    assert body["counts"]["left_out_cap"] == 59
    assert body["counts"]["candidates"] == 60


def test_a_candidate_past_the_walk_found_by_the_query_is_no_longer_counted_out(
    team: Team, member: Agent, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        for i in range(55):
            remember(team, f"note-{i:02d}", f"Routine note number {i} about the office.", age_hours=i)
        remember(team, "needle", "The zymurgy club meets on Thursdays.", age_hours=100)

    body = inject(member, format="json", max_entries=1, query="zymurgy")

    assert keys(body["entries"]) == ["note-00", "needle"]
    assert body["entries"][1]["section"] == "relevant"
    counts = body["counts"]
    assert counts["left_out_unlisted"] == 4  # 56 candidates - 51 read - the needle
    assert counts["candidates"] == counts["included"] + counts["left_out_cap"] + counts["left_out_budget"]


def test_overflowing_entries_keep_their_type_and_are_not_modified(team: Team, member: Agent) -> None:
    for i in range(4):
        remember(team, f"lesson-{i}", f"Lesson {i}.", "lesson", age_hours=i)
    with operator_view():
        before = list(Memory.objects.filter(team=team).order_by("key").values())

    body = inject(member, format="json", max_entries=1)

    assert body["counts"]["left_out_cap"] == 3
    with operator_view():
        assert list(Memory.objects.filter(team=team).order_by("key").values()) == before
    assert member.client.get(member.url("memories/lesson-3/")).json()["type"] == "lesson"


# --------------------------------------------------------------------------- 80% warning


def test_a_warning_is_logged_and_returned_at_80_percent_of_the_cap(
    team: Team, member: Agent, caplog: pytest.LogCaptureFixture
) -> None:
    team.injection_max_entries = 5
    team.save()
    for i in range(3):
        remember(team, f"c-{i}", f"Context {i}.", "context")
    remember(team, "ref", "https://example.com/docs", "reference")

    with caplog.at_level(logging.WARNING, logger="agents.injection"):
        quiet = inject(member)
    assert quiet["warnings"] == [] and not caplog.records

    remember(team, "c-3", "Context 3.", "context")
    with caplog.at_level(logging.WARNING, logger="agents.injection"):
        loud = inject(member)

    [warning] = loud["warnings"]
    assert "4 active identity, lesson, decision and context entries" in warning
    assert "80% of the injection cap of 5" in warning
    [record] = [r for r in caplog.records if r.name == "agents.injection"]
    assert record.levelno == logging.WARNING
    assert team.slug in record.getMessage() and warning in record.getMessage()

    # Every session start shows it; the log says it once an hour, not at each one.
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="agents.injection"):
        again = inject(member)
    assert again["warnings"] == [warning]
    assert not [r for r in caplog.records if r.name == "agents.injection"]


# --------------------------------------------------------------------------- project


def test_project_keeps_that_project_and_entries_with_no_project(team: Team, member: Agent) -> None:
    remember(team, "web-1", "The web app uses React.", "decision", project="web")
    remember(team, "mobile-1", "The mobile app uses Flutter.", "decision", project="mobile")
    remember(team, "everyone", "Code review within a day.", "lesson")

    assert set(keys(inject(member, format="json", project="web")["entries"])) == {"web-1", "everyone"}
    assert set(keys(inject(member, format="json", project="")["entries"])) == {"everyone"}
    assert set(keys(inject(member, format="json")["entries"])) == {"web-1", "mobile-1", "everyone"}
    body = inject(member, format="json", project="web")
    assert body["project"] == "web" and body["counts"]["candidates"] == 2
    assert "Flutter" not in body["text"]


# --------------------------------------------------------------------------- query


@pytest.fixture
def indexed(team: Team, django_capture_on_commit_callbacks: Any) -> None:
    """Saved and indexed (chunks and vectors), as the in-process default does after commit."""
    with django_capture_on_commit_callbacks(execute=True):
        remember(team, "deploy-friday", "Never deploy to production on Fridays.", "lesson")
        remember(team, "db-host", "The staging database runs on db-3.internal, port 5433.", "reference")
        remember(team, "db-old", "In 2019 the staging database ran on db-1.", "historical")
        remember(team, "db-web", "The web staging database is db-9.", "reference", project="web")
        remember(team, "lunch", "The team orders pizza on Wednesdays.", "context")


def test_query_adds_a_relevant_section_without_duplicates(indexed: None, member: Agent) -> None:
    body = inject(member, format="json", query="staging database deploy Fridays")

    relevant = [e for e in body["entries"] if e["section"] == "relevant"]
    # Everything active that is not in already: the vector path finds all of it.
    assert set(keys(relevant)) == {"db-host", "db-old", "db-web"}
    assert all(e["reason"] == "relevant" and e["score"] > 0 for e in relevant)
    assert [e["rank"] for e in relevant] == list(range(1, len(relevant) + 1))
    # deploy-friday matches the query too, but is in already: once only.
    assert keys(body["entries"]).count("deploy-friday") == 1
    assert body["text"].count("[deploy-friday]") == 1
    text = body["text"]
    assert text.index("### Relevant to the query") > text.index("### Context")
    assert "[REFERENCE] [db-host]: The staging database runs on db-3.internal, port 5433." in text
    assert body["counts"]["included_relevant"] == len(relevant)
    assert body["search_mode"] == "hybrid"
    assert body["tokens"]["used"] == count_tokens(text)


def test_relevant_entries_respect_the_project_filter(indexed: None, member: Agent) -> None:
    outside = inject(member, format="json", query="staging database", project="mobile")
    inside = inject(member, format="json", query="staging database", project="web")

    assert "db-web" not in keys(outside["entries"]) and "db-9" not in outside["text"]
    assert "db-web" in keys(inside["entries"])


def test_relevant_entries_that_do_not_fit_are_left_out_for_budget(indexed: None, member: Agent) -> None:
    body = inject(member, format="json", query="staging database", max_tokens=50)

    relevant_out = [e for e in body["left_out"] if e["section"] == "relevant"]
    assert relevant_out and all(e["reason"] == "budget" and e["tokens"] for e in relevant_out)
    assert body["tokens"]["used"] <= 50


def test_a_left_out_entry_found_by_the_query_moves_into_the_relevant_section(
    indexed: None, member: Agent
) -> None:
    body = inject(member, format="json", query="pizza Wednesdays", max_entries=1)

    # Only lunch is about pizza: the rest scores far below it and stays out.
    assert keys(body["entries"]) == ["deploy-friday", "lunch"]
    assert body["entries"][1]["section"] == "relevant" and body["entries"][1]["rank"] == 1
    assert "lunch" not in keys(body["left_out"])


def test_the_relevant_section_shows_the_current_entry_of_a_key_its_old_wording_matched(
    indexed: None, team: Team, member: Agent, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        remember(team, "vpn", "The VPN gateway is vpn-old.example.org.", "reference")
        remember(team, "vpn", "Ask Priya for the address.", "reference", supersede_reason="gateway moved")

    body = inject(member, format="json", query="VPN gateway", max_entries=1)

    relevant = [e for e in body["entries"] if e["section"] == "relevant"]
    assert keys(relevant)[0] == "vpn"
    assert "[REFERENCE] [vpn]: Ask Priya for the address." in body["text"]
    assert "vpn-old" not in body["text"]


def test_the_relevant_entries_are_read_with_their_confirmations_in_one_query(
    indexed: None, team: Team
) -> None:
    confirmed_at = timezone.now() - timedelta(days=2)
    with team_scope(team.id):
        Memory.objects.filter(team=team, key="db-host").update(
            confirmed_by_count=2, last_confirmed_at=confirmed_at
        )
    with team_scope(team.id), CaptureQueriesContext(connection) as queries:
        result = build_injection(team=team, max_entries=1, query="staging database")

    relevant = {e.key: e for e in result.included if e.section == "relevant"}
    assert len(relevant) >= 2
    assert relevant["db-host"].corroborated == 2 and relevant["db-host"].verified_at == confirmed_at
    # No entry read again by its id for a field the first read left out.
    assert [q["sql"] for q in queries if 'WHERE "memories_memory"."id" = ' in q["sql"]] == []


def test_overflowing_entries_stay_searchable(indexed: None, member: Agent) -> None:
    body = inject(member, format="json", max_entries=1)
    assert "lunch" in keys(body["left_out"])

    found = member.client.post(member.url("search/"), {"query": "pizza Wednesdays"}, format="json").json()

    assert found["results"][0]["key"] == "lunch" and found["results"][0]["type"] == "context"


# --------------------------------------------------------------------------- the selector


def test_the_selector_reads_the_entries_in_one_query_and_the_nudges_in_one_more(
    mixed: None, team: Team, django_assert_num_queries: Any
) -> None:
    # The third: the vault's stamp, for the scrub of every injected text (the matcher is
    # cached per team while the vault does not change); the fourth, the facts.
    with team_scope(team.id):
        team_secret_matcher(team_id=team.id)
    with team_scope(team.id), django_assert_num_queries(4):
        result = build_injection(team=team, max_entries=3)

    assert len(result.included) == 3 and len(result.left_out) == 5


def test_the_selector_sees_only_the_teams_own_rows(team: Team, other_team: Team) -> None:
    remember(team, "alpha-secret-plan", "Alpha launches on the ninth.", "lesson")
    remember(other_team, "bravo-note", "Bravo notes.", "lesson")

    with team_scope(other_team.id):
        result = build_injection(team=other_team)

    assert [e.key for e in result.included] == ["bravo-note"]
    assert "Alpha" not in result.text


# --------------------------------------------------------------------------- bad input, scope, isolation


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"format": "xml"}, "format"),
        ({"format": ""}, "format"),
        ({"max_entries": "0"}, "max_entries"),
        ({"max_entries": "201"}, "max_entries"),
        ({"max_entries": "ten"}, "max_entries"),
        ({"max_entries": "5.0"}, "max_entries"),
        ({"max_entries": "-1"}, "max_entries"),
        ({"max_entries": ""}, "max_entries"),
        ({"max_tokens": "49"}, "max_tokens"),
        ({"max_tokens": "100001"}, "max_tokens"),
        ({"max_tokens": "1e3"}, "max_tokens"),
        ({"project": "p" * 201}, "project"),
        ({"project": "a\x00b"}, "project"),
        ({"query": "q" * 8001}, "query"),
        ({"query": "   "}, "query"),
        ({"max_entry": "5"}, "max_entry"),
        ({"format": ["json", "markdown"]}, "format"),
    ],
)
def test_bad_parameters_answer_400_in_the_error_shape(
    member: Agent, params: dict[str, Any], field: str
) -> None:
    response = member.client.get(member.url("injection/"), params)

    assert response.status_code == 400, response.content
    body = response.json()
    assert set(body) == {"error", "detail", "fields"}
    assert body["error"] == "invalid"
    assert field in body["fields"]


@pytest.mark.parametrize(
    ("params", "echoed"),
    [
        ({"max_entries": "1", "max_tokens": "50"}, ("markdown", None, 1, 50)),
        ({"max_entries": "200", "max_tokens": "100000"}, ("markdown", None, 200, 100000)),
        ({"project": "p" * 200}, ("markdown", "p" * 200, 50, 2000)),
        ({"format": "json", "project": ""}, ("json", "", 50, 2000)),
    ],
)
def test_limits_at_the_edges_are_accepted_and_applied(
    team: Team, member: Agent, params: dict[str, str], echoed: tuple[Any, ...]
) -> None:
    remember(team, "fridays", "Never deploy on Fridays.", "lesson")

    body = inject(member, **params)

    assert (body["format"], body["project"], body["max_entries"], body["tokens"]["budget"]) == echoed
    assert body["counts"]["included"] == 1 and body["tokens"]["used"] <= body["tokens"]["budget"]
    assert "[LESSON] [fridays]: Never deploy on Fridays." in body["text"]


def test_a_read_only_token_may_inject(mixed: None, member: Agent, readonly_member: Agent) -> None:
    body = inject(readonly_member, format="json")

    assert body["counts"]["included"] == 8
    assert body == inject(member, format="json")
    assert "[IDENTITY] [who]: I am the release agent of the platform team." in body["text"]


def test_no_token_answers_401(member: Agent) -> None:
    member.client.credentials()

    response = member.client.get(member.url("injection/"))

    assert response.status_code == 401
    assert response.json() == {"error": "unauthenticated", "detail": "send 'Authorization: Bearer <token>'"}
    assert response["WWW-Authenticate"] == 'Bearer realm="memoryhub"'


def test_another_teams_token_gets_404_and_no_byte_of_the_team(
    mixed: None, member: Agent, outsider: Agent
) -> None:
    for params in ({}, {"format": "json", "query": "release agent billing", "project": "web"}):
        response = outsider.client.get(member.url("injection/"), params)

        assert response.status_code == 404
        assert response.json() == {"error": "not_found", "detail": "not found"}
        for marker in (b"alpha", b"Alpha", b"release agent", b"lesson-new", b"billing"):
            assert marker not in response.content


def test_vault_secrets_never_appear_in_the_block(team: Team, member: Agent, admin_member: Agent) -> None:
    # Worded so no credential rule redacts it when saved (`The staging password is …` is).
    remember(team, "creds", "Staging answers to swordfish-4711-blue.", "context")
    put = admin_member.client.put(
        admin_member.url("vault/staging-password/"),
        {"value": "swordfish-4711-blue", "is_secret": True},
        format="json",
    )
    assert put.status_code == 201

    response = member.client.get(member.url("injection/"), {"format": "json"})

    assert response.status_code == 200
    assert b"swordfish" not in response.content
    assert "[CONTEXT] [creds]: Staging answers to [REDACTED:vault_secret]" in response.json()["text"]


def test_the_endpoint_is_in_the_openapi_schema(member: Agent) -> None:
    schema = member.client.get("/api/schema/", {"format": "json"}, HTTP_ACCEPT="application/json")
    assert schema.status_code == 200
    operation = schema.json()["paths"]["/api/v1/teams/{team}/injection/"]["get"]

    names = {p["name"] for p in operation["parameters"]}
    assert names == {"team", "format", "project", "query", "max_entries", "max_tokens"}
    assert {"200", "400", "401", "403", "404"} <= set(operation["responses"])


def test_a_confirmed_entry_shows_how_many_corroborated_it_and_when_it_was_last_verified(
    team: Team, member: Agent
) -> None:
    remember(team, "deploy-day", "Never deploy on Fridays.", "lesson", age_hours=2)
    remember(team, "queue", "We decided to use Redis for the job queue.", "decision", age_hours=1)
    remember(team, "on-call", "Ada is on call this week.", "context", age_hours=1)
    with team_scope(team.id):
        for confirmer in ("ada", "bob", "ada"):  # distinct confirmers count
            writes.confirm_memory(team=team, key="deploy-day", confirmed_by=confirmer)
        writes.confirm_memory(team=team, key="queue", confirmed_by="bob")
        confirmed_at = Memory.objects.get(team=team, key="deploy-day", is_active=True).last_confirmed_at
    remember(
        team, "queue", "We decided to use RabbitMQ for the job queue.", "decision", supersede_reason="moved"
    )

    body = inject(member, format="json")

    text = body["text"]
    day = confirmed_at.date().isoformat()
    assert f"[LESSON] [deploy-day] (corroborated by 2, verified {day}): Never deploy on Fridays." in text
    # A supersede is a new belief: its confirmers start from none; never confirmed, no tag.
    assert "[DECISION] [queue]: We decided to use RabbitMQ" in text
    assert "[CONTEXT] [on-call]: Ada is on call this week." in text
    assert text.count("corroborated") == 1
    assert body["tokens"]["used"] == count_tokens(text)
