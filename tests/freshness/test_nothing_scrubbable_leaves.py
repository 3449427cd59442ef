"""Nothing the credential scrubber would redact reaches a draft, a nudge, the injected
block or a search result, whatever was stored: one test per surface, each with the
sentence a session-end hook once turned into a draft lesson.

Saves scrub their text, so the entries here are stored raw (as text saved before a
scrubber rule existed would be): what these tests hold is that each surface scrubs on
the way out, not only the save on the way in."""

from __future__ import annotations

from freshness.models import Draft, Nudge, NudgeKind
from memories.models import Memory
from search.services import index_memory
from teams.models import Team
from teams.scope import team_scope
from tests.conftest import Agent, operator_view, search

SENTENCE = "Note the staging database password is hunter2hunter2"
SECRET = "hunter2hunter2"


def stored_raw(team: Team, key: str, content: str, type_name: str = "lesson") -> Memory:
    """An entry written as it was given, without the save's scrub, then indexed (and,
    as after any indexing, judged against its neighbours for contradictions)."""
    with team_scope(team.id):
        memory = Memory.objects.create(
            team=team, key=key, content=content, type=type_name, content_hash=Memory.hash_content(content)
        )
    assert index_memory(team_id=team.id, memory_id=memory.id) == "indexed"
    return memory


def test_a_transcript_naming_a_password_drafts_it_redacted(member: Agent) -> None:
    transcript = f"user: Lesson learned: {SENTENCE}.\nassistant: Noted."

    response = member.client.post(member.url("drafts/extract/"), {"transcript": transcript}, format="json")

    assert response.status_code == 201, response.content
    assert SECRET not in response.content.decode()
    with operator_view():
        rows = list(
            Draft.objects.filter(team=member.team).values_list("key", "content", "why", "source_excerpt")
        )
    assert [row[1].lower() for row in rows] == [
        "note the staging database password is [redacted:password_in_prose]."
    ]
    assert not any(SECRET in field for row in rows for field in row)


def test_a_lesson_beside_a_password_is_drafted_without_it(member: Agent) -> None:
    transcript = (
        "user: Lesson learned: always warm the cache before the deploy, or latency spikes for an hour.\n"
        f"assistant: Done. {SENTENCE}."
    )

    response = member.client.post(member.url("drafts/extract/"), {"transcript": transcript}, format="json")

    assert response.status_code == 201, response.content
    assert response.json()["drafts"], "the lesson is drafted"
    with operator_view():
        rows = list(
            Draft.objects.filter(team=member.team).values_list("key", "content", "why", "source_excerpt")
        )
    assert rows and not any(SECRET in field for row in rows for field in row)


def test_a_contradiction_nudge_never_quotes_a_credential(member: Agent) -> None:
    team = member.team
    older = stored_raw(team, "staging-db", f"We use Postgres 14 for staging. {SENTENCE}.", "context")
    stored_raw(team, "staging-db-now", f"We use Postgres 16 for staging. {SENTENCE}.", "context")

    with operator_view():
        (nudge,) = Nudge.objects.filter(team=team, kind=NudgeKind.CONTRADICTION)
    assert nudge.other_memory_id == older.id
    assert SECRET not in nudge.message and "[REDACTED:" in nudge.message
    listed = member.client.get(member.url("nudges/")).content.decode()
    assert SECRET not in listed


def test_the_injected_block_never_carries_a_credential(member: Agent) -> None:
    stored_raw(member.team, "staging-db-password", SENTENCE)

    body = member.client.get(member.url("injection/"), {"format": "json"}).json()

    assert "staging-db-password" in body["text"]
    assert SECRET not in body["text"] and "[REDACTED:" in body["text"]


def test_search_results_never_carry_a_credential(member: Agent) -> None:
    stored_raw(member.team, "staging-db-password", SENTENCE)

    body = search(member, "staging database password")

    (result,) = [r for r in body["results"] if r["key"] == "staging-db-password"]
    assert SECRET not in result["snippet"] and "[REDACTED:" in result["snippet"]
