"""Pinned entries: set by a save (REST and MCP share the input), kept by a supersede only
when `inherit_pinned` asks for it, and always injected right after identity, within the
entry cap and the token budget."""

from __future__ import annotations

from typing import Any

import pytest

from memories.models import Memory
from tests.conftest import Agent, operator_view


def save(agent: Agent, key: str, content: str, **extra: Any) -> Any:
    return agent.client.post(agent.url("memories/"), {"key": key, "content": content, **extra}, format="json")


def inject(agent: Agent, **params: Any) -> dict[str, Any]:
    response = agent.client.get(agent.url("injection/"), {"format": "json", **params})
    assert response.status_code == 200, response.content
    return response.json()


def pinned_of(agent: Agent, key: str) -> bool:
    with operator_view():
        return Memory.objects.get(team=agent.team, key=key, is_active=True).pinned


def test_a_save_can_pin_an_entry_and_the_answer_says_so(member: Agent) -> None:
    response = save(member, "api-base-url", "The API base URL is https://api.example.com/v2.", pinned=True)

    assert response.status_code == 201, response.content
    assert response.json()["pinned"] is True
    assert pinned_of(member, "api-base-url")
    assert save(member, "other", "Something else entirely.").json()["pinned"] is False


@pytest.mark.parametrize(
    ("supersede", "pinned_after"),
    [
        ({}, False),  # a pin vouches for one text, not for what replaces it
        ({"inherit_pinned": True}, True),
        ({"inherit_pinned": True, "pinned": False}, False),  # said outright, it wins
        ({"pinned": True}, True),
    ],
)
def test_a_supersede_carries_the_pin_over_only_when_asked(
    member: Agent, supersede: dict[str, Any], pinned_after: bool
) -> None:
    assert save(member, "deploy-host", "Deploys go to deploy-1.internal.", pinned=True).status_code == 201

    response = save(
        member, "deploy-host", "Deploys go to deploy-2.internal.", supersede_reason="host moved", **supersede
    )

    assert response.status_code == 201, response.content
    assert response.json()["pinned"] is pinned_after
    assert pinned_of(member, "deploy-host") is pinned_after


@pytest.mark.parametrize("body", [{"pinned": "yes"}, {"inherit_pinned": 1}, {"inherit_pinned": None}])
def test_a_pin_that_is_not_a_boolean_is_a_400(member: Agent, body: dict[str, Any]) -> None:
    response = save(member, "k", "Some text worth keeping.", **body)

    assert response.status_code == 400, response.content
    assert response.json()["error"] == "invalid" and next(iter(body)) in response.json()["fields"]


def test_a_batch_entry_can_pin(member: Agent) -> None:
    entries = [{"key": "pinned-one", "content": "Pinned from a batch.", "pinned": True}]

    response = member.client.post(member.url("memories/batch/"), {"entries": entries}, format="json")

    assert response.status_code == 200, response.content
    assert pinned_of(member, "pinned-one")


def test_a_pinned_entry_is_injected_right_after_identity_ahead_of_newer_entries(member: Agent) -> None:
    save(member, "who", "I am the release agent.", type="identity")
    save(member, "style-guide", "The style guide lives at docs/STYLE.md.", type="reference", pinned=True)
    for n in range(3):
        save(member, f"lesson-{n}", f"Lesson {n}: check the release notes of dependency {n}.", type="lesson")

    body = inject(member, max_entries=2)

    assert [(e["key"], e["section"], e["reason"]) for e in body["entries"]] == [
        ("who", "core", "identity"),
        ("style-guide", "pinned", "pinned"),
    ]
    text = body["text"]
    assert text.index("### Identity") < text.index("### Pinned") < text.index("[REFERENCE] [style-guide]")
    assert "lesson-0" not in text


def test_a_pinned_entry_still_counts_against_the_budget(member: Agent) -> None:
    save(member, "who", "I am the release agent.", type="identity")
    save(member, "huge-pin", "Pinned but long. " + "word " * 400, type="lesson", pinned=True)
    save(member, "small", "A small lesson.", type="lesson")

    body = inject(member, max_tokens=200)

    assert [e["key"] for e in body["entries"]] == ["who", "small"]
    assert [(e["key"], e["reason"]) for e in body["left_out"]] == [("huge-pin", "budget")]


def test_an_unpinned_supersede_goes_back_to_its_types_place(member: Agent) -> None:
    save(member, "note", "Release notes go in CHANGES.md.", type="reference", pinned=True)
    save(member, "note", "Release notes go in CHANGELOG.md.", supersede_reason="renamed")

    assert "[REFERENCE] [note]" not in inject(member)["text"]
