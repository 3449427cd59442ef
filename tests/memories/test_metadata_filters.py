"""Metadata extracted at save (people, tags, topics, action items) and the tags= /
people= / topics= filters of the list and search endpoints (REST and MCP)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Agent
from tests.mcp.conftest import call_in_process


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


@pytest.fixture
def topical(member: Agent, django_capture_on_commit_callbacks: Any) -> dict[str, list[str]]:
    topics = {}
    for key, content in {
        "db": "The Postgres cluster of Project Alpha runs version 16.",
        "queue": "Kafka retention on the Payments queue is seven days.",
        "misc": "Lunch is at noon on Fridays.",
    }.items():
        with django_capture_on_commit_callbacks(execute=True):
            response = member.client.post(
                member.url("memories/"), {"key": key, "content": content}, format="json"
            )
        assert response.status_code == 201
        topics[key] = response.json()["metadata"].get("topics", [])
    return topics


def test_list_and_search_filter_by_any_of_the_topics(topical: dict[str, list[str]], member: Agent) -> None:
    assert topical == {"db": ["postgres", "project alpha"], "queue": ["payments"], "misc": ["fridays"]}

    def listed(query: str) -> set[str]:
        response = member.client.get(member.url(f"memories/?{query}"))
        assert response.status_code == 200, response.content
        return {m["key"] for m in response.json()["results"]}

    def searched(**filters: Any) -> set[str]:
        body = {"query": "postgres kafka lunch cluster payments queue", **filters}
        response = member.client.post(member.url("search/"), body, format="json")
        assert response.status_code == 200, response.content
        return {r["key"] for r in response.json()["results"]}

    assert listed("topics=postgres") == {"db"}
    # any one of them, compared as extraction stores them (lowercase)
    assert listed("topics=Postgres, project alpha,payments") == {"db", "queue"}
    assert listed("topics=payments&tags=nothing") == set()
    assert listed("topics=,") == {"db", "queue", "misc"}  # no value: no filter
    assert searched(topics=["postgres", "payments"]) == {"db", "queue"}
    assert searched(topics=["payments"]) == {"queue"}
    assert searched(topics=["nothing-like-it"]) == set()


@pytest.mark.django_db(transaction=True)
def test_the_mcp_tools_take_the_same_topics_filter(topical: dict[str, list[str]], member: Agent) -> None:
    status, answer = call_in_process(member.token, "memory_list", {"topics": "payments"})
    assert status == 200 and {m["key"] for m in answer["results"]} == {"queue"}, answer
    status, answer = call_in_process(
        member.token, "memory_search", {"query": "postgres", "topics": ["postgres"]}
    )
    assert status == 200 and {r["key"] for r in answer["results"]} == {"db"}, answer


@pytest.mark.parametrize(
    "body",
    [{"topics": "kafka"}, {"topics": [1]}, {"topics": ["x" * 65]}, {"topics": ["t"] * 11}],
)
def test_a_bad_topics_filter_is_a_400(member: Agent, body: dict[str, Any]) -> None:
    response = member.client.post(member.url("search/"), {"query": "q", **body}, format="json")
    assert response.status_code == 400 and response.json()["error"] == "invalid"
    too_long = member.client.get(member.url("memories/"), {"topics": "x" * 1001})
    assert too_long.status_code == 400
