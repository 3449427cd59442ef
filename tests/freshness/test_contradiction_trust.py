"""Contradictions people can trust, through the whole save flow (save, index, the
contradiction pass): a warning next to its runbook opens no nudge, template-like
entries about different subjects open none, an entry that disagrees with many
neighbours at once opens none, and a true reversal still opens one, with its
confidence stored on the nudge."""

from __future__ import annotations

from typing import Any

from freshness.contradiction_pass import MAX_CONTRADICTIONS_PER_SAVE
from freshness.contradictions import INJECT_CONFIDENCE
from freshness.models import Nudge, NudgeKind
from memories.models import Memory
from tests.bench.contradiction_set import template_entries
from tests.conftest import Agent, operator_view

RUNBOOK = (
    "Migration runbook. Step 1: run migration shard 1 and verify row counts. "
    "Step 2: run shards 2-8 one at a time. Step 3: re-enable the writers."
)
WARNING = "Do not run the migrations against prod without a backup."


def contradictions_of(team: Any) -> list[Nudge]:
    with operator_view():
        return list(
            Nudge.objects.filter(team=team, kind=NudgeKind.CONTRADICTION).select_related(
                "memory", "other_memory"
            )
        )


def test_a_warning_saved_next_to_its_runbook_opens_no_nudge(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    save(member, "migration-runbook", RUNBOOK)
    save(member, "migration-warning", WARNING)

    assert contradictions_of(member.team) == []
    with operator_view():
        assert Memory.objects.get(team=member.team, key="migration-runbook").contradicted_at is None


def test_a_runbook_saved_after_its_warning_opens_no_nudge_either(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    save(member, "migration-warning", WARNING)
    save(member, "migration-runbook", RUNBOOK)

    assert contradictions_of(member.team) == []


def test_a_true_reversal_opens_a_nudge_with_its_confidence(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    save(member, "payments", "We use Stripe for payments.")
    save(member, "payments-now", "We moved payments to Paddle.")

    (nudge,) = contradictions_of(member.team)
    assert (nudge.memory.key, nudge.other_memory.key) == ("payments-now", "payments")  # type: ignore[union-attr]
    assert nudge.confidence is not None and nudge.confidence >= INJECT_CONFIDENCE
    assert nudge.details["rule"] == "value"
    listed = member.client.get(member.url("nudges/"), {"kind": "contradiction"}).json()["results"]
    assert listed[0]["confidence"] == nudge.confidence


def test_a_hundred_template_entries_about_different_subjects_open_no_nudge(
    member: Agent, django_capture_on_commit_callbacks: Any
) -> None:
    entries = [{"key": key, "content": text} for key, text in template_entries(100)]

    with django_capture_on_commit_callbacks(execute=True):
        response = member.client.post(member.url("memories/batch/"), {"entries": entries}, format="json")

    assert response.status_code == 200, response.content
    assert [item["status"] for item in response.json()["results"]].count("created") == 100
    with operator_view():
        indexed = Memory.objects.filter(team=member.team, is_active=True, index_state="indexed").count()
    assert indexed == 100
    assert contradictions_of(member.team) == []


def test_template_entries_saved_one_at_a_time_open_no_nudge(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    for key, text in template_entries(24, seed="one at a time"):
        save(member, key, text)

    assert contradictions_of(member.team) == []


def test_an_entry_that_disagrees_with_many_neighbours_at_once_opens_none(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    services = ["billing", "search", "checkout", "ledger", "exports"][: MAX_CONTRADICTIONS_PER_SAVE + 1]
    for service in services:
        save(member, f"{service}-hosting", f"The {service} service is hosted on Heroku.")

    save(member, "hosting-move", "We moved every service from Heroku to Fly.io.")

    assert contradictions_of(member.team) == []


def test_an_entry_that_disagrees_with_a_few_neighbours_opens_one_nudge_each(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    for service in ["billing", "search"]:
        save(member, f"{service}-hosting", f"The {service} service is hosted on Heroku.")

    save(member, "hosting-move", "We moved every service from Heroku to Fly.io.")

    nudges = contradictions_of(member.team)
    assert sorted(n.other_memory.key for n in nudges) == ["billing-hosting", "search-hosting"]  # type: ignore[union-attr]
    assert {n.memory.key for n in nudges} == {"hosting-move"}
