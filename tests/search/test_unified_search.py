"""One search over memories, facts and conversations: the `sources` argument, each
result's `origin`, the merge by score with memory results in their own order, `high`
facts and read-only tokens, conversation hits with their line range, isolation."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from memories.conversations.services import Line, store_conversation
from memories.facts.services import set_fact
from search import conversation_index
from teams.models import Team
from teams.scope import team_scope
from tests.conftest import Agent, search
from tests.mcp.conftest import call_in_process

pytestmark = pytest.mark.django_db

DEPLOY = "Never deploy to production on Fridays: nobody is around over the weekend to fix what breaks."
TALK = [
    Line("user", "Which payment provider did we settle on for project alpha?"),
    Line("assistant", "We chose Paddle after comparing it with Stripe; invoices are handled for us."),
    Line("user", "Good. Now let's look at the flaky login test in the auth suite."),
    Line("assistant", "The login test waits on a fixed sleep; replacing it with an event fixes it."),
]


@pytest.fixture
def knowledge(
    team: Team, member: Agent, save: Any, django_capture_on_commit_callbacks: Any
) -> dict[str, Any]:
    save(member, "deploy-friday", DEPLOY, type="lesson")
    save(member, "payments", "Invoices for customers go out on the first of the month.")
    with team_scope(team.id):
        set_fact(team=team, entity="project-alpha", key="payments.provider", value="Paddle", actor="t")
        set_fact(
            team=team,
            entity="project-alpha",
            key="payments.api-owner",
            value="Grace",
            actor="t",
            sensitivity="high",
        )
        with django_capture_on_commit_callbacks(execute=True):
            conversation = store_conversation(team=team, lines=TALK, actor="t", title="alpha sync")
    return {"conversation": conversation}


def origins(body: dict[str, Any]) -> list[str]:
    return [result["origin"] for result in body["results"]]


def test_default_sources_are_memories_and_facts_with_memory_order_unchanged(
    knowledge: dict[str, Any], member: Agent
) -> None:
    only_memories = search(member, "payments provider for project alpha", sources=["memories"])
    default = search(member, "payments provider for project alpha")
    memory_ids = [r["id"] for r in default["results"] if r["origin"] == "memories"]
    assert memory_ids == [r["id"] for r in only_memories["results"]]
    assert "conversations" not in origins(default)
    fact = next(r for r in default["results"] if r["origin"] == "facts")
    assert fact["fact"]["entity"] == "project-alpha" and fact["fact"]["value"] == "Paddle"
    assert fact["key"] == "project-alpha/payments.provider" and fact["type"] == "fact"
    assert 0 < fact["score"] <= 1


def test_results_are_merged_by_score(knowledge: dict[str, Any], member: Agent) -> None:
    body = search(
        member, "payments provider project alpha", sources=["memories", "facts", "conversations"], min_score=0
    )
    results = body["results"]
    assert {"memories", "facts", "conversations"} <= set(origins(body))
    for index, hit in enumerate(results):
        if hit["origin"] == "memories":
            continue
        before = [r["score"] for r in results[:index] if r["origin"] == "memories"]
        after = [r["score"] for r in results[index:] if r["origin"] == "memories"]
        # Placed after the memory results scoring at least as much, before the first that scores less.
        assert all(score >= hit["score"] for score in before)
        assert not after or after[0] < hit["score"] or all(r["origin"] != "memories" for r in results[index:])


def test_a_conversation_hit_names_its_conversation_and_line_range(
    knowledge: dict[str, Any], member: Agent
) -> None:
    body = search(member, "flaky login test fixed sleep", sources=["conversations"])
    assert origins(body) == ["conversations"]
    hit = body["results"][0]["conversation"]
    assert hit["id"] == str(knowledge["conversation"].id) and hit["title"] == "alpha sync"
    assert 1 <= hit["first_line"] <= 3 <= hit["last_line"] <= 4
    assert "login test" in hit["text"]
    lines = member.client.get(
        member.url(f"conversations/{hit['id']}/"), {"lines": f"{hit['first_line']}-{hit['last_line']}"}
    ).json()["lines"]
    assert any("fixed sleep" in line["text"] for line in lines)


def test_conversation_windows_record_their_first_and_last_lines() -> None:
    lines = [(n, "user", f"message number {n} " + "word " * 30) for n in range(1, 60)]
    windows = conversation_index.line_windows(lines)
    assert windows[0].first_line == 1 and windows[-1].last_line == 59
    for before, after in itertools.pairwise(windows):
        assert after.first_line <= before.last_line + 1 and after.first_line > before.first_line
    assert all(w.last_line - w.first_line < conversation_index.WINDOW_LINES for w in windows)


def test_high_facts_are_never_found_by_read_only_tokens(
    knowledge: dict[str, Any], member: Agent, readonly_member: Agent
) -> None:
    query = "payments api owner project alpha"
    writer = search(member, query, sources=["facts"])
    reader = search(readonly_member, query, sources=["facts"])
    assert "Grace" in [r["fact"]["value"] for r in writer["results"]]
    assert all(r["fact"]["key"] != "payments.api-owner" for r in reader["results"])
    assert (
        b"Grace"
        not in readonly_member.client.post(
            readonly_member.url("search/"), {"query": query, "sources": ["facts"]}, format="json"
        ).content
    )


def test_sources_are_checked(member: Agent) -> None:
    for bad in ([], ["mail"], "facts", ["facts"] * 4):
        response = member.client.post(member.url("search/"), {"query": "x", "sources": bad}, format="json")
        assert response.status_code == 400, bad
        assert response.json()["error"]


def test_a_query_without_words_finds_facts_by_name_or_nothing_and_never_fails(
    knowledge: dict[str, Any], member: Agent
) -> None:
    """Punctuation only ("::", the MCP fuzzer's ":") has no word to match: the facts are
    looked up by their names' trigrams alone, not refused by a malformed text query."""
    for query in (":", "::", "&", "!", "'", "-- ..."):
        body = search(member, query, sources=["facts", "conversations"], mode="keyword")
        assert body["results"] == [], (query, body)
    # A name alone still finds its fact.
    assert "facts" in origins(search(member, "project-alpha", sources=["facts"], mode="keyword"))


def test_keyword_mode_searches_conversations_without_vectors(
    knowledge: dict[str, Any], member: Agent
) -> None:
    body = search(member, "Paddle Stripe", sources=["conversations"], mode="keyword")
    assert origins(body) == ["conversations"] and body["results"][0]["source"] == "keyword"


def test_an_outsider_finds_nothing_of_the_team(knowledge: dict[str, Any], outsider: Agent) -> None:
    response = outsider.client.post(
        outsider.url("search/"),
        {"query": "Paddle payments provider flaky login", "sources": ["memories", "facts", "conversations"]},
        format="json",
    )
    assert response.status_code == 200 and response.json()["results"] == []
    assert b"Paddle" not in response.content and b"alpha" not in response.content
    other = outsider.client.post(
        outsider.url("search/", team="alpha"), {"query": "Paddle", "sources": ["facts"]}, format="json"
    )
    assert other.status_code == 404 and b"Paddle" not in other.content


@pytest.mark.django_db(transaction=True)
def test_an_outsider_finds_nothing_of_the_team_over_mcp(knowledge: dict[str, Any], outsider: Agent) -> None:
    arguments = {
        "query": "Paddle payments provider flaky login",
        "sources": ["memories", "facts", "conversations"],
    }
    status, body = call_in_process(outsider.token, "memory_search", arguments)
    assert status == 200 and body["results"] == []
    assert "Paddle" not in str(body) and "alpha" not in str(body)


@pytest.mark.parametrize(
    "query",
    [
        "-" * 7_999 + "x",  # separators, then one letter
        "project-alpha " * 571,  # a fact's name and a word of the talk, again and again
        "payments.provider/" * 444,  # a fact's key between separators
        "p" * 8_000,  # one word as long as a query may be
    ],
)
def test_adversarial_queries_search_every_source(
    knowledge: dict[str, Any], member: Agent, query: str
) -> None:
    for mode in ("keyword", "hybrid"):
        body = search(member, query, mode=mode, sources=["memories", "facts", "conversations"])
        assert set(origins(body)) <= {"memories", "facts", "conversations"}


def test_a_query_of_64_kib_of_separators_is_refused(knowledge: dict[str, Any], member: Agent) -> None:
    response = member.client.post(
        member.url("search/"), {"query": "-_" * 32_768, "sources": ["facts", "conversations"]}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["error"] == "invalid" and "8000" in response.content.decode()
