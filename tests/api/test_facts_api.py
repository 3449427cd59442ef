"""The facts API: set, supersede with a reason, read, list, history, delete; `high`
facts and read-only tokens; bad input in the one error shape. (Another team's token on
every route: tests/api/test_cross_team.py.)"""

from __future__ import annotations

from typing import Any

import pytest

from memories.facts.models import Fact
from tests.conftest import Agent, operator_view

FACT = "facts/project-alpha/payments.provider/"


def put(agent: Agent, path: str, body: Any, **headers: str) -> Any:
    return agent.client.put(agent.url(path), body, format="json", **headers)


def test_set_read_supersede_and_history(member: Agent) -> None:
    created = put(member, FACT, {"value": "Paddle", "domains": ["payments", "billing", "payments"]},
                  HTTP_X_MEMORYHUB_SESSION="s-7")  # fmt: skip
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["outcome"] == "created" and body["value"] == "Paddle"
    assert body["domains"] == ["billing", "payments"] and body["scope"] == "team"
    assert (body["updated_by"], body["session"]) == ("writer-bot/s-7", "s-7")

    again = put(member, FACT, {"value": "Paddle"})
    assert again.status_code == 200 and again.json()["outcome"] == "unchanged"
    assert again.json()["id"] == body["id"]

    refused = put(member, FACT, {"value": "Stripe"})
    assert refused.status_code == 409
    assert refused.json()["error"] == "conflict"
    assert refused.json()["current"]["value"] == "Paddle" and refused.json()["current"]["id"] == body["id"]

    moved = put(member, FACT, {"value": "Stripe", "reason": "switched in March"})
    assert moved.status_code == 200
    assert moved.json()["outcome"] == "superseded" and moved.json()["supersedes"] == body["id"]
    assert moved.json()["domains"] == ["billing", "payments"]  # kept

    one = member.client.get(member.url(FACT))
    assert one.status_code == 200 and one.json()["value"] == "Stripe"
    then = member.client.get(member.url(FACT), {"as_of": body["created_at"]})
    assert then.status_code == 200 and then.json()["value"] == "Paddle"

    history = member.client.get(member.url(FACT + "history/")).json()
    assert [(v["value"], v["state"]) for v in history["history"]] == [
        ("Stripe", "active"),
        ("Paddle", "superseded"),
    ]
    assert history["history"][1]["superseded_by"] == moved.json()["id"]


def test_lists_by_entity_domain_and_scope(member: Agent) -> None:
    put(member, FACT, {"value": "Paddle", "domains": ["payments"], "scope": "project:alpha"})
    put(member, "facts/project-alpha/region/", {"value": "eu-west-1"})
    put(member, "facts/ann/editor/", {"value": "vim", "scope": "project:tools"})

    entity = member.client.get(member.url("facts/project-alpha/")).json()["results"]
    assert [f["key"] for f in entity] == ["payments.provider", "region"]
    by_domain = member.client.get(member.url("facts/"), {"domain": "payments"}).json()["results"]
    assert [f["value"] for f in by_domain] == ["Paddle"]
    by_scope = member.client.get(member.url("facts/"), {"scope": "project:tools"}).json()["results"]
    assert [f["value"] for f in by_scope] == ["vim"]
    by_entity = member.client.get(member.url("facts/"), {"entity": "ann"}).json()["results"]
    assert [f["key"] for f in by_entity] == ["editor"]


def test_delete_keeps_history_and_the_fact_is_gone(member: Agent) -> None:
    put(member, FACT, {"value": "Paddle"})
    assert member.client.delete(member.url(FACT)).status_code == 204
    gone = member.client.get(member.url(FACT))
    assert gone.status_code == 404 and gone.json()["error"] == "not_found"
    assert member.client.delete(member.url(FACT)).status_code == 404
    history = member.client.get(member.url(FACT + "history/")).json()["history"]
    assert [v["state"] for v in history] == ["deleted"]


def test_high_facts_are_never_returned_to_read_only_tokens(member: Agent, readonly_member: Agent) -> None:
    put(member, "facts/acme/bank-account/", {"value": "DE89-3704-0044", "sensitivity": "high"})
    put(member, "facts/acme/provider/", {"value": "Paddle"})

    for path in ("facts/", "facts/acme/"):
        listed = readonly_member.client.get(readonly_member.url(path))
        assert listed.status_code == 200
        assert [f["key"] for f in listed.json()["results"]] == ["provider"]
        assert b"DE89-3704-0044" not in listed.content
    for path in ("facts/acme/bank-account/", "facts/acme/bank-account/history/"):
        hidden = readonly_member.client.get(readonly_member.url(path))
        assert hidden.status_code == 404 and b"DE89" not in hidden.content
    # A write token sees it.
    assert member.client.get(member.url("facts/acme/bank-account/")).json()["value"] == "DE89-3704-0044"
    # And a read-only token cannot set one.
    refused = put(readonly_member, "facts/acme/x/", {"value": "y"})
    assert refused.status_code == 403 and refused.json()["error"] == "forbidden"


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"value": 42},
        {"value": ""},
        {"value": "   "},
        {"value": "x" * 4001},
        {"value": "x", "scope": "everyone"},
        {"value": "x", "scope": "user:"},
        {"value": "x", "domains": "payments"},
        {"value": "x", "domains": ["Not A Word"]},
        {"value": "x", "domains": [f"d{i}" for i in range(21)]},
        {"value": "x", "sensitivity": "secret"},
        {"value": "x", "confidence": 1.5},
        {"value": "x", "confidence": "high"},
        {"value": "x", "reason": 3},
        {"value": "x", "supersede_reason": "typo'd field"},
        ["x"],
    ],
)
def test_bad_bodies_are_400_in_the_error_shape(member: Agent, body: Any) -> None:
    response = put(member, FACT, body)
    assert response.status_code == 400, response.content
    assert set(response.json()) <= {"error", "detail", "fields"} and response.json()["error"]
    with operator_view():
        assert not Fact.objects.exists()


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("put", "facts/-bad/provider/"),
        ("put", "facts/project-alpha/bad%20key/"),
        ("get", "facts/bad%20entity/"),
        ("get", "facts/project-alpha/bad%20key/history/"),
        ("delete", "facts/project-alpha/AKIAIOSFODNN7EXAMPLE/"),
    ],
)
def test_malformed_entities_and_keys_in_the_path_are_400(member: Agent, method: str, path: str) -> None:
    response = getattr(member.client, method)(member.url(path), {"value": "x"}, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["error"] == "invalid"


def test_a_name_that_looks_like_a_credential_is_refused_to_writes_and_found_by_no_read(
    member: Agent,
) -> None:
    """Writes name what they store, and a credential is never stored as a name (400); a
    read only looks one up, as the MCP tool does: none can exist, so 404, with nothing of
    the name echoed."""
    path = "facts/project-alpha/AKIAIOSFODNN7EXAMPLE/"
    refused = member.client.put(member.url(path), {"value": "x"}, format="json")
    assert refused.status_code == 400 and "credential" in refused.json()["detail"]
    for read in (path, "facts/AKIAIOSFODNN7EXAMPLE/", path + "history/"):
        response = member.client.get(member.url(read))
        assert response.status_code == 404, (read, response.content)
        assert "AKIA" not in response.content.decode()
    with operator_view():
        assert not Fact.objects.exists()


@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("facts/", {"domain": "Not A Word"}),
        ("facts/", {"scope": "everyone"}),
        ("facts/", {"as_of": "yesterday"}),
        ("facts/", {"entity": "bad entity"}),
        ("facts/", {"cursor": "garbage"}),
        (FACT, {"as_of": "2026-01-01T00:00:00"}),
        ("facts/project-alpha/", {"limit": "many"}),
    ],
)
def test_bad_queries_are_400(member: Agent, path: str, params: dict[str, str]) -> None:
    put(member, FACT, {"value": "Paddle"})
    response = member.client.get(member.url(path), params)
    assert response.status_code == 400, response.content
    assert response.json()["error"]
