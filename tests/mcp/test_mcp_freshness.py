"""The freshness tools over MCP: memory_confirm, memory_nudges and nudge_resolve call the
same services as REST (confirm, the nudge list, resolve)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from freshness.models import Nudge, NudgeKind, NudgeState
from freshness.services import mark_due_entries
from memories.models import Confirmation, Memory
from memories.writes import save_memory
from teams.models import Team
from teams.scope import team_scope
from tests.conftest import make_agent, operator_view
from tests.mcp.conftest import Server, mcp_server  # noqa: F401  (the server fixture)
from tests.mcp.test_mcp_access import call_all

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_agent_lists_a_due_nudge_confirms_the_entry_and_the_nudge_closes(
    mcp_server: Server,  # noqa: F811
    team: Team,
) -> None:
    with team_scope(team.id):
        saved = save_memory(team=team, key="billing", content="We bill through Stripe.", type_name="decision",
                            updated_by="ann")  # fmt: skip
        past = timezone.now() - dt.timedelta(days=40)
        Memory.objects.filter(id=saved.memory.id).update(created_at=past, last_confirmed_at=past)
    mark_due_entries()
    token = make_agent(team, "checker", ["read", "write"]).token

    [(listed_error, listed)] = call_all(mcp_server, token, [("memory_nudges", {"kind": "due"})])
    [(confirm_error, confirmed)] = call_all(
        mcp_server, token, [("memory_confirm", {"key": "billing", "note": "checked the invoices"})]
    )
    [(after_error, after)] = call_all(mcp_server, token, [("memory_nudges", {})])

    assert not listed_error and [n["keys"] for n in listed["results"]] == [["billing"]]
    assert listed["results"][0]["message"].startswith("'billing' was last confirmed 40 days ago")
    assert not confirm_error and confirmed["freshness"] == "fresh"
    assert not after_error and after["results"] == []
    with operator_view():
        assert Confirmation.objects.get(memory_id=saved.memory.id).note == "checked the invoices"
        assert Nudge.objects.get(team=team).state == NudgeState.RESOLVED


def test_nudge_resolve_dismisses_and_a_closed_or_unknown_nudge_is_an_error(
    mcp_server: Server,  # noqa: F811
    team: Team,
) -> None:
    with team_scope(team.id):
        saved = save_memory(team=team, key="ci", content="CI runs nightly.", updated_by="ann")
        nudge = Nudge.objects.create(
            team=team, kind=NudgeKind.DUE, memory=saved.memory, message="Still true?"
        )
    token = make_agent(team, "checker", ["read", "write"]).token

    answers = call_all(
        mcp_server,
        token,
        [
            ("nudge_resolve", {"nudge_id": str(nudge.id), "action": "dismiss"}),
            ("nudge_resolve", {"nudge_id": str(nudge.id), "action": "dismiss"}),
            ("nudge_resolve", {"nudge_id": "00000000-0000-4000-8000-00000000000f", "action": "dismiss"}),
            ("nudge_resolve", {"nudge_id": str(nudge.id), "action": "explode"}),
            ("memory_confirm", {"key": "no-such-key"}),
        ],
    )

    (
        (ok, dismissed),
        (closed_error, closed),
        (missing_error, missing),
        (bad_error, bad),
        (gone_error, gone),
    ) = answers
    assert not ok and dismissed["state"] == "dismissed"
    assert closed_error and closed["error"] == "nudge_closed"
    assert missing_error and missing["error"] == "not_found"
    assert bad_error and bad["error"] == "invalid"
    assert gone_error and gone["error"] == "not_found"
