"""Learnings: claims with a confidence, stored as memories under a derived key, and
superseded when what the team believes about them changes."""

from __future__ import annotations

import hashlib
import threading
from typing import Any

import pytest
from django.db import connections

from memories.learnings import claim_hash, learning_key, record_learning, topic_slug
from memories.models import Memory
from teams.scope import team_scope
from teams.services import set_vault_entry
from tests.conftest import Agent, operator_view

CLAIM = "Deploys on Friday fail more often than on other days."


def learn(agent: Agent, expected: int = 201, **fields: Any) -> dict[str, Any]:
    body = {"topic": "Deploys", "claim": CLAIM, "confidence": "high", **fields}
    response = agent.client.post(agent.url("learnings/"), body, format="json")
    assert response.status_code == expected, response.content
    return response.json()


def versions(agent: Agent, key: str) -> list[Memory]:
    with operator_view():
        return list(Memory.objects.filter(team=agent.team, key=key).order_by("created_at"))


# --- keys ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("topic", "slug"),
    [
        ("Deploys", "deploys"),
        ("  CI / CD pipelines!! ", "ci-cd-pipelines"),
        ("Déploiement à Paris", "deploiement-a-paris"),
        ("postgres_18 -- upgrades", "postgres-18-upgrades"),
        ("a" * 59 + " b", "a" * 59),
        ("x" * 80, "x" * 60),
    ],
)
def test_topic_slug_is_lowercase_letters_digits_and_dashes_up_to_60(topic: str, slug: str) -> None:
    assert topic_slug(topic) == slug


def test_a_topic_without_latin_letters_gets_a_stable_hashed_slug() -> None:
    slug = topic_slug("デプロイ")

    assert slug.startswith("topic-") and len(slug) == len("topic-") + 8
    assert slug == topic_slug(" デプロイ ") and slug != topic_slug("監視")


def test_claim_hash_is_12_hex_of_the_normalised_claim() -> None:
    expected = hashlib.sha256(b"deploys fail on friday").hexdigest()[:12]

    assert claim_hash("Deploys  fail\non FRIDAY ") == expected
    assert learning_key("Deploys", "deploys fail on friday") == f"learn:deploys:{expected}"


def test_recording_a_learning_stores_a_memory_under_its_key(member: Agent) -> None:
    body = learn(member, corroborated=True, domains=["CI", "deploys", "ci"], verified=True)

    key = learning_key("Deploys", CLAIM)
    assert body["key"] == key and body["outcome"] == "created"
    assert body["content"] == CLAIM and body["type"] == "lesson"
    assert body["metadata"]["learning"] == {
        "topic": "Deploys",
        "confidence": "high",
        "corroborated": True,
        "domains": ["ci", "deploys"],
        "verified": True,
    }
    [stored] = versions(member, key)
    assert stored.is_active and stored.updated_by == "writer-bot"
    assert stored.metadata["learning"]["confidence"] == "high"


def test_defaults_are_not_corroborated_not_verified_no_domains_and_lesson(member: Agent) -> None:
    learning = learn(member)["metadata"]["learning"]

    assert (learning["corroborated"], learning["verified"], learning["domains"]) == (False, False, [])


def test_a_reference_learning_has_the_reference_type(member: Agent) -> None:
    assert learn(member, type="reference")["type"] == "reference"


# --- recording again ----------------------------------------------------------------


def test_the_same_learning_again_changes_nothing_and_answers_200(member: Agent) -> None:
    first = learn(member)

    again = learn(member, expected=200)

    assert again["outcome"] == "unchanged" and again["id"] == first["id"]
    assert len(versions(member, first["key"])) == 1


def test_a_new_confidence_supersedes_with_a_reason_saying_what_changed(member: Agent) -> None:
    first = learn(member)

    second = learn(member, confidence="medium")

    assert second["outcome"] == "superseded" and second["key"] == first["key"]
    assert second["supersedes_id"] == first["id"]
    assert second["supersede_reason"] == "confidence high → medium"
    assert second["supersede_kind"] == "hard"
    old, new = versions(member, first["key"])
    assert not old.is_active and old.metadata["learning"]["confidence"] == "high"
    assert new.is_active and new.metadata["learning"]["confidence"] == "medium"


def test_several_belief_changes_are_all_named_in_the_reason(member: Agent) -> None:
    learn(member)

    body = learn(member, confidence="low", corroborated=True, verified=True, type="reference")

    assert body["supersede_reason"] == (
        "confidence high → low; corroborated false → true; verified false → true; type lesson → reference"
    )


def test_a_change_of_wording_topic_spelling_or_domains_only_is_a_soft_supersede(member: Agent) -> None:
    first = learn(member, domains=["ci"])

    reworded = learn(member, claim="deploys on friday  FAIL more often than on other days.", domains=["ci"])
    redomained = learn(
        member, claim="deploys on friday  FAIL more often than on other days.", domains=["ops"]
    )

    assert reworded["key"] == redomained["key"] == first["key"]
    for body in (reworded, redomained):
        assert body["outcome"] == "superseded"
        assert (body["supersede_kind"], body["supersede_reason"]) == ("soft", "minor correction")
    assert len(versions(member, first["key"])) == 3


def test_the_same_claim_under_another_topic_is_another_learning(member: Agent) -> None:
    first = learn(member)

    other = learn(member, topic="Releases")

    assert other["outcome"] == "created" and other["key"] != first["key"]
    assert other["key"].startswith("learn:releases:")


def test_a_memory_saved_under_the_key_by_hand_becomes_a_learning(member: Agent) -> None:
    key = learning_key("Deploys", CLAIM)
    member.client.post(
        member.url("memories/"), {"key": key, "content": CLAIM, "metadata": {"a": 1}}, format="json"
    )

    body = learn(member)

    assert body["outcome"] == "superseded" and body["supersede_reason"] == "recorded as a learning"
    assert body["metadata"]["a"] == 1 and body["metadata"]["learning"]["confidence"] == "high"


def test_the_session_header_is_in_updated_by(member: Agent) -> None:
    response = member.client.post(
        member.url("learnings/"),
        {"topic": "t", "claim": "c", "confidence": "low"},
        format="json",
        HTTP_X_MEMORYHUB_SESSION="s-1",
    )

    assert response.json()["updated_by"] == "writer-bot/s-1"


def test_a_secret_in_a_claim_is_redacted_before_it_shapes_the_key(member: Agent) -> None:
    with team_scope(member.team.id):
        set_vault_entry(team=member.team, key="db", value="hunter2-prod-pw", is_secret=True, actor="t")

    body = learn(member, claim="The db password is hunter2-prod-pw")

    assert "hunter2-prod-pw" not in body["content"]
    assert body["key"] == learning_key("Deploys", body["content"])
    assert body["redactions"] == [{"kind": "vault_secret", "count": 1}]
    with operator_view():
        assert not Memory.objects.filter(content__contains="hunter2").exists()


# --- concurrent writers ------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_concurrent_records_of_one_claim_serialise_on_the_key(member: Agent) -> None:
    """Two agents record the same claim at once, with different confidence, each on its
    own connection: the key's lock makes one create it and the other decide against
    the committed row (a supersede), never a conflict or two active rows."""
    barrier = threading.Barrier(2)
    outcomes: list[str] = []
    failures: list[BaseException] = []

    def record(confidence: str, agent_name: str) -> None:
        try:
            barrier.wait(10)
            with team_scope(member.team.id):
                result = record_learning(
                    team=member.team,
                    topic="Deploys",
                    claim=CLAIM,
                    confidence=confidence,
                    updated_by=agent_name,
                )
            outcomes.append(result.outcome)
        except BaseException as error:  # re-raised in the test's thread
            failures.append(error)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=record, args=args) for args in (("high", "a-bot"), ("low", "b-bot"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)  # a hang detector

    assert failures == []
    assert sorted(outcomes) == ["created", "superseded"]
    first, second = versions(member, learning_key("Deploys", CLAIM))
    assert (first.is_active, second.is_active, second.supersedes_id) == (False, True, first.id)
    assert {first.updated_by, second.updated_by} == {"a-bot", "b-bot"}


# --- bad input ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"claim": CLAIM, "confidence": "high"}, "topic"),
        ({"topic": "t", "confidence": "high"}, "claim"),
        ({"topic": "t", "claim": CLAIM}, "confidence"),
        ({"topic": "t", "claim": CLAIM, "confidence": "certain"}, "confidence"),
        ({"topic": "t", "claim": CLAIM, "confidence": 1}, "confidence"),
        ({"topic": "t", "claim": "   ", "confidence": "high"}, "claim"),
        ({"topic": "", "claim": CLAIM, "confidence": "high"}, "topic"),
        ({"topic": 7, "claim": CLAIM, "confidence": "high"}, "topic"),
        ({"topic": "t" * 201, "claim": CLAIM, "confidence": "high"}, "topic"),
        ({"topic": "t", "claim": "c" * 4001, "confidence": "high"}, "claim"),
        ({"topic": "t", "claim": CLAIM, "confidence": "high", "corroborated": "yes"}, "corroborated"),
        ({"topic": "t", "claim": CLAIM, "confidence": "high", "verified": 1}, "verified"),
        ({"topic": "t", "claim": CLAIM, "confidence": "high", "domains": "ci"}, "domains"),
        ({"topic": "t", "claim": CLAIM, "confidence": "high", "domains": ["x"] * 11}, "domains"),
        ({"topic": "t", "claim": CLAIM, "confidence": "high", "domains": ["x" * 41]}, "domains"),
        ({"topic": "t", "claim": CLAIM, "confidence": "high", "domains": [3]}, "domains"),
        ({"topic": "t", "claim": CLAIM, "confidence": "high", "type": "decision"}, "type"),
        ({"topic": "t", "claim": CLAIM, "confidence": "high", "confidnce": "low"}, "confidnce"),
    ],
)
def test_bad_input_is_a_400_naming_the_field_and_stores_nothing(
    member: Agent, body: dict[str, Any], field: str
) -> None:
    response = member.client.post(member.url("learnings/"), body, format="json")

    assert response.status_code == 400
    assert response.json()["error"] == "invalid"
    assert field in response.json()["fields"]
    with operator_view():
        assert not Memory.objects.exists()


def test_a_topic_of_only_punctuation_gets_a_hashed_slug(member: Agent) -> None:
    body = learn(member, topic="!!!")

    assert body["key"].startswith("learn:topic-")


def test_a_read_only_token_cannot_record_learnings(readonly_member: Agent) -> None:
    response = readonly_member.client.post(
        readonly_member.url("learnings/"), {"topic": "t", "claim": CLAIM, "confidence": "high"}, format="json"
    )

    assert response.status_code == 403
    with operator_view():
        assert not Memory.objects.exists()


# --- other teams -------------------------------------------------------------------


def test_another_teams_token_on_our_learnings_url_is_a_404_with_nothing_of_ours(
    member: Agent, outsider: Agent
) -> None:
    ours = learn(member, topic="alpha-only-topic")

    response = outsider.client.post(
        member.url("learnings/"),
        {"topic": "alpha-only-topic", "claim": CLAIM, "confidence": "low"},
        format="json",
    )

    assert response.status_code == 404 and response.json() == {"error": "not_found", "detail": "not found"}
    for marker in (ours["key"], ours["id"], CLAIM, "alpha-only-topic"):
        assert marker.encode() not in response.content
    assert [m.metadata["learning"]["confidence"] for m in versions(member, ours["key"])] == ["high"]


def test_the_same_learning_in_another_team_is_its_own_entry(member: Agent, outsider: Agent) -> None:
    ours = learn(member)

    theirs = learn(outsider, confidence="low")

    assert theirs["outcome"] == "created" and theirs["key"] == ours["key"]
    assert theirs["supersedes_id"] is None and theirs["id"] != ours["id"]
    assert [m.metadata["learning"]["confidence"] for m in versions(member, ours["key"])] == ["high"]
