"""Search through the API with the embedded local model: the vector path, the keyword
path, the merge, decay, MMR, filters, state rules, bad input and isolation."""

from __future__ import annotations

import socket
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from memories.models import Memory
from search.models import Chunk, ChunkEmbedding
from teams.scope import team_scope
from tests.conftest import Agent, operator_view, search

FRIDAY = "Never deploy to production on Fridays: nobody is around over the weekend to fix what breaks."
PARAPHRASE = "Can we push new code live at the end of the working week?"


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """The local model must work offline: any connection off this machine fails."""
    real_connect = socket.socket.connect

    def guarded(sock: socket.socket, address: Any) -> Any:
        if sock.family in (socket.AF_INET, socket.AF_INET6) and address[0] not in (
            "127.0.0.1",
            "::1",
            "localhost",
        ):
            raise OSError(f"network access attempted: {address}")
        return real_connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)


@pytest.fixture
def corpus(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    save(member, "deploy-friday", FRIDAY, type="lesson")
    save(member, "db-host", "The staging database runs on db-3.internal, port 5433.", type="reference")
    save(member, "lunch", "The team orders pizza on Wednesdays from the place on Elm Street.")
    save(member, "brewing", "Ada's hobby is zymurgy; she brews a porter every winter.", type="identity")
    save(member, "ci-cache", "CI caches pip wheels keyed by the hash of pyproject.toml.", type="decision")


def keys(body: dict[str, Any]) -> list[str]:
    return [r["key"] for r in body["results"]]


def test_saved_memory_is_indexed_with_chunks_and_vectors(corpus: None, member: Agent) -> None:
    response = member.client.get(member.url("memories/deploy-friday/"))

    assert response.json()["index_state"] == "indexed"
    with team_scope(member.team.id):
        chunks = Chunk.objects.filter(memory__key="deploy-friday")
        assert [c.text for c in chunks] == [FRIDAY]
        assert (
            ChunkEmbedding.objects.filter(chunk__in=chunks, model="all-MiniLM-L6-v2-onnx-int8").count() == 1
        )


def test_paraphrase_is_found_by_the_vector_path(corpus: None, member: Agent) -> None:
    body = search(member, PARAPHRASE, explain=True)

    assert body["search_mode"] == "hybrid"
    top = body["results"][0]
    assert top["key"] == "deploy-friday"
    # No word of the query is in the memory: only the vector path can have found it.
    assert top["explain"]["keyword"] == 0
    assert top["explain"]["vector"] > 0.3
    assert top["source"] == "vector"


def test_rare_word_is_found_by_the_keyword_path(corpus: None, member: Agent) -> None:
    body = search(member, "zymurgy", explain=True)

    top = body["results"][0]
    assert top["key"] == "brewing"
    assert "keyword" in top["source"]
    assert top["explain"]["keyword"] == 1.0
    assert "zymurgy" in top["snippet"]


def test_keyword_and_vector_modes_run_one_path(corpus: None, member: Agent) -> None:
    keyword = search(member, PARAPHRASE, mode="keyword")
    vector = search(member, "zymurgy", mode="vector", explain=True)

    assert keyword["search_mode"] == "keyword"
    assert "deploy-friday" not in keys(keyword)
    assert vector["search_mode"] == "vector"
    assert all(r["explain"]["keyword"] == 0 and r["source"] == "vector" for r in vector["results"])


def test_merged_score_is_the_weighted_sum_times_decay(corpus: None, member: Agent) -> None:
    body = search(member, "staging database port", explain=True, max_results=5)

    for result in body["results"]:
        parts = result["explain"]
        assert parts["merged"] == pytest.approx(0.7 * parts["vector"] + 0.3 * parts["keyword"], abs=1e-5)
        assert result["score"] == pytest.approx(parts["merged"] * parts["decay"], abs=1e-5)
    assert body["results"][0]["key"] == "db-host"


def test_team_weights_change_the_merge(corpus: None, member: Agent) -> None:
    member.team.hybrid_vector_weight, member.team.hybrid_keyword_weight = 0.2, 0.8
    member.team.save()

    parts = search(member, "staging database port", explain=True)["results"][0]["explain"]

    assert parts["merged"] == pytest.approx(0.2 * parts["vector"] + 0.8 * parts["keyword"], abs=1e-5)


def test_decay_halves_every_half_life_except_identity_and_lesson(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    for key, memory_type in [
        ("old-context", "context"),
        ("old-lesson", "lesson"),
        ("old-identity", "identity"),
    ]:
        save(
            member,
            key,
            "Backups of the billing database run nightly at 02:00 UTC.",
            type=memory_type,
            allow_duplicate=True,
        )
    with team_scope(member.team.id):
        Memory.objects.filter(team=member.team).update(created_at=timezone.now() - timedelta(days=60))

    results = {r["key"]: r for r in search(member, "billing backups", explain=True, max_results=3)["results"]}

    assert results["old-context"]["explain"]["decay"] == pytest.approx(0.25, abs=1e-3)
    assert results["old-lesson"]["explain"]["decay"] == 1.0
    assert results["old-identity"]["explain"]["decay"] == 1.0
    assert results["old-context"]["score"] < results["old-lesson"]["score"]


def test_mmr_lets_a_different_answer_past_near_duplicates(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    base = "The release checklist: run the migrations, tag the release, announce the release in #eng"
    save(member, "checklist-1", base + ".", allow_duplicate=True)
    save(member, "checklist-2", base + " channel.", allow_duplicate=True)
    save(member, "checklist-3", base + " today.", allow_duplicate=True)
    save(
        member,
        "rollback",
        "To roll back a bad release, redeploy the previous tag and restore the release notes.",
    )

    body = search(member, "release checklist tag announce", max_results=2, explain=True)

    assert keys(body)[0].startswith("checklist-")
    assert keys(body)[1] == "rollback"
    assert body["results"][1]["explain"]["mmr"] is not None


def test_superseded_entries_are_found_and_point_to_their_successor(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    save(member, "vpn", "The VPN gateway is vpn-old.example.org.")
    new = save(
        member, "vpn", "The VPN gateway moved to vpn-new.example.org.", supersede_reason="gateway moved"
    )

    results = search(member, "VPN gateway", max_results=5)["results"]
    by_active = {r["is_active"]: r for r in results}

    assert by_active[True]["id"] == new["id"]
    old = by_active[False]
    assert old["superseded_by"] == {
        "id": new["id"],
        "key": "vpn",
        "reason": "gateway moved",
        "kind": "hard",
        "is_active": True,
    }
    only_active = search(member, "VPN gateway", include_superseded=False)["results"]
    assert [r["id"] for r in only_active] == [new["id"]]


def test_deleted_entries_are_never_returned(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    save(member, "old-wifi", "The office wifi password rotates monthly; ask Quentin.")
    save(
        member,
        "old-wifi",
        "The office wifi is now managed by IT; ask the helpdesk.",
        supersede_reason="new owner",
    )
    assert member.client.delete(member.url("memories/old-wifi/")).status_code == 204

    for mode in ("hybrid", "keyword", "vector"):
        body = search(member, "office wifi Quentin helpdesk", mode=mode, max_results=10)
        assert body["results"] == [], mode


def test_type_and_project_filters(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    save(member, "a", "Deploys go through the blue-green pipeline.", type="decision", project="web")
    save(
        member, "b", "Deploys of the mobile app go through the store review.", type="lesson", project="mobile"
    )
    save(member, "c", "Deploys are frozen during the audit.", type="warning", project="web")

    assert keys(search(member, "deploys", types=["decision"])) == ["a"]
    # "warning" is an alias of lesson.
    assert set(keys(search(member, "deploys", types=["warning"]))) == {"b", "c"}
    assert set(keys(search(member, "deploys", types=["lesson", "decision"]))) == {"a", "b", "c"}
    assert set(keys(search(member, "deploys", project="web"))) == {"a", "c"}
    assert keys(search(member, "deploys", project="nope")) == []


def test_min_score_and_max_results(corpus: None, member: Agent) -> None:
    everything = search(member, "database deploy pizza brewing cache", max_results=50)["results"]
    assert len(everything) == 5
    assert len(search(member, "database deploy pizza brewing cache", max_results=2)["results"]) == 2

    floor = sorted(r["score"] for r in everything)[2]
    kept = search(member, "database deploy pizza brewing cache", max_results=50, min_score=floor)["results"]
    assert len(kept) == 3 and all(r["score"] >= floor for r in kept)


def test_read_scope_may_search(corpus: None, readonly_member: Agent) -> None:
    assert search(readonly_member, "zymurgy")["results"][0]["key"] == "brewing"


def test_other_team_never_sees_this_teams_memories(corpus: None, outsider: Agent, save) -> None:  # type: ignore[no-untyped-def]
    save(outsider, "bravo-note", "Bravo keeps its own notes about deploys.")

    for mode in ("hybrid", "keyword", "vector"):
        response = outsider.client.post(
            outsider.url("search/"), {"query": f"{FRIDAY} zymurgy staging", "mode": mode}, format="json"
        )
        assert keys(response.json()) in ([], ["bravo-note"])
        for marker in (b"deploy-friday", b"zymurgy", b"db-3.internal", b"alpha"):
            assert marker not in response.content


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"query": ""}, "query"),
        ({"query": "   \n\t "}, "query"),
        ({"query": "x" * 8001}, "query"),
        ({"query": 5}, "query"),
        ({}, "query"),
        ({"query": "ok", "types": ["opinion"]}, "types"),
        ({"query": "ok", "types": []}, "types"),
        ({"query": "ok", "types": "lesson"}, "types"),
        ({"query": "ok", "max_results": 0}, "max_results"),
        ({"query": "ok", "max_results": 51}, "max_results"),
        ({"query": "ok", "max_results": "5"}, "max_results"),
        ({"query": "ok", "max_results": True}, "max_results"),
        ({"query": "ok", "min_score": "high"}, "min_score"),
        ({"query": "ok", "min_score": 2}, "min_score"),
        ({"query": "ok", "explain": "yes"}, "explain"),
        ({"query": "ok", "mode": "psychic"}, "mode"),
        ({"query": "ok", "limit": 3}, "limit"),
    ],
)
def test_bad_search_input_answers_400_naming_the_field(
    member: Agent, body: dict[str, Any], field: str
) -> None:
    response = member.client.post(member.url("search/"), body, format="json")

    assert response.status_code == 400, response.content
    error = response.json()
    assert set(error) == {"error", "detail", "fields"}
    assert field in error["fields"]


def test_nul_bytes_in_a_query_answer_400(member: Agent) -> None:
    response = member.client.post(member.url("search/"), {"query": "ok\x00"}, format="json")

    assert response.status_code == 400
    assert response.json()["error"] == "invalid_characters"


def test_queries_with_tsquery_syntax_are_plain_words(corpus: None, member: Agent) -> None:
    for query in ["zymurgy & | ! ( ) : * '", "\\", "'''", "a:* <-> b", "&&&"]:
        response = member.client.post(member.url("search/"), {"query": query}, format="json")
        assert response.status_code == 200, (query, response.content)


def test_secret_values_never_come_back_in_search(member: Agent, admin_member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    put = admin_member.client.put(
        admin_member.url("vault/deploy-key/"),
        {"value": "hunter2-correct-horse", "is_secret": True},
        format="json",
    )
    assert put.status_code == 201
    saved = save(member, "creds", "The deploy password is hunter2-correct-horse, keep it safe.")
    assert saved["redactions"]

    body = search(member, "deploy password hunter2-correct-horse", explain=True)

    assert keys(body) == ["creds"]
    with operator_view():
        assert not Chunk.objects.filter(text__contains="hunter2").exists()
    assert (
        b"hunter2"
        not in member.client.post(member.url("search/"), {"query": "deploy password"}, format="json").content
    )
