"""The contradiction flow: once the worker has indexed an entry, its nearest
active entries of other keys are judged and a contradicting pair opens one nudge linking
both; the duplicate check lets a near-duplicate that disagrees through; resolving by
supersede archives the older entry (restorable), by compatible stops the pair coming
back. Everything within one team: another team's entries are never compared, and its
token sees and resolves nothing.

The entries are embedded by the bundled local model (the default profile), indexed in
process after commit as the broker-less default does (the `save` fixture)."""

from __future__ import annotations

from typing import Any

import pytest

from freshness import contradiction_pass
from freshness.models import Nudge, NudgeKind, NudgeState
from memories.models import Memory
from search import hooks as search_hooks
from search.services import index_memory
from teams.models import Team
from tests.conftest import Agent, operator_view, search

OLD_PORT = "The Postgres port is 5432"
NEW_PORT = "The Postgres port is 6432"  # 0.917 to OLD_PORT with the bundled model, as indexed
# The teams of these tests count 0.90 and up as a duplicate (the default is 0.92), so the
# port pair is a near-duplicate that the duplicate check must let through.
DUPLICATE_THRESHOLD = 0.90
OLD_BILLING = "We use Stripe for billing."
NEW_BILLING = "We moved billing from Stripe to Paddle."


@pytest.fixture
def post(django_capture_on_commit_callbacks: Any):  # type: ignore[no-untyped-def]
    """POST memories/ (any answer) and run what it enqueued after commit (indexing)."""

    def post(agent: Agent, key: str, content: str, **extra: Any) -> Any:
        with django_capture_on_commit_callbacks(execute=True):
            return agent.client.post(
                agent.url("memories/"), {"key": key, "content": content, **extra}, format="json"
            )

    return post


def contradictions_of(team: Any) -> list[Nudge]:
    with operator_view():
        return list(
            Nudge.objects.filter(team=team, kind=NudgeKind.CONTRADICTION).select_related(
                "memory", "other_memory"
            )
        )


def resolve(agent: Agent, nudge_id: object, action: str, team: str | None = None) -> Any:
    return agent.client.post(
        agent.url(f"nudges/{nudge_id}/resolve/", team=team), {"action": action}, format="json"
    )


@pytest.fixture(autouse=True)
def strict_duplicate_threshold(team: Team, other_team: Team) -> None:
    Team.objects.filter(id__in=[team.id, other_team.id]).update(dedup_threshold=DUPLICATE_THRESHOLD)


@pytest.fixture
def port_pair(member: Agent, post) -> tuple[dict[str, Any], dict[str, Any]]:  # type: ignore[no-untyped-def]
    old = post(member, "postgres-port", OLD_PORT)
    assert old.status_code == 201, old.content
    new = post(member, "postgres-port-pooler", NEW_PORT)
    assert new.status_code == 201, new.content
    return old.json(), new.json()


def test_a_value_change_is_saved_and_flagged_not_merged_as_a_duplicate(
    member: Agent, port_pair: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    old, new = port_pair

    assert new["key"] == "postgres-port-pooler" and new.get("replaced_duplicate") is None
    with operator_view():
        active = set(Memory.objects.filter(team=member.team, is_active=True).values_list("key", flat=True))
        older = Memory.objects.get(id=old["id"])
        newer = Memory.objects.get(id=new["id"])
    assert active == {"postgres-port", "postgres-port-pooler"}
    (nudge,) = contradictions_of(member.team)
    assert (nudge.memory_id, nudge.other_memory_id) == (newer.id, older.id)
    assert nudge.state == NudgeState.OPEN
    assert nudge.message == f"You previously recorded '{OLD_PORT}'. Update to '{NEW_PORT}'?"
    assert older.contradicted_at is not None and newer.contradicted_at is None
    listed = member.client.get(member.url("nudges/"), {"kind": "contradiction"}).json()["results"]
    assert [item["keys"] for item in listed] == [["postgres-port-pooler", "postgres-port"]]


def test_without_the_disagreement_judge_the_duplicate_check_swallows_the_change(
    member: Agent, post, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """What the hook is for: with no receiver, 6432 is refused as a duplicate of 5432."""
    monkeypatch.setattr(search_hooks.texts_disagree, "_receivers", [])
    assert post(member, "postgres-port", OLD_PORT).status_code == 201

    refused = post(member, "postgres-port-pooler", NEW_PORT)

    assert refused.status_code == 200, refused.content
    assert refused.json()["duplicate_of"]["key"] == "postgres-port"
    assert contradictions_of(member.team) == []


def test_indexing_again_raises_no_second_nudge_for_the_pair(
    member: Agent, port_pair: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    old, new = port_pair

    for memory_id in (new["id"], old["id"], new["id"]):
        assert index_memory(team_id=member.team.id, memory_id=memory_id) == "indexed"

    assert len(contradictions_of(member.team)) == 1


def test_a_switch_in_the_band_is_raised_and_agreeing_entries_are_not(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    save(member, "billing", OLD_BILLING)
    save(member, "release-tags", "Always tag a release before deploying it.")
    save(member, "billing-now", NEW_BILLING, allow_duplicate=True)

    (nudge,) = contradictions_of(member.team)
    assert (nudge.memory.key, nudge.other_memory.key) == ("billing-now", "billing")  # type: ignore[union-attr]
    assert nudge.details["subject"] and nudge.details["reason"]


def test_supersede_archives_the_older_entry_which_leaves_search_and_injection_and_comes_back(
    member: Agent, port_pair: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    old, new = port_pair
    (nudge,) = contradictions_of(member.team)

    response = resolve(member, nudge.id, "supersede")

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["state"] == "resolved" and body["resolution"] == "supersede"
    assert body["details"]["kept"]["key"] == "postgres-port-pooler"
    assert body["details"]["archived"] == {
        "id": old["id"],
        "key": "postgres-port",
        "at": body["details"]["archived"]["at"],
    }
    with operator_view():
        older = Memory.objects.get(id=old["id"])
        newer = Memory.objects.get(id=new["id"])
    assert older.archived_at is not None and not older.is_active and older.deleted_at is None
    assert older.contradicted_at is None and newer.contradicted_at is None
    assert member.client.get(member.url("memories/postgres-port/")).status_code == 404
    found = [r["id"] for r in search(member, "Postgres port", max_results=10)["results"]]
    assert old["id"] not in found and new["id"] in found
    asked = [
        r["id"] for r in search(member, "Postgres port", max_results=10, include_archived=True)["results"]
    ]
    assert old["id"] in asked
    injected = member.client.get(member.url("injection/"), {"format": "json"}).json()
    assert "postgres-port" not in [e["key"] for e in injected["entries"]]
    assert "postgres-port-pooler" in [e["key"] for e in injected["entries"]]
    history = member.client.get(member.url("memories/postgres-port/history/")).json()["history"]
    assert [e["kind"] for e in history] == ["archived", "created"]
    assert history[0]["memory"]["state"] == "archived"

    restored = member.client.post(member.url("memories/postgres-port/restore/"), {}, format="json")

    assert restored.status_code == 200, restored.content
    assert restored.json()["id"] == old["id"] and restored.json()["state"] == "active"
    assert old["id"] in [r["id"] for r in search(member, "Postgres port", max_results=10)["results"]]


def test_compatible_confirms_both_and_the_pair_is_not_raised_again(
    member: Agent, port_pair: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    old, new = port_pair
    (nudge,) = contradictions_of(member.team)

    response = resolve(member, nudge.id, "compatible")
    index_memory(team_id=member.team.id, memory_id=new["id"])
    index_memory(team_id=member.team.id, memory_id=old["id"])

    assert response.status_code == 200 and response.json()["resolution"] == "compatible"
    (only,) = contradictions_of(member.team)
    assert only.state == NudgeState.RESOLVED
    with operator_view():
        both = list(Memory.objects.filter(id__in=[old["id"], new["id"]]))
    assert all(m.confirmed_by_count == 1 and m.contradicted_at is None for m in both)


def test_dismiss_closes_it_and_lowers_the_flag(
    member: Agent, port_pair: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    old, _ = port_pair
    (nudge,) = contradictions_of(member.team)

    assert resolve(member, nudge.id, "dismiss").json()["state"] == "dismissed"
    with operator_view():
        assert Memory.objects.get(id=old["id"]).contradicted_at is None


def test_contradicting_entries_of_two_teams_are_never_linked(member: Agent, outsider: Agent, post) -> None:  # type: ignore[no-untyped-def]
    assert post(member, "postgres-port", OLD_PORT).status_code == 201
    assert post(outsider, "postgres-port-pooler", NEW_PORT).status_code == 201
    assert post(outsider, "billing", OLD_BILLING).status_code == 201
    assert post(member, "billing-now", NEW_BILLING).status_code == 201

    with operator_view():
        assert Nudge.objects.filter(kind=NudgeKind.CONTRADICTION).count() == 0
        assert Memory.objects.filter(contradicted_at__isnull=False).count() == 0


def test_another_team_cannot_see_or_resolve_the_nudge_nor_archive_or_restore_the_keys(
    member: Agent, outsider: Agent, port_pair: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    (nudge,) = contradictions_of(member.team)
    answers = [
        outsider.client.get(outsider.url("nudges/")),
        outsider.client.get(outsider.url("nudges/"), {"state": "all"}),
        resolve(outsider, nudge.id, "supersede"),
        resolve(outsider, nudge.id, "supersede", team=member.team.slug),
        outsider.client.post(outsider.url("memories/postgres-port/archive/"), {}, format="json"),
        outsider.client.post(outsider.url("memories/postgres-port/restore/"), {}, format="json"),
        outsider.client.post(
            outsider.url("memories/postgres-port/archive/", team="alpha"), {}, format="json"
        ),
        outsider.client.post(
            outsider.url("memories/postgres-port/restore/", team="alpha"), {}, format="json"
        ),
    ]

    assert [a.status_code for a in answers] == [200, 200, 404, 404, 404, 404, 404, 404]
    assert answers[0].json()["results"] == [] and answers[1].json()["results"] == []
    for answer in answers:
        for secret in (OLD_PORT, NEW_PORT, str(nudge.id), "5432", "6432"):
            assert secret.encode() not in answer.content
    assert contradictions_of(member.team)[0].state == NudgeState.OPEN


def test_a_read_token_cannot_resolve(
    readonly_member: Agent, port_pair: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    (nudge,) = contradictions_of(readonly_member.team)

    for action in ("supersede", "compatible", "dismiss"):
        assert resolve(readonly_member, nudge.id, action).status_code == 403
    assert contradictions_of(readonly_member.team)[0].state == NudgeState.OPEN


def test_actions_of_other_flows_and_stale_entries_answer_400_in_the_one_shape(
    member: Agent, port_pair: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    old, _ = port_pair
    (nudge,) = contradictions_of(member.team)

    wrong_kind = resolve(member, nudge.id, "archive")
    unknown = resolve(member, nudge.id, "merge")
    member.client.post(member.url("memories/postgres-port/archive/"), {}, format="json")
    stale = resolve(member, nudge.id, "supersede")

    assert wrong_kind.status_code == 400 and wrong_kind.json()["error"] == "action_not_applicable"
    assert unknown.status_code == 400 and unknown.json()["error"] in (
        "invalid",
        "invalid_choice",
        "validation_error",
    )
    # The archive resolved the nudge already (its entry needs no more looking at).
    assert stale.status_code == 409 and stale.json()["error"] == "nudge_closed"
    with operator_view():
        assert Memory.objects.get(id=old["id"]).archived_at is not None


def test_the_detector_runs_in_the_team_scope_bounded(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    """A direct call, as the hook makes it: nothing to judge for an entry no longer active."""
    saved = save(member, "billing", OLD_BILLING)
    member.client.delete(member.url("memories/billing/"))

    run = contradiction_pass.raise_contradictions(
        entries=[
            search_hooks.IndexedEntry(
                team_id=member.team.id, memory_id=saved["id"], model="any", dimensions=384
            )
        ]
    )

    assert (run.compared, run.raised) == (0, 0)
