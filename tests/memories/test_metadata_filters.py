"""Metadata extracted at save (people, tags, action items) and the tags= / people=
filters of the list and search endpoints."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Agent


@pytest.fixture
def notes(member: Agent, django_capture_on_commit_callbacks: Any) -> dict[str, dict[str, Any]]:
    saved = {}
    for key, content in {
        "rotation": "@Ada and @Bo own the #oncall rotation. We need to follow up on paging noise. #ops",
        "billing": "@Ada moved billing to the new cluster. #ops #billing",
        "lunch": "Pizza on Wednesdays, says @Cy.",
    }.items():
        with django_capture_on_commit_callbacks(execute=True):
            response = member.client.post(
                member.url("memories/"), {"key": key, "content": content}, format="json"
            )
        assert response.status_code == 201
        saved[key] = response.json()
    return saved


def test_save_extracts_people_tags_and_action_items(notes: dict[str, dict[str, Any]]) -> None:
    metadata = notes["rotation"]["metadata"]

    assert metadata["people"] == ["ada", "bo"]
    assert metadata["tags"] == ["oncall", "ops"]
    assert metadata["action_items"] == ["We need to follow up on paging noise."]


def test_caller_metadata_wins_over_extraction(member: Agent) -> None:
    response = member.client.post(
        member.url("memories/"),
        {"key": "k", "content": "#ops note for @Ada", "metadata": {"tags": ["manual"], "source": "cli"}},
        format="json",
    )

    metadata = response.json()["metadata"]
    assert metadata["tags"] == ["manual"] and metadata["source"] == "cli"
    assert metadata["people"] == ["ada"]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("tags=ops", {"rotation", "billing"}),
        ("tags=ops,billing", {"billing"}),
        ("people=ada", {"rotation", "billing"}),
        ("people=ada&tags=oncall", {"rotation"}),
        ("people=cy", {"lunch"}),
        ("tags=nothing", set()),
    ],
)
def test_list_filters_by_tags_and_people(notes: Any, member: Agent, query: str, expected: set[str]) -> None:
    response = member.client.get(member.url(f"memories/?{query}"))

    assert response.status_code == 200
    assert {m["key"] for m in response.json()["results"]} == expected


def test_search_filters_by_tags_and_people(notes: Any, member: Agent) -> None:
    def keys(**filters: Any) -> set[str]:
        response = member.client.post(
            member.url("search/"), {"query": "cluster rotation pizza billing", **filters}, format="json"
        )
        assert response.status_code == 200
        return {r["key"] for r in response.json()["results"]}

    assert keys() == {"rotation", "billing", "lunch"}
    assert keys(tags=["ops"]) == {"rotation", "billing"}
    assert keys(people=["ada"], tags=["billing"]) == {"billing"}
    assert keys(people=["nobody"]) == set()


def test_bad_filters_answer_400(member: Agent) -> None:
    assert member.client.get(member.url("memories/?tags=" + "x" * 1001)).status_code == 400
    response = member.client.post(member.url("search/"), {"query": "x", "tags": "ops"}, format="json")
    assert response.status_code == 400
    assert "tags" in response.json()["fields"]
