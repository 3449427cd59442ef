"""Quality signals: access counts (one UPDATE per request, updated_at untouched), ratings
(net score, a small documented boost in search) and annotations (scrubbed notes shown
with the entry, in search and through annotations_for)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memories import feedback, selectors
from memories.models import Annotation, Memory
from teams import services as team_services
from teams.scope import team_scope
from tests.conftest import Agent, operator_view, search


def rate(agent: Agent, key: str, direction: Any) -> Any:
    return agent.client.post(agent.url(f"memories/{key}/rate/"), {"direction": direction}, format="json")


def annotate(agent: Agent, key: str, note: Any) -> Any:
    return agent.client.post(agent.url(f"memories/{key}/annotations/"), {"note": note}, format="json")


def memory_updates(captured: CaptureQueriesContext) -> list[str]:
    return [
        # A GET of a key counts it inside the statement that reads it (memories.entry_read).
        q["sql"]
        for q in captured.captured_queries
        if "UPDATE memories_memory SET access_count" in " ".join(q["sql"].split())
    ]


def row(memory_id: str) -> Memory:
    with operator_view():
        return Memory.objects.get(id=memory_id)


# --- access counts ---------------------------------------------------------------------


def test_get_of_a_key_counts_one_access_in_one_statement_without_moving_updated_at(
    member: Agent, save
) -> None:  # type: ignore[no-untyped-def]
    saved = save(member, "k", "Counted.")
    updated_at = row(saved["id"]).updated_at

    with CaptureQueriesContext(connection) as captured:
        first = member.client.get(member.url("memories/k/"))
    # Read now: the next request resets the connection's query log.
    updates = memory_updates(captured)
    second = member.client.get(member.url("memories/k/"))

    assert len(updates) == 1
    assert first.json()["access_count"] == 1
    assert second.json()["access_count"] == 2
    memory = row(saved["id"])
    assert memory.access_count == 2
    assert memory.last_accessed_at is not None
    assert second.json()["last_accessed_at"] == memory.last_accessed_at.isoformat().replace("+00:00", "Z")
    assert memory.updated_at == updated_at
    assert second.json()["updated_at"] == saved["updated_at"]


def test_read_only_tokens_count_accesses_too(readonly_member: Agent, member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    saved = save(member, "k", "Counted.")

    assert readonly_member.client.get(readonly_member.url("memories/k/")).status_code == 200

    assert row(saved["id"]).access_count == 1


def test_search_counts_every_result_in_one_statement(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    ids = [
        save(member, f"note-{n}", f"The kettle number {n} is in the kitchen.", allow_duplicate=True)["id"]
        for n in range(4)
    ]
    save(member, "other", "Unrelated: the printer is on the second floor.")
    before = {i: row(i).updated_at for i in ids}

    with CaptureQueriesContext(connection) as captured:
        body = search(member, "kettle kitchen", mode="keyword", max_results=10)

    returned = {r["id"] for r in body["results"]}
    assert returned == set(ids)
    assert len(memory_updates(captured)) == 1
    with operator_view():
        counts = dict(Memory.objects.filter(team=member.team).values_list("key", "access_count"))
    assert counts == {"note-0": 1, "note-1": 1, "note-2": 1, "note-3": 1, "other": 0}
    assert all(row(i).updated_at == before[i] for i in ids)


def test_a_search_with_no_results_writes_nothing(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    save(member, "k", "Something else entirely.")

    with CaptureQueriesContext(connection) as captured:
        assert search(member, "zymurgy", mode="keyword")["results"] == []

    assert memory_updates(captured) == []


def test_lists_and_history_are_browsing_not_accesses(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    saved = save(member, "k", "Not counted.")

    member.client.get(member.url("memories/"))
    member.client.get(member.url("memories/k/history/"))

    assert row(saved["id"]).access_count == 0


# --- ratings ---------------------------------------------------------------------------


def test_rating_up_and_down_gives_a_net_score_without_moving_updated_at(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    saved = save(member, "k", "Rated.")

    for direction in ("up", "up", "up", "down"):
        response = rate(member, "k", direction)
        assert response.status_code == 200, response.content

    body = response.json()
    assert (body["upvotes"], body["downvotes"], body["rating"]) == (3, 1, 2)
    assert body["updated_at"] == saved["updated_at"]
    assert member.client.get(member.url("memories/k/")).json()["rating"] == 2
    memory = row(saved["id"])
    assert (memory.upvotes, memory.downvotes, memory.updated_at.isoformat().replace("+00:00", "Z")) == (
        3,
        1,
        saved["updated_at"],
    )


def test_rating_belongs_to_the_version(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    old = save(member, "k", "One.")
    rate(member, "k", "up")

    new = save(member, "k", "Two.", supersede_reason="changed")

    assert new["rating"] == 0
    assert row(old["id"]).upvotes == 1


@pytest.mark.parametrize("body", [{}, {"direction": "sideways"}, {"direction": 1}, {"direction": None}])
def test_bad_rating_answers_400(member: Agent, save, body: dict[str, Any]) -> None:  # type: ignore[no-untyped-def]
    saved = save(member, "k", "Rated.")

    response = member.client.post(member.url("memories/k/rate/"), body, format="json")

    assert response.status_code == 400
    assert "direction" in response.json()["fields"]
    assert row(saved["id"]).upvotes == row(saved["id"]).downvotes == 0


def test_rating_a_deleted_or_unknown_key_answers_404(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    saved = save(member, "gone", "Soon deleted.")
    member.client.delete(member.url("memories/gone/"))

    assert rate(member, "gone", "up").status_code == 404
    assert rate(member, "never", "up").status_code == 404
    assert row(saved["id"]).upvotes == 0


def test_rating_needs_the_write_scope(readonly_member: Agent, member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    saved = save(member, "k", "Rated.")

    assert rate(readonly_member, "k", "up").status_code == 403
    assert row(saved["id"]).upvotes == 0


def test_rating_boost_is_shown_in_explain_and_reorders_equal_matches(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    text = "The coffee machine on the third floor needs descaling every month."
    a = save(member, "coffee-a", text)
    b = save(member, "coffee-b", text, allow_duplicate=True)
    query = {"mode": "keyword", "explain": True, "max_results": 2}

    unrated = search(member, "coffee machine descaling", **query)["results"]
    assert unrated[0]["score"] == unrated[1]["score"]
    assert all(r["explain"]["rating"] == 1.0 and r["rating"] == 0 for r in unrated)
    loser = unrated[0]["key"]
    winner = "coffee-b" if loser == "coffee-a" else "coffee-a"
    for _ in range(7):  # past the cap of 5
        rate(member, winner, "up")
    rate(member, loser, "down")

    rated = {r["key"]: r for r in search(member, "coffee machine descaling", **query)["results"]}

    assert next(iter(rated)) == winner
    assert rated[winner]["rating"] == 7
    assert rated[winner]["explain"]["rating"] == pytest.approx(1.25)
    assert rated[loser]["rating"] == -1
    assert rated[loser]["explain"]["rating"] == pytest.approx(0.95)
    for result in rated.values():
        parts = result["explain"]
        assert result["score"] == pytest.approx(parts["merged"] * parts["decay"] * parts["rating"], abs=1e-5)
    assert {a["id"], b["id"]} == {r["id"] for r in rated.values()}


# --- annotations -------------------------------------------------------------------------


def test_annotation_is_stored_and_shown_with_the_entry(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    saved = save(member, "k", "Annotated.")

    first = annotate(member, "k", "Checked against the runbook.")
    second = annotate(member, "k", "  Still true in March.  ")

    assert first.status_code == 201, first.content
    body = second.json()
    assert body["note"] == "Still true in March."
    assert body["created_by"] == "writer-bot"
    assert body["memory_id"] == saved["id"]
    assert body["redactions"] == []
    shown = member.client.get(member.url("memories/k/")).json()["annotations"]
    assert [n["note"] for n in shown] == ["Still true in March.", "Checked against the runbook."]
    assert set(shown[0]) == {"id", "memory_id", "note", "created_by", "created_at"}
    with operator_view():
        assert Annotation.objects.filter(memory_id=saved["id"]).count() == 2


def test_annotation_is_scrubbed_of_credentials_and_vault_secrets(
    member: Agent, admin_member: Agent, save
) -> None:  # type: ignore[no-untyped-def]
    admin_member.client.put(
        admin_member.url("vault/db-pass/"),
        {"value": "hunter2-correct-horse", "is_secret": True},
        format="json",
    )
    save(member, "k", "The database.")

    response = annotate(member, "k", "Login with hunter2-correct-horse or ghp_" + "a" * 36)

    assert response.status_code == 201
    body = response.json()
    assert "hunter2" not in body["note"] and "ghp_" not in body["note"]
    assert {r["kind"] for r in body["redactions"]} == {"vault_secret", "github_token"}
    with operator_view():
        stored = Annotation.objects.get().note
    assert "hunter2" not in stored and "ghp_" not in stored
    assert "[REDACTED:vault_secret]" in stored


def test_annotations_carry_across_versions_and_say_which_version(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    old = save(member, "k", "One.")
    annotate(member, "k", "Written on one.")
    new = save(member, "k", "Two.", supersede_reason="changed")
    annotate(member, "k", "Written on two.")

    shown = member.client.get(member.url("memories/k/")).json()["annotations"]
    old_version = member.client.get(member.url(f"memories/k/versions/{old['id']}/")).json()["annotations"]

    assert [(n["note"], n["memory_id"]) for n in shown] == [
        ("Written on two.", new["id"]),
        ("Written on one.", old["id"]),
    ]
    assert old_version == shown


def test_as_of_shows_only_the_notes_written_by_then(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    save(member, "k", "One.")
    first = annotate(member, "k", "Early note.").json()
    annotate(member, "k", "Late note.")

    then = member.client.get(member.url("memories/k/"), {"as_of": first["created_at"]}).json()

    assert [n["note"] for n in then["annotations"]] == ["Early note."]


def test_annotations_appear_in_search_results_fetched_in_one_query(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    for n in range(3):
        save(member, f"kettle-{n}", f"Kettle {n} is in the kitchen.")
        annotate(member, f"kettle-{n}", f"Note on kettle {n}.")

    with CaptureQueriesContext(connection) as captured:
        results = search(member, "kettle kitchen", mode="keyword", max_results=10)["results"]

    assert {r["key"]: [n["note"] for n in r["annotations"]] for r in results} == {
        f"kettle-{n}": [f"Note on kettle {n}."] for n in range(3)
    }
    assert len([q for q in captured.captured_queries if "memories_annotation" in q["sql"]]) == 1


def test_annotation_list_pages_every_note_of_the_key(member: Agent, readonly_member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    save(member, "k", "One.")
    for n in range(selectors.MAX_ANNOTATIONS_SHOWN + 3):
        annotate(member, "k", f"note {n}")

    shown = member.client.get(member.url("memories/k/")).json()["annotations"]
    page = readonly_member.client.get(readonly_member.url("memories/k/annotations/"), {"limit": 20}).json()
    rest = readonly_member.client.get(page["next"]).json()

    assert len(shown) == selectors.MAX_ANNOTATIONS_SHOWN
    assert shown[0]["note"] == f"note {selectors.MAX_ANNOTATIONS_SHOWN + 2}"
    notes = [n["note"] for n in page["results"] + rest["results"]]
    assert notes == [f"note {n}" for n in reversed(range(selectors.MAX_ANNOTATIONS_SHOWN + 3))]
    assert rest["next"] is None


@pytest.mark.parametrize("note", ["", "   ", None, 7, "x" * 2001])
def test_bad_note_answers_400(member: Agent, save, note: Any) -> None:  # type: ignore[no-untyped-def]
    save(member, "k", "One.")

    response = annotate(member, "k", note)

    assert response.status_code == 400
    assert "note" in response.json()["fields"]
    with operator_view():
        assert not Annotation.objects.exists()


def test_annotating_needs_write_and_an_active_entry(member: Agent, readonly_member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    save(member, "gone", "Soon deleted.")
    member.client.delete(member.url("memories/gone/"))

    assert annotate(readonly_member, "gone", "hi").status_code == 403
    assert annotate(member, "gone", "hi").status_code == 404
    assert annotate(member, "never", "hi").status_code == 404
    assert member.client.get(member.url("memories/never/annotations/")).status_code == 404
    assert member.client.get(member.url("memories/gone/annotations/")).json()["results"] == []
    with operator_view():
        assert not Annotation.objects.exists()


def test_annotations_for_answers_every_id_in_one_query(member: Agent, save) -> None:  # type: ignore[no-untyped-def]
    a = save(member, "a", "A.")
    annotate(member, "a", "on a v1")
    a2 = save(member, "a", "A2.", supersede_reason="r")
    b = save(member, "b", "B.")
    unknown = uuid.uuid4()

    with team_scope(member.team.id), CaptureQueriesContext(connection) as captured:
        notes = selectors.annotations_for(
            member.team.id, [uuid.UUID(a["id"]), uuid.UUID(a2["id"]), uuid.UUID(b["id"]), unknown]
        )

    assert len(captured.captured_queries) == 1
    assert [n.note for n in notes[uuid.UUID(a["id"])]] == ["on a v1"]
    assert [n.note for n in notes[uuid.UUID(a2["id"])]] == ["on a v1"]
    assert notes[uuid.UUID(b["id"])] == [] and notes[unknown] == []


def test_annotations_table_is_under_row_level_security(member: Agent, outsider: Agent, save) -> None:  # type: ignore[no-untyped-def]
    save(member, "k", "Alpha's.")
    annotate(member, "k", "alpha-only note")
    save(outsider, "k", "Bravo's.")
    annotate(outsider, "k", "bravo-only note")

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relrowsecurity, relforcerowsecurity FROM pg_class WHERE relname = 'memories_annotation'"
        )
        assert cursor.fetchone() == (True, True)
    with team_scope(outsider.team.id), connection.cursor() as cursor:
        cursor.execute("SELECT note FROM memories_annotation")
        assert [r[0] for r in cursor.fetchall()] == ["bravo-only note"]


def test_shutdown_team_deletes_its_annotations_and_no_other(member: Agent, outsider: Agent, save) -> None:  # type: ignore[no-untyped-def]
    for agent in (member, outsider):
        save(agent, "k", "One.")
        annotate(agent, "k", "note")
        save(agent, "k", "Two.", supersede_reason="r")
        annotate(agent, "k", "note on two")

    counts = team_services.shutdown_team(team=member.team, actor="test")

    assert counts["annotations"] == 2
    with operator_view():
        assert not Annotation.objects.filter(team_id=member.team.id).exists()
        assert Annotation.objects.filter(team=outsider.team).count() == 2


# --- isolation -----------------------------------------------------------------------------


def test_other_team_can_neither_rate_nor_annotate_nor_see_notes(member: Agent, outsider: Agent, save) -> None:  # type: ignore[no-untyped-def]
    saved = save(member, "alpha-plan", "Launch on the ninth.")
    annotate(member, "alpha-plan", "alpha-secret-note")
    save(outsider, "bravo-note", "Launch notes of bravo.")

    responses = [
        rate(outsider, "alpha-plan", "down"),
        annotate(outsider, "alpha-plan", "x"),
        outsider.client.get(outsider.url("memories/alpha-plan/annotations/")),
        outsider.client.post(member.url("memories/alpha-plan/rate/"), {"direction": "down"}, format="json"),
        outsider.client.post(member.url("memories/alpha-plan/annotations/"), {"note": "x"}, format="json"),
        outsider.client.get(member.url("memories/alpha-plan/annotations/")),
    ]
    found = outsider.client.post(outsider.url("search/"), {"query": "launch ninth notes"}, format="json")

    for response in responses:
        assert response.status_code == 404
        assert b"alpha" not in response.content and b"ninth" not in response.content
    assert found.status_code == 200
    assert b"alpha" not in found.content
    memory = row(saved["id"])
    assert (memory.downvotes, memory.access_count) == (0, 0)
    with operator_view():
        assert list(Annotation.objects.values_list("note", flat=True)) == ["alpha-secret-note"]


def test_record_access_ignores_ids_of_another_team(member: Agent, outsider: Agent, save) -> None:  # type: ignore[no-untyped-def]
    alpha = save(member, "k", "Alpha's.")

    with team_scope(outsider.team.id):
        feedback.record_access(team=outsider.team, memory_ids=[uuid.UUID(alpha["id"])])

    assert row(alpha["id"]).access_count == 0
