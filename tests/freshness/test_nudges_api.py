"""GET nudges/ and POST nudges/{id}/resolve/: paged, filterable by kind,
naming their keys and linking their entries; resolved in one call; another team's
token sees nothing of them."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
from django.utils import timezone

from freshness import services
from freshness.models import Nudge, NudgeKind, NudgeState
from memories.models import Memory
from teams.scope import team_scope
from tests.conftest import Agent, operator_view

SECRET_KEY_OF_ALPHA = "alpha-payments-provider"
SECRET_TEXT_OF_ALPHA = "We bill through Stripe."


def age(memory_id: str, days: float) -> None:
    with operator_view():
        past = timezone.now() - dt.timedelta(days=days)
        Memory.objects.filter(id=memory_id).update(created_at=past, last_confirmed_at=past)


def resolve(agent: Agent, nudge_id: object, body: object, team: str | None = None):  # type: ignore[no-untyped-def]
    return agent.client.post(agent.url(f"nudges/{nudge_id}/resolve/", team=team), body, format="json")


@pytest.fixture
def due_nudge(member: Agent, save) -> Nudge:  # type: ignore[no-untyped-def]
    saved = save(member, SECRET_KEY_OF_ALPHA, SECRET_TEXT_OF_ALPHA, type="decision")
    age(saved["id"], 45)
    services.mark_due_entries()
    with operator_view():
        return Nudge.objects.select_related("memory").get(team=member.team)


def contradiction(member: Agent, save) -> Nudge:  # type: ignore[no-untyped-def]
    """A contradiction as the detector would record it (its flow is built elsewhere)."""
    old = save(member, "billing-old", "We use Stripe for billing.")
    new = save(member, "billing-new", "We moved billing to Paddle.", allow_duplicate=True)
    with operator_view():
        now = timezone.now()
        Memory.objects.filter(id__in=[old["id"], new["id"]]).update(contradicted_at=now)
        # The detector raises this pair once the new entry is indexed; made here if not.
        return Nudge.objects.get_or_create(
            team=member.team,
            kind=NudgeKind.CONTRADICTION,
            memory_id=new["id"],
            other_memory_id=old["id"],
            state=NudgeState.OPEN,
            defaults={
                "message": "You previously recorded 'We use Stripe for billing.'. Update to 'We moved billing to Paddle.'?"
            },
        )[0]


def test_list_names_keys_links_entries_and_says_what_to_do(member: Agent, due_nudge: Nudge) -> None:
    response = member.client.get(member.url("nudges/"))

    assert response.status_code == 200
    (item,) = response.json()["results"]
    assert item["id"] == str(due_nudge.id)
    assert item["kind"] == "due" and item["state"] == "open"
    assert item["keys"] == [SECRET_KEY_OF_ALPHA]
    assert "Is it still true?" in item["message"]
    (entry,) = item["entries"]
    assert entry["id"] == str(due_nudge.memory_id)
    assert member.client.get(entry["url"]).json()["id"] == entry["id"]
    assert item["details"]["days_since_confirmed"] == 45


def test_list_filters_by_kind_and_pages(member: Agent, due_nudge: Nudge, save) -> None:  # type: ignore[no-untyped-def]
    contradiction(member, save)

    due = member.client.get(member.url("nudges/"), {"kind": "due"}).json()["results"]
    contradictions = member.client.get(member.url("nudges/"), {"kind": "contradiction"}).json()["results"]
    first_page = member.client.get(member.url("nudges/"), {"limit": 1}).json()

    assert [n["kind"] for n in due] == ["due"]
    # The detector also links "billing-new" with the due entry ("We bill through Stripe.").
    assert {n["kind"] for n in contradictions} == {"contradiction"}
    assert ["billing-new", "billing-old"] in [n["keys"] for n in contradictions]
    assert len(first_page["results"]) == 1 and first_page["next"]
    second_page = member.client.get(first_page["next"]).json()
    assert len(second_page["results"]) == 1
    assert second_page["results"][0]["id"] != first_page["results"][0]["id"]


def test_resolve_confirm_confirms_the_entry(member: Agent, due_nudge: Nudge) -> None:
    before = due_nudge.memory.last_confirmed_at

    response = resolve(member, due_nudge.id, {"action": "confirm"})

    assert response.status_code == 200, response.content
    assert response.json()["state"] == "resolved" and response.json()["resolution"] == "confirm"
    with operator_view():
        memory = Memory.objects.get(id=due_nudge.memory_id)
    assert memory.last_confirmed_at > before
    assert member.client.get(member.url(f"memories/{SECRET_KEY_OF_ALPHA}/")).json()["freshness"] == "fresh"
    assert member.client.get(member.url("nudges/")).json()["results"] == []


def test_resolve_dismiss_closes_without_confirming(member: Agent, due_nudge: Nudge) -> None:
    response = resolve(member, due_nudge.id, {"action": "dismiss"})

    assert response.status_code == 200
    assert response.json()["state"] == "dismissed"
    with operator_view():
        assert Memory.objects.get(id=due_nudge.memory_id).confirmed_by_count == 0
    all_states = member.client.get(member.url("nudges/"), {"state": "all"}).json()["results"]
    assert [n["state"] for n in all_states] == ["dismissed"]


def test_a_closed_nudge_cannot_be_resolved_again(member: Agent, due_nudge: Nudge) -> None:
    resolve(member, due_nudge.id, {"action": "dismiss"})

    again = resolve(member, due_nudge.id, {"action": "confirm"})

    assert again.status_code == 409
    assert again.json()["error"] == "nudge_closed"


def test_confirming_a_contradiction_confirms_both_and_lowers_the_flags(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    nudge = contradiction(member, save)

    response = resolve(member, nudge.id, {"action": "confirm"})

    assert response.status_code == 200, response.content
    for key in ("billing-new", "billing-old"):
        body = member.client.get(member.url(f"memories/{key}/")).json()
        assert body["freshness"] == "fresh" and body["confirmed_by_count"] == 1


@pytest.mark.parametrize("action", ["archive", "supersede"])
def test_actions_of_flows_not_applicable_are_a_clear_400(
    member: Agent, due_nudge: Nudge, action: str
) -> None:
    response = resolve(member, due_nudge.id, {"action": action})

    assert response.status_code == 400
    assert response.json()["error"] == "action_not_applicable"
    assert "confirm" in response.json()["detail"]
    with operator_view():
        assert Nudge.objects.get(id=due_nudge.id).state == NudgeState.OPEN


def test_confirming_a_nudge_whose_entry_moved_on_is_refused(member: Agent, due_nudge: Nudge, save) -> None:  # type: ignore[no-untyped-def]
    save(
        member, SECRET_KEY_OF_ALPHA, "We bill through Paddle.", supersede_reason="moved", allow_duplicate=True
    )

    response = resolve(member, due_nudge.id, {"action": "confirm"})

    assert response.status_code == 400
    assert response.json()["error"] == "action_not_applicable"


@pytest.mark.parametrize(
    "body",
    [
        {"action": "forget"},
        {},
        {"action": 1},
        {"action": "confirm\x00"},
        {"action": "confirm", "extra": True},
        [],
    ],
)
def test_bad_resolve_input_is_400_in_the_one_error_shape(
    member: Agent, due_nudge: Nudge, body: object
) -> None:
    response = resolve(member, due_nudge.id, body)

    assert response.status_code == 400, response.content
    assert set(response.json()) >= {"error", "detail"}
    with operator_view():
        assert Nudge.objects.get(id=due_nudge.id).state == NudgeState.OPEN


@pytest.mark.parametrize("params", [{"kind": "nope"}, {"state": "x"}, {"kind": "due\x00"}, {"limit": "0"}])
def test_bad_list_query_is_400(member: Agent, params: dict) -> None:
    response = member.client.get(member.url("nudges/"), params)

    assert response.status_code == 400
    assert set(response.json()) >= {"error", "detail"}


@pytest.mark.parametrize("nudge_id", ["not-a-uuid", "x" * 100])
def test_malformed_nudge_id_is_400(member: Agent, nudge_id: str) -> None:
    response = resolve(member, nudge_id, {"action": "dismiss"})

    assert response.status_code == 400
    assert response.json()["error"] == "invalid"


def test_unknown_nudge_id_is_404(member: Agent) -> None:
    assert resolve(member, uuid.uuid4(), {"action": "dismiss"}).status_code == 404


def test_read_token_lists_but_cannot_resolve(readonly_member: Agent, due_nudge: Nudge) -> None:
    assert readonly_member.client.get(readonly_member.url("nudges/")).status_code == 200

    response = resolve(readonly_member, due_nudge.id, {"action": "dismiss"})

    assert response.status_code == 403
    assert set(response.json()) >= {"error", "detail"}
    with operator_view():
        assert Nudge.objects.get(id=due_nudge.id).state == NudgeState.OPEN


def assert_nothing_of_alpha(body: bytes) -> None:
    for marker in (SECRET_KEY_OF_ALPHA, SECRET_TEXT_OF_ALPHA, "alpha", "Alpha"):
        assert marker.encode() not in body, marker


def test_outsider_on_alpha_nudge_urls_gets_404_and_nothing_of_alpha(
    member: Agent, outsider: Agent, due_nudge: Nudge
) -> None:
    listed = outsider.client.get(member.url("nudges/"))
    resolved = resolve(outsider, due_nudge.id, {"action": "dismiss"}, team=member.team.slug)

    for response in (listed, resolved):
        assert response.status_code == 404
        assert response.json() == {"error": "not_found", "detail": "not found"}
        assert_nothing_of_alpha(response.content)
    with operator_view():
        assert Nudge.objects.get(id=due_nudge.id).state == NudgeState.OPEN


def test_outsider_using_alpha_nudge_ids_in_own_team_gets_404(
    member: Agent, outsider: Agent, due_nudge: Nudge
) -> None:
    for action in ("dismiss", "confirm"):
        response = resolve(outsider, due_nudge.id, {"action": action})
        assert response.status_code == 404
        assert_nothing_of_alpha(response.content)
    own_list = outsider.client.get(outsider.url("nudges/"), {"state": "all"})
    assert own_list.status_code == 200 and own_list.json()["results"] == []
    assert_nothing_of_alpha(own_list.content)
    with operator_view():
        nudge = Nudge.objects.get(id=due_nudge.id)
        assert nudge.state == NudgeState.OPEN
        assert Memory.objects.get(id=due_nudge.memory_id).confirmed_by_count == 0


def test_row_level_security_hides_other_teams_nudges(
    member: Agent, outsider: Agent, due_nudge: Nudge
) -> None:
    with team_scope(outsider.team.id):
        assert not Nudge.objects.filter(id=due_nudge.id).exists()
    with team_scope(member.team.id):
        assert Nudge.objects.filter(id=due_nudge.id).exists()


def test_one_open_nudge_per_kind_and_entry_is_a_database_rule(member: Agent, due_nudge: Nudge) -> None:
    from django.db import IntegrityError, transaction

    with operator_view(), pytest.raises(IntegrityError), transaction.atomic():
        Nudge.objects.create(
            team=member.team, kind=NudgeKind.DUE, memory_id=due_nudge.memory_id, message="again"
        )
