"""Search through the API with the embedded local model: the vector path, the keyword
path, the merge, decay, MMR, filters, state rules, bad input and isolation."""

from __future__ import annotations

import re
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


DB_HOST = "The staging database runs on db-3.internal, port 5433."
CORPUS_KEYS = {"deploy-friday", "db-host", "lunch", "brewing", "ci-cache"}
RESULT_FIELDS = [
    "id",
    "origin",
    "key",
    "snippet",
    "score",
    "type",
    "is_active",
    "source",
    "via_skill_trigger",
    "created_at",
    "superseded",
    "rating",
    "annotations",
    "explain",
]
_WORD = re.compile(r"\w+")


@pytest.fixture
def corpus(member: Agent, save) -> dict[str, dict[str, Any]]:  # type: ignore[no-untyped-def]
    """Five entries with nothing in common, by key: the saved bodies."""
    return {
        "deploy-friday": save(member, "deploy-friday", FRIDAY, type="lesson"),
        "db-host": save(member, "db-host", DB_HOST, type="reference"),
        "lunch": save(member, "lunch", "The team orders pizza on Wednesdays from the place on Elm Street."),
        "brewing": save(
            member, "brewing", "Ada's hobby is zymurgy; she brews a porter every winter.", type="identity"
        ),
        "ci-cache": save(
            member, "ci-cache", "CI caches pip wheels keyed by the hash of pyproject.toml.", type="decision"
        ),
    }


def keys(body: dict[str, Any]) -> list[str]:
    return [r["key"] for r in body["results"]]


def jaccard(a: str, b: str) -> float:
    """Jaccard similarity of the lowercase word sets, as the diversification step counts it."""
    words_a, words_b = set(_WORD.findall(a.lower())), set(_WORD.findall(b.lower()))
    return len(words_a & words_b) / len(words_a | words_b)


def test_saved_memory_is_indexed_with_chunks_and_vectors(
    corpus: dict[str, dict[str, Any]], member: Agent
) -> None:
    response = member.client.get(member.url("memories/deploy-friday/"))

    assert response.json()["index_state"] == "indexed"
    with team_scope(member.team.id):
        chunks = Chunk.objects.filter(memory__key="deploy-friday")
        assert [c.text for c in chunks] == [FRIDAY]
        assert (
            ChunkEmbedding.objects.filter(chunk__in=chunks, model="all-MiniLM-L6-v2-onnx-int8").count() == 1
        )


def test_each_result_carries_its_fields_with_real_values(
    corpus: dict[str, dict[str, Any]], member: Agent
) -> None:
    # min_score 0 replaces the default relevance floor (tests/search/test_relevance_floor.py),
    # so the unrelated entries come back too and their fields can be checked.
    body = search(member, "staging database port", explain=True, min_score=0.0)

    assert body["search_mode"] == "hybrid"
    assert body["warnings"] == []
    # Five entries, five results: the vector path ranks every entry of the team.
    assert len(body["results"]) == 5
    assert set(keys(body)) == CORPUS_KEYS
    top = body["results"][0]
    assert list(top) == RESULT_FIELDS
    saved = corpus["db-host"]
    assert {name: top[name] for name in ("id", "key", "type", "is_active", "created_at", "rating")} == {
        name: saved[name] for name in ("id", "key", "type", "is_active", "created_at", "rating")
    }
    assert top["snippet"] == DB_HOST
    assert top["source"] == "keyword+vector"
    assert top["via_skill_trigger"] is False
    assert top["annotations"] == []
    parts = top["explain"]
    assert parts["keyword"] == 1.0  # the best (and only) keyword match of the query
    assert 0.5 < parts["vector"] <= 1.0
    assert parts["decay"] == pytest.approx(1.0, abs=1e-4)  # saved seconds ago
    assert parts["rating"] == 1.0
    assert parts["mmr"] == pytest.approx(0.7 * top["score"], abs=1e-5)  # nothing above it
    for result in body["results"]:
        parts = result["explain"]
        assert 0.0 <= result["score"] <= 1.0
        assert all(0.0 <= parts[name] <= 1.0 for name in ("vector", "keyword", "merged", "decay"))
        assert result["score"] == pytest.approx(parts["merged"] * parts["decay"] * parts["rating"], abs=1e-5)
    for result in body["results"][1:]:  # none of the other entries has a word of the query
        assert (result["source"], result["explain"]["keyword"]) == ("vector", 0.0)
        assert result["score"] < top["score"]


def test_explain_shows_the_bonus_of_a_name_in_the_query(
    corpus: dict[str, dict[str, Any]], member: Agent
) -> None:
    body = search(member, "what does Ada brew in winter", explain=True)

    by_key = {r["key"]: r for r in body["results"]}
    brewing = by_key["brewing"]
    assert body["results"][0]["key"] == "brewing"
    assert brewing["explain"]["entity"] == 0.05  # "Ada" in "Ada's hobby is zymurgy"
    assert brewing["score"] == pytest.approx(
        (brewing["explain"]["merged"] + 0.05) * brewing["explain"]["decay"] * brewing["explain"]["rating"],
        abs=1e-5,
    )
    assert all(r["explain"]["entity"] == 0.0 for key, r in by_key.items() if key != "brewing")


def test_paraphrase_is_found_by_the_vector_path(corpus: dict[str, dict[str, Any]], member: Agent) -> None:
    body = search(member, PARAPHRASE, explain=True)

    assert body["search_mode"] == "hybrid"
    top = body["results"][0]
    assert top["key"] == "deploy-friday"
    # No word of the query is in the memory: only the vector path can have found it.
    assert top["explain"]["keyword"] == 0
    assert top["explain"]["vector"] > 0.3
    assert top["source"] == "vector"


def test_rare_word_is_found_by_the_keyword_path(corpus: dict[str, dict[str, Any]], member: Agent) -> None:
    body = search(member, "zymurgy", explain=True)

    top = body["results"][0]
    assert top["key"] == "brewing"
    assert "keyword" in top["source"]
    assert top["explain"]["keyword"] == 1.0
    assert "zymurgy" in top["snippet"]


def test_keyword_and_vector_modes_run_one_path(corpus: dict[str, dict[str, Any]], member: Agent) -> None:
    paraphrase = search(member, PARAPHRASE, mode="keyword")
    keyword = search(member, "zymurgy", mode="keyword", explain=True)
    vector = search(member, "zymurgy", mode="vector", explain=True)

    assert paraphrase["search_mode"] == "keyword"
    assert "deploy-friday" not in keys(paraphrase)  # no word in common: only vectors find it
    assert keyword["search_mode"] == "keyword"
    assert keys(keyword) == ["brewing"]
    [found] = keyword["results"]
    assert (found["source"], found["explain"]["vector"], found["score"]) == ("keyword", 0.0, 1.0)
    assert vector["search_mode"] == "vector"
    assert set(keys(vector)) == CORPUS_KEYS
    assert keys(vector)[0] == "brewing"
    assert all(r["explain"]["keyword"] == 0 and r["source"] == "vector" for r in vector["results"])


def test_merged_score_is_the_relative_weighted_sum_times_evidence_times_decay(
    corpus: dict[str, dict[str, Any]], member: Agent
) -> None:
    # min_score 0 in place of the default floor: every entry of the team comes back.
    body = search(member, "staging database port", explain=True, max_results=5, min_score=0.0)

    assert len(body["results"]) == 5
    parts = [result["explain"] for result in body["results"]]
    [evidence] = {p["evidence"] for p in parts}  # one value per query
    assert evidence == pytest.approx(max(0.7 * p["vector"] + 0.3 * p["keyword"] for p in parts), abs=1e-5)
    for result, p in zip(body["results"], parts, strict=True):
        assert p["merged"] == pytest.approx(
            (0.7 * p["vector_relative"] + 0.3 * p["keyword"]) * evidence, abs=1e-5
        )
        assert result["score"] == pytest.approx(p["merged"] * p["decay"], abs=1e-5)
    # The highest cosine of the query is 1 on the relative scale; lower ones are below it.
    best_vector = max(p["vector"] for p in parts)
    assert all((p["vector_relative"] == 1.0) == (p["vector"] == best_vector) for p in parts)
    assert body["results"][0]["key"] == "db-host"


def test_single_modes_explain_no_relative_parts(corpus: dict[str, dict[str, Any]], member: Agent) -> None:
    for mode in ("vector", "keyword"):
        parts = search(member, "staging database port", explain=True, mode=mode)["results"][0]["explain"]

        assert "vector_relative" not in parts and "evidence" not in parts
        assert parts["merged"] == parts[mode]


def test_team_weights_change_the_merge(corpus: dict[str, dict[str, Any]], member: Agent) -> None:
    member.team.hybrid_vector_weight, member.team.hybrid_keyword_weight = 0.2, 0.8
    member.team.save()

    results = search(member, "staging database port", explain=True, max_results=5)["results"]

    for p in (result["explain"] for result in results):
        assert p["merged"] == pytest.approx(
            (0.2 * p["vector_relative"] + 0.8 * p["keyword"]) * p["evidence"], abs=1e-5
        )
        assert p["evidence"] == pytest.approx(
            max(0.2 * r["explain"]["vector"] + 0.8 * r["explain"]["keyword"] for r in results), abs=1e-5
        )


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

    contents = {f"checklist-{n}": base + end for n, end in enumerate([".", " channel.", " today."], start=1)}
    contents["rollback"] = (
        "To roll back a bad release, redeploy the previous tag and restore the release notes."
    )

    results = search(member, "release checklist tag", max_results=4, explain=True)["results"]

    order = [r["key"] for r in results]
    assert order[0].startswith("checklist-")
    assert order[1] == "rollback"
    assert sorted(order[2:]) == sorted(set(contents) - {order[0], "rollback"})
    # Not the order of the scores: the rollback entry scores below the checklists
    # it passed, which are near-duplicates of the first result.
    assert results[1]["score"] < min(results[2]["score"], results[3]["score"])
    for position, result in enumerate(results):
        redundancy = max(
            (jaccard(contents[result["key"]], contents[above["key"]]) for above in results[:position]),
            default=0.0,
        )
        assert result["explain"]["mmr"] == pytest.approx(0.7 * result["score"] - 0.3 * redundancy, abs=1e-5)


def test_superseded_entries_are_found_when_asked_and_point_to_their_successor(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    save(member, "vpn", "The VPN gateway is vpn-old.example.org.")
    new = save(
        member, "vpn", "The VPN gateway moved to vpn-new.example.org.", supersede_reason="gateway moved"
    )

    results = search(member, "VPN gateway", max_results=5, include_superseded=True)["results"]
    by_active = {r["is_active"]: r for r in results}

    assert by_active[True]["id"] == new["id"]
    assert by_active[True]["superseded"] is False
    old = by_active[False]
    assert old["superseded"] is True
    assert old["superseded_by"] == {
        "id": new["id"],
        "key": "vpn",
        "reason": "gateway moved",
        "kind": "hard",
        "is_active": True,
    }
    only_active = search(member, "VPN gateway")["results"]
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
    save(member, "printer", "The office printer is on the second floor, next to the helpdesk.")

    for mode in ("hybrid", "keyword", "vector"):
        body = search(member, "office wifi Quentin helpdesk", mode=mode, max_results=10)
        assert keys(body) == ["printer"], mode


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


def test_min_score_and_max_results(corpus: dict[str, dict[str, Any]], member: Agent) -> None:
    everything = search(member, "database deploy pizza brewing cache", max_results=50)["results"]
    assert len(everything) == 5
    assert len(search(member, "database deploy pizza brewing cache", max_results=2)["results"]) == 2

    # Between the third and the second lowest: decay moves scores by 1e-6 between requests.
    lowest = sorted(r["score"] for r in everything)
    floor = (lowest[1] + lowest[2]) / 2
    kept = search(member, "database deploy pizza brewing cache", max_results=50, min_score=floor)["results"]
    assert len(kept) == 3 and all(r["score"] >= floor for r in kept)


def test_read_scope_may_search(corpus: dict[str, dict[str, Any]], readonly_member: Agent) -> None:
    assert search(readonly_member, "zymurgy")["results"][0]["key"] == "brewing"


def test_other_team_never_sees_this_teams_memories(
    corpus: dict[str, dict[str, Any]], outsider: Agent, save
) -> None:  # type: ignore[no-untyped-def]
    save(outsider, "bravo-note", "Bravo keeps its own notes about deploys.")

    for mode in ("hybrid", "keyword", "vector"):
        response = outsider.client.post(
            outsider.url("search/"), {"query": f"{FRIDAY} zymurgy staging", "mode": mode}, format="json"
        )
        assert response.status_code == 200
        assert keys(response.json()) == ["bravo-note"]  # its own entry ("deploys"), nothing else
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


def test_queries_with_tsquery_syntax_are_plain_words(
    corpus: dict[str, dict[str, Any]], member: Agent
) -> None:
    # Operators are not operators: "!" does not negate, ":*" is no prefix match.
    for query in ["zymurgy & | ! ( ) : * '", "!zymurgy", "'zymurgy'", "zymurgy <-> porter"]:
        assert keys(search(member, query, mode="keyword")) == ["brewing"], query
    # "zymu" is too short a part of zymurgy for trigrams to stand in (search.retrieval.trigrams).
    for query in ["zymu:*", "\\", "'''", "a:* <-> b", "&&&"]:
        assert keys(search(member, query, mode="keyword")) == [], query
        # No word to match and nothing near in meaning: the relevance floor leaves
        # nothing; asked with min_score 0, the vector path still ranks every entry.
        assert keys(search(member, query)) == [], query
        assert set(keys(search(member, query, min_score=0.0))) == CORPUS_KEYS, query


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
