"""The drafts tools over MCP: drafts_extract, drafts_list and draft_review call the same
services as REST (freshness/drafts.py)."""

from __future__ import annotations

import pytest

from freshness.models import Draft, DraftState
from memories.facts.models import Fact
from memories.facts.services import set_fact
from memories.models import Memory
from teams.models import Team
from teams.scope import team_scope
from tests.conftest import make_agent, operator_view
from tests.mcp.conftest import Server, mcp_server  # noqa: F401  (the server fixture)
from tests.mcp.test_mcp_access import call_all

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN = "ghp_" + "Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8"


def test_an_agent_extracts_lists_and_accepts_a_draft(
    mcp_server: Server,  # noqa: F811
    team: Team,
) -> None:
    token = make_agent(team, "reviewer", ["read", "write"]).token
    transcript = (
        f"user: the deploy token is {TOKEN}.\n\n"
        "user: We decided to ship releases on Tuesdays only.\n\n"
        "```\nNever run make nuke-db in production.\n```\n"
    )

    [(extract_error, extracted)] = call_all(
        mcp_server, token, [("drafts_extract", {"transcript": transcript, "source_session": "sess-7"})]
    )
    assert not extract_error, extracted
    (draft,) = extracted["drafts"]
    assert "Tuesdays" in draft["content"] and draft["source_session"] == "sess-7"
    assert TOKEN not in str(extracted) and "nuke-db" not in str(extracted)

    [(list_error, listed), (review_error, reviewed), (again_error, again)] = call_all(
        mcp_server,
        token,
        [
            ("drafts_list", {}),
            ("draft_review", {"draft_id": draft["id"], "action": "accept", "key": "release-day"}),
            ("draft_review", {"draft_id": draft["id"], "action": "reject"}),
        ],
    )
    assert not list_error and [d["id"] for d in listed["results"]] == [draft["id"]]
    assert not review_error and reviewed["state"] == "accepted" and reviewed["key"] == "release-day"
    assert again_error and again["error"] == "draft_not_pending"
    with operator_view():
        memory = Memory.objects.get(team=team, key="release-day", is_active=True)
        assert memory.metadata["draft"]["source_session"] == "sess-7"
        assert memory.metadata["draft"]["reviewed_by"] == "reviewer"


def test_draft_review_merges_and_rejects_and_checks_its_arguments(
    mcp_server: Server,  # noqa: F811
    team: Team,
) -> None:
    token = make_agent(team, "reviewer", ["read", "write"]).token
    [(_, _saved), (_, extracted)] = call_all(
        mcp_server,
        token,
        [
            ("memory_save", {"key": "releases", "content": "Releases are tagged from main."}),
            ("drafts_extract", {"transcript": "We decided to ship releases on Tuesdays only.\n\n"
                                              "Lesson learned: the changelog must be written first."}),
        ],
    )  # fmt: skip
    first, second = extracted["drafts"]
    answers = call_all(
        mcp_server,
        token,
        [
            ("draft_review", {"draft_id": first["id"], "action": "merge"}),
            ("draft_review", {"draft_id": first["id"], "action": "merge", "into_key": "releases"}),
            ("draft_review", {"draft_id": second["id"], "action": "reject"}),
            ("draft_review", {"draft_id": second["id"], "action": "explode"}),
        ],
    )
    (no_key_error, no_key), (merge_error, merged), (reject_error, rejected), (bad_error, bad) = answers
    assert no_key_error and no_key["error"] == "invalid"
    assert not merge_error and merged["state"] == "merged"
    assert not reject_error and rejected["state"] == "rejected"
    assert bad_error and bad["error"] == "invalid"
    with operator_view():
        entry = Memory.objects.get(team=team, key="releases", is_active=True)
        assert entry.supersede_reason == f"merged draft {first['id']}"
        assert entry.content.startswith("Releases are tagged from main.\n\n")
        assert {d.state for d in Draft.objects.filter(team=team)} == {DraftState.MERGED, DraftState.REJECTED}


def test_a_draft_found_again_is_answered_as_corroborated_as_rest_answers_it(
    mcp_server: Server,  # noqa: F811
    team: Team,
) -> None:
    token = make_agent(team, "capturer", ["read", "write"]).token
    transcript = "user: We decided to ship releases on Tuesdays only."

    [(_, first), (_, second)] = call_all(
        mcp_server,
        token,
        [
            ("drafts_extract", {"transcript": transcript, "source_session": "sess-1"}),
            ("drafts_extract", {"transcript": transcript, "source_session": "sess-2"}),
        ],
    )

    (made,) = first["drafts"]
    assert first["corroborated"] == []
    assert second["drafts"] == [] and [d["id"] for d in second["corroborated"]] == [made["id"]]
    assert second["corroborated"][0]["corroborated"] == 1


def test_an_agent_accepts_a_fact_draft_and_supersedes_a_fact_from_a_nudge(
    mcp_server: Server,  # noqa: F811
    team: Team,
) -> None:
    token = make_agent(team, "reviewer", ["read", "write"]).token
    with team_scope(team.id):
        set_fact(team=team, entity="ci", key="provider", value="Jenkins", actor="t")
    transcript = "We use Paddle for payments.\n\nOur CI provider is GitHub Actions."

    [(error, extracted)] = call_all(
        mcp_server, token, [("drafts_extract", {"transcript": transcript, "source_session": "s-3"})]
    )
    assert not error, extracted
    (draft,) = extracted["drafts"]
    (nudge,) = extracted["fact_nudges"]
    assert draft["kind"] == "fact" and nudge["fact"]["extracted_value"] == "GitHub Actions"

    [(accept_error, accepted), (resolve_error, resolved)] = call_all(
        mcp_server,
        token,
        [
            ("draft_review", {"draft_id": draft["id"], "action": "accept", "value": "Paddle"}),
            ("nudge_resolve", {"nudge_id": nudge["id"], "action": "supersede"}),
        ],
    )
    assert not accept_error and accepted["state"] == "accepted", accepted
    assert not resolve_error and resolved["resolution"] == "supersede", resolved
    with operator_view():
        assert Fact.objects.get(team=team, entity="payments", is_active=True).source_draft is not None
        ci = Fact.objects.get(team=team, entity="ci", is_active=True)
        assert ci.value == "GitHub Actions" and ci.supersede_reason == "from conversation s-3"
