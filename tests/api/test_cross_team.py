"""Every team-scoped endpoint, called by another team: 404, and no byte of the
other team in any body."""

from __future__ import annotations

import pytest
from django.urls import URLPattern, URLResolver, get_resolver, resolve

from memories.conversations.models import Conversation, ConversationLine
from memories.facts.models import Fact
from memories.facts.services import set_fact
from memories.models import Memory
from teams.models import VaultEntry
from teams.scope import team_scope
from teams.services import set_vault_entry
from tests.conftest import Agent, operator_view

ALPHA_MARKERS = [
    "alpha",  # the team's slug and name
    "Alpha",
    "alpha-plan-7",  # memory key
    "launch on the ninth",  # memory content
    "alpha-vault-3",  # vault key
    "vault-value-ninety",  # vault value
    "alpha-entity-5",  # fact entity
    "fact-value-eleven",  # fact value
    "alpha-talk-13",  # conversation title
    "conversation-line-twelve",  # conversation line
]
ALPHA_CONVERSATION = "7a1f0c3e-0000-4000-8000-000000000013"

# (method, path under /api/v1/teams/<team>/, body)
ENDPOINTS = [
    ("get", "memories/", None),
    ("post", "memories/", {"key": "alpha-plan-7", "content": "x", "supersede_reason": "take over"}),
    ("get", "memories/alpha-plan-7/", None),
    ("delete", "memories/alpha-plan-7/", None),
    ("get", "memories/alpha-plan-7/history/", None),
    # The id of no version: another team's token gets 404 before any lookup (the real
    # id of alpha's version is tried in tests/memories/test_belief_revision.py).
    ("get", "memories/alpha-plan-7/versions/00000000-0000-4000-8000-000000000007/", None),
    ("post", "memories/alpha-plan-7/unsupersede/", {"reason": "take it back"}),
    ("post", "memories/alpha-plan-7/rate/", {"direction": "down"}),
    ("post", "memories/alpha-plan-7/confirm/", {"note": "outsider says so"}),
    ("post", "memories/alpha-plan-7/archive/", {}),
    ("post", "memories/alpha-plan-7/restore/", {}),
    ("get", "memories/alpha-plan-7/annotations/", None),
    ("post", "memories/alpha-plan-7/annotations/", {"note": "outsider note"}),
    (
        "post",
        "memories/batch/",
        {"entries": [{"key": "alpha-plan-7", "content": "launch on the ninth", "supersede_reason": "x"}]},
    ),
    # The batch's URL is also the key "batch" (GET and DELETE reach that key).
    ("get", "memories/batch/", None),
    ("delete", "memories/batch/", None),
    ("get", "vault/", None),
    ("get", "vault/alpha-vault-3/", None),
    ("put", "vault/alpha-vault-3/", {"value": "overwritten"}),
    ("delete", "vault/alpha-vault-3/", None),
    ("get", "audit/", None),
    ("post", "search/", {"query": "launch on the ninth alpha-plan-7", "explain": True}),
    ("get", "injection/", None),
    # Sessions: the real id of an alpha session is tried in tests/teams/test_sessions.py.
    ("get", "sessions/", None),
    ("post", "sessions/", {"project": "alpha", "current_task": "x"}),
    ("get", "sessions/00000000-0000-4000-8000-000000000006/", None),
    ("patch", "sessions/00000000-0000-4000-8000-000000000006/", {"current_task": "x"}),
    ("delete", "sessions/00000000-0000-4000-8000-000000000006/", None),
    ("get", "log/", None),
    ("post", "learnings/", {"topic": "alpha", "claim": "launch on the ninth", "confidence": "low"}),
    # alpha's real skill name: another team's token gets 404 before any lookup.
    ("get", "skills/alpha-skill-7/", None),
    # Admin-scoped; the outsider's token has every scope, and still gets 404.
    ("get", "export/", None),
    ("post", "import/", {"record": "header", "format": "memoryhub-export", "version": 1}),
    # Nudges: the real id of an alpha nudge is tried in tests/freshness/test_nudges_api.py.
    ("get", "nudges/", None),
    ("post", "nudges/00000000-0000-4000-8000-000000000008/resolve/", {"action": "dismiss"}),
    # Drafts: the real id of an alpha draft is tried in tests/freshness/test_drafts_api.py.
    ("get", "drafts/", None),
    ("post", "drafts/extract/", {"transcript": "We decided to launch on the ninth."}),
    ("get", "drafts/00000000-0000-4000-8000-000000000009/", None),
    ("post", "drafts/00000000-0000-4000-8000-000000000009/accept/", {}),
    ("post", "drafts/00000000-0000-4000-8000-000000000009/reject/", {}),
    ("post", "drafts/00000000-0000-4000-8000-000000000009/merge/", {"into_key": "alpha-plan-7"}),
    # Anchors: alpha's anchored entries and checks by key are tried in
    # tests/freshness/test_anchor_checks.py.
    ("get", "anchors/", None),
    ("get", "anchors/checks/", None),
    ("post", "anchors/report/", {"results": [{"key": "alpha-plan-7", "exists": False}]}),
    ("get", "facts/", None),
    ("get", "facts/alpha-entity-5/", None),
    ("get", "facts/alpha-entity-5/provider/", None),
    ("put", "facts/alpha-entity-5/provider/", {"value": "overwritten", "reason": "take over"}),
    ("delete", "facts/alpha-entity-5/provider/", None),
    ("get", "facts/alpha-entity-5/provider/history/", None),
    ("get", "conversations/", None),
    ("post", "conversations/", {"lines": [{"role": "user", "text": "take over"}]}),
    ("get", f"conversations/{ALPHA_CONVERSATION}/", None),
    ("delete", f"conversations/{ALPHA_CONVERSATION}/", None),
]


@pytest.fixture
def alpha_data(member: Agent) -> None:
    saved = member.client.post(
        member.url("memories/"),
        {
            "key": "alpha-plan-7",
            "content": "launch on the ninth",
            "skill_trigger": {"name": "alpha-skill-7", "keywords": ["launch"], "always_on": True},
        },
        format="json",
    )
    assert saved.status_code == 201
    with team_scope(member.team.id):
        set_vault_entry(
            team=member.team,
            key="alpha-vault-3",
            value="vault-value-ninety",
            is_secret=False,
            actor="t",
        )
        set_fact(
            team=member.team, entity="alpha-entity-5", key="provider", value="fact-value-eleven", actor="t"
        )
        conversation = Conversation.objects.create(
            id=ALPHA_CONVERSATION, team=member.team, title="alpha-talk-13", line_count=1
        )
        ConversationLine.objects.create(
            team=member.team,
            conversation=conversation,
            number=1,
            role="user",
            text="conversation-line-twelve",
        )


def assert_alpha_untouched(member: Agent) -> None:
    with operator_view():
        memory = Memory.objects.get(team=member.team, key="alpha-plan-7")
        vault = VaultEntry.objects.get(team=member.team, key="alpha-vault-3")
    assert memory.is_active and memory.content == "launch on the ninth"
    assert vault.value == "vault-value-ninety"
    with operator_view():
        fact = Fact.objects.get(team=member.team, entity="alpha-entity-5", is_active=True)
    assert fact.value == "fact-value-eleven"
    with operator_view():
        assert Conversation.objects.filter(id=ALPHA_CONVERSATION, team=member.team).exists()
        assert Conversation.objects.filter(team=member.team).count() == 1


def assert_no_alpha_bytes(body: bytes) -> None:
    for marker in ALPHA_MARKERS:
        assert marker.encode() not in body, marker


def test_endpoint_list_covers_every_team_route_and_method() -> None:
    """A new team-scoped endpoint must be added to ENDPOINTS, or this fails."""

    def walk(patterns: list, prefix: str = "") -> list[tuple[str, object]]:  # type: ignore[type-arg]
        found = []
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                found += walk(pattern.url_patterns, prefix + str(pattern.pattern))
            elif isinstance(pattern, URLPattern):
                found.append((prefix + str(pattern.pattern), pattern.callback))
        return found

    routed = {
        (route, method)
        for route, callback in walk(get_resolver().url_patterns)
        if route.startswith("api/v1/teams/")
        for method in getattr(callback, "actions", {})
        if method != "head"  # answered like get
    }
    tested = set()
    for method, path, _ in ENDPOINTS:
        match = resolve(f"/api/v1/teams/alpha/{path}")
        # resolve() reports the route without the regex anchors the router adds.
        tested.add((match.route, method))
    routed = {(route.replace("/^", "/"), method) for route, method in routed}
    assert routed and routed == tested


@pytest.mark.parametrize(("method", "path", "body"), ENDPOINTS)
def test_outsider_token_on_alpha_urls_gets_404_and_nothing_of_alpha(
    alpha_data: None, member: Agent, outsider: Agent, method: str, path: str, body: dict | None
) -> None:
    response = getattr(outsider.client, method)(member.url(path), body, format="json")

    assert response.status_code == 404
    assert response.json() == {"error": "not_found", "detail": "not found"}
    assert_no_alpha_bytes(response.content)
    assert_alpha_untouched(member)


@pytest.mark.parametrize(
    ("method", "path"),
    [(m, p) for m, p, _ in ENDPOINTS if "alpha" in p and m in ("get", "delete")],
)
def test_outsider_using_alpha_keys_in_own_team_gets_404_and_nothing_of_alpha(
    alpha_data: None, member: Agent, outsider: Agent, method: str, path: str
) -> None:
    response = getattr(outsider.client, method)(outsider.url(path))

    assert response.status_code == 404
    assert_no_alpha_bytes(response.content)
    assert_alpha_untouched(member)


def test_outsider_lists_show_nothing_of_alpha(alpha_data: None, outsider: Agent) -> None:
    for path in ("memories/", "vault/", "facts/", "conversations/"):
        response = outsider.client.get(outsider.url(path))
        assert response.status_code == 200
        assert response.json()["results"] == []
        assert_no_alpha_bytes(response.content)


def test_outsider_writing_alpha_key_creates_only_its_own_entry(
    alpha_data: None, member: Agent, outsider: Agent
) -> None:
    response = outsider.client.post(
        outsider.url("memories/"), {"key": "alpha-plan-7", "content": "bravo's own"}, format="json"
    )

    assert response.status_code == 201
    assert response.json()["supersedes_id"] is None
    assert_alpha_untouched(member)


def test_unknown_team_and_other_team_answer_alike(alpha_data: None, outsider: Agent) -> None:
    existing = outsider.client.get("/api/v1/teams/alpha/memories/")
    missing = outsider.client.get("/api/v1/teams/no-such-team/memories/")

    assert existing.status_code == missing.status_code == 404
    assert existing.content == missing.content
