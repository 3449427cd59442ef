"""POST memories/batch/ saves up to 500 entries with the rules of a
single save, one result per entry in order, partial success stored and reported; the
request embeds nothing (its near-duplicate check runs after indexing:
test_batch_deferred_dedup.py); the stored versions go to indexing in batches; team
isolation, scopes, quotas and bad input as everywhere."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

from memories.models import Memory
from search import hooks as search_hooks
from search.embeddings.profiles import provider_for, reset_providers
from search.hooks import IndexedEntry
from search.models import ChunkEmbedding
from teams.scope import team_scope
from tests.conftest import Agent, operator_view, search
from tests.search.conftest import free_port
from tests.search.embedding_server import API_KEY, EmbeddingServer

STATUSES = {"created", "superseded", "unchanged", "duplicate", "error"}


def post_batch(agent: Agent, entries: Any, team: str | None = None, **extra: Any) -> Any:
    return agent.client.post(
        agent.url("memories/batch/", team=team), {"entries": entries}, format="json", **extra
    )


def active(agent: Agent) -> dict[str, str]:
    with operator_view():
        return dict(
            Memory.objects.filter(team=agent.team, is_active=True)
            .values_list("key", "content")
            .order_by("key")
        )


def versions(agent: Agent) -> int:
    with operator_view():
        return Memory.objects.filter(team=agent.team).count()


def assert_error_shape(body: dict[str, Any]) -> None:
    assert isinstance(body["error"], str) and body["error"]
    assert isinstance(body["detail"], str) and body["detail"]


def test_a_mixed_batch_reports_every_entry_in_order_and_stores_the_good_ones(
    member: Agent, save: Any
) -> None:
    save(member, "db-port", "The database listens on port 5432.")
    save(member, "ci", "CI runs on every push.")
    save(member, "holder", "Deploys happen on Tuesdays after the standup.")
    save(member, "taken", "The taken key has an entry already.")
    entries = [
        {"key": "new-one", "content": "A brand new memory about caching.", "type": "decision"},
        {"key": "db-port", "content": "The database listens on port 6432.", "supersede_reason": "moved"},
        {"key": "ci", "content": "CI runs on every push."},
        {"key": "copy", "content": "Deploys happen on Tuesdays after the standup."},
        {"key": "bad-type", "content": "Some text.", "type": "nonsense"},
        {"key": "taken", "content": "Another text for a taken key."},
        {"content": "no key"},
        {"key": "zz-last", "content": "The last entry is stored too."},
    ]

    response = post_batch(member, entries)

    assert response.status_code == 200, response.content
    body = response.json()
    results = body["results"]
    assert [r["index"] for r in results] == list(range(len(entries)))
    assert [r["key"] for r in results] == [e.get("key", "") for e in entries]
    assert [r["status"] for r in results] == [
        "created",
        "superseded",
        "unchanged",
        "duplicate",
        "error",
        "error",
        "error",
        "created",
    ]
    assert body["counts"] == {"created": 2, "superseded": 1, "unchanged": 1, "duplicate": 1, "error": 3}
    assert results[3]["duplicate_of"]["key"] == "holder"
    assert results[3]["duplicate_of"]["matched_by"] == "content_hash"
    assert results[4]["error"]["error"] == "unknown_type" and "type" in results[4]["error"]["fields"]
    assert results[5]["error"]["error"] == "conflict"
    assert results[5]["error"]["current"]["key"] == "taken"
    assert results[6]["error"]["error"] == "invalid" and "key" in results[6]["error"]["fields"]
    for result in results:
        assert set(result) <= {
            "index",
            "key",
            "status",
            "id",
            "error",
            "duplicate_of",
            "replaced_duplicate",
            "redactions",
        }
        if result["status"] == "error":
            assert_error_shape(result["error"])
            assert "id" not in result
    stored = active(member)
    assert stored["new-one"] == "A brand new memory about caching."
    assert stored["db-port"] == "The database listens on port 6432."
    assert stored["zz-last"] == "The last entry is stored too."
    assert stored["taken"] == "The taken key has an entry already."
    assert "copy" not in stored and "bad-type" not in stored
    with operator_view():
        assert str(Memory.objects.get(team=member.team, key="new-one").id) == results[0]["id"]
        assert Memory.objects.get(team=member.team, key="new-one").type == "decision"
        assert Memory.objects.get(team=member.team, key="ci", is_active=True).id.hex == results[2][
            "id"
        ].replace("-", "")


def test_sending_a_batch_again_changes_nothing(member: Agent) -> None:
    entries = [
        {"key": "a", "content": "First memory of the batch.", "project": "web", "metadata": {"tags": ["x"]}},
        {"key": "b", "content": "Second memory, superseding nothing.", "supersede_reason": "first write"},
    ]
    first = post_batch(member, entries)
    count = versions(member)

    again = post_batch(member, entries)

    assert [r["status"] for r in first.json()["results"]] == ["created", "created"]
    assert [r["status"] for r in again.json()["results"]] == ["unchanged", "unchanged"]
    assert [r["id"] for r in again.json()["results"]] == [r["id"] for r in first.json()["results"]]
    assert versions(member) == count


def test_an_entry_that_changes_anything_is_not_unchanged(member: Agent) -> None:
    post_batch(member, [{"key": "a", "content": "Same text.", "project": "web"}])

    response = post_batch(
        member, [{"key": "a", "content": "Same text.", "project": "api", "supersede_reason": "move"}]
    )

    assert response.json()["results"][0]["status"] == "superseded"
    with operator_view():
        assert Memory.objects.get(team=member.team, key="a", is_active=True).project == "api"


def test_a_key_named_twice_is_an_error_of_its_second_entry(member: Agent) -> None:
    response = post_batch(
        member,
        [
            {"key": "twice", "content": "The first text."},
            {"key": "other", "content": "Something else."},
            {"key": "twice", "content": "The second text.", "supersede_reason": "again"},
        ],
    )

    results = response.json()["results"]
    assert [r["status"] for r in results] == ["created", "created", "error"]
    assert results[2]["error"]["error"] == "duplicate_key_in_batch"
    assert "entry 0" in results[2]["error"]["detail"]
    assert active(member)["twice"] == "The first text."


def test_the_same_text_twice_in_one_batch_is_saved_once(member: Agent) -> None:
    response = post_batch(
        member,
        [
            {"key": "b-copy", "content": "Shared text here."},
            {"key": "a-orig", "content": "Shared text here."},
        ],
    )

    results = response.json()["results"]
    # Entries are stored in key order: a-orig first, b-copy is its duplicate.
    assert [r["status"] for r in results] == ["duplicate", "created"]
    assert results[0]["duplicate_of"]["key"] == "a-orig"
    assert set(active(member)) == {"a-orig"}


def test_a_failing_entry_leaves_the_entries_around_it_stored(member: Agent, save: Any) -> None:
    saved = save(member, "b-key", "Version one of b.")
    save(member, "b-key", "Version two of b.", supersede_reason="update")

    response = post_batch(
        member,
        [
            {"key": "c-key", "content": "Entry c."},
            {
                "key": "b-key",
                "content": "Version three.",
                "supersede_reason": "x",
                "expected_version": saved["id"],
            },
            {"key": "a-key", "content": "Entry a."},
        ],
    )

    results = response.json()["results"]
    assert [r["status"] for r in results] == ["created", "error", "created"]
    assert results[1]["error"]["error"] == "stale_version"
    assert active(member) == {"a-key": "Entry a.", "b-key": "Version two of b.", "c-key": "Entry c."}


def test_expected_version_and_skills_follow_the_single_save(member: Agent, save: Any) -> None:
    saved = save(member, "k", "Version one.")
    skill = {"name": "deploy-skill", "keywords": ["deploy"]}

    response = post_batch(
        member,
        [
            {"key": "k", "content": "Version two.", "supersede_reason": "r", "expected_version": saved["id"]},
            {"key": "skill-a", "content": "Run make deploy.", "skill_trigger": skill},
            {"key": "skill-b", "content": "Run make deploy twice.", "skill_trigger": skill},
        ],
    )

    results = response.json()["results"]
    assert [r["status"] for r in results] == ["superseded", "created", "error"]
    assert results[2]["error"]["error"] == "skill_exists"


def test_credentials_are_scrubbed_and_reported_per_entry(member: Agent) -> None:
    secret = "AKIAIOSFODNN7EXAMPLE"
    response = post_batch(member, [{"key": "aws", "content": f"The key is {secret} for prod."}])

    result = response.json()["results"][0]
    assert result["status"] == "created"
    assert result["redactions"]
    assert secret not in response.content.decode()
    assert secret not in active(member)["aws"]


def test_saved_entries_are_indexed_in_batches_and_become_searchable(
    member: Agent, django_capture_on_commit_callbacks: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Not this test's subject, and most of its time: freshness's contradiction pass over
    # 150 texts that differ by a number.
    monkeypatch.setattr(search_hooks.memories_indexed, "_receivers", [])
    entries = [
        {"key": f"k-{i:03d}", "content": f"Batch memory number {i} mentions zanzibar{i}."} for i in range(150)
    ]
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = post_batch(member, entries)
    assert response.json()["counts"]["created"] == 150

    # One broker message per 100 entries (search.index_memories), not one per entry.
    assert len(callbacks) == 2
    for callback in callbacks:
        callback()
    with operator_view():
        assert set(Memory.objects.filter(team=member.team).values_list("index_state", flat=True)) == {
            "indexed"
        }
    assert search(member, "zanzibar42")["results"][0]["key"] == "k-042"


def test_a_batch_is_searchable_before_its_contradictions_are_looked_for(
    member: Agent, django_capture_on_commit_callbacks: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """search.hooks.memories_indexed (freshness's contradiction pass) runs in a message of
    its own after the whole batch was indexed, once for every entry still active."""
    seen: list[tuple[list[str], set[str]]] = []

    def receiver(*, entries: list[IndexedEntry]) -> None:
        with operator_view():
            states = set(
                Memory.objects.filter(team_id=entries[0].team_id).values_list("index_state", flat=True)
            )
        seen.append(([str(entry.memory_id) for entry in entries], states))

    monkeypatch.setattr(search_hooks.memories_indexed, "_receivers", [receiver])
    entries = [{"key": f"k-{i}", "content": f"Memory {i} about the quartz mine."} for i in range(5)]
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        results = post_batch(member, entries).json()["results"]
    for callback in callbacks:
        callback()

    assert seen == [([r["id"] for r in results], {"indexed"})]


# --------------------------------------------------------------------------- isolation, scopes


def test_another_teams_token_gets_404_and_nothing_of_the_team(
    member: Agent, outsider: Agent, save: Any
) -> None:
    save(member, "alpha-secret-plan", "Alpha ships the zeppelin on Monday.")

    response = post_batch(
        outsider, [{"key": "alpha-secret-plan", "content": "x", "supersede_reason": "r"}], team="alpha"
    )

    assert response.status_code == 404
    assert_error_shape(response.json())
    assert b"alpha" not in response.content.lower() and b"zeppelin" not in response.content
    assert active(member) == {"alpha-secret-plan": "Alpha ships the zeppelin on Monday."}


def test_a_batch_in_ones_own_team_never_sees_another_teams_entries(
    member: Agent, outsider: Agent, save: Any
) -> None:
    saved = save(member, "alpha-plan", "Alpha ships the zeppelin on Monday.")

    response = post_batch(
        outsider,
        [
            {"key": "alpha-plan", "content": "Alpha ships the zeppelin on Monday."},
            {"key": "v", "content": "y", "supersede_reason": "r", "expected_version": saved["id"]},
        ],
    )

    results = response.json()["results"]
    assert results[0]["status"] == "created"  # not a duplicate of alpha's entry
    assert results[1]["status"] == "error" and results[1]["error"]["error"] == "stale_version"
    assert results[1]["error"]["current"] is None
    assert results[0]["id"] != saved["id"]
    assert b"zeppelin" not in response.content.replace(b"Alpha ships the zeppelin on Monday.", b"")
    assert active(member) == {"alpha-plan": "Alpha ships the zeppelin on Monday."}


def test_an_unknown_team_is_404(member: Agent) -> None:
    response = post_batch(member, [{"key": "a", "content": "b"}], team="no-such-team")

    assert response.status_code == 404
    assert_error_shape(response.json())


def test_a_read_only_token_is_403_and_nothing_is_stored(readonly_member: Agent) -> None:
    response = post_batch(readonly_member, [{"key": "a", "content": "b"}])

    assert response.status_code == 403
    assert_error_shape(response.json())
    assert active(readonly_member) == {}


def test_no_token_is_401(member: Agent) -> None:
    member.client.credentials()

    response = post_batch(member, [{"key": "a", "content": "b"}])

    assert response.status_code == 401
    assert_error_shape(response.json())


def test_the_key_batch_is_still_read_and_deleted_at_its_url(member: Agent, save: Any) -> None:
    save(member, "batch", "A memory whose key is batch.")

    read = member.client.get(member.url("memories/batch/"))
    deleted = member.client.delete(member.url("memories/batch/"))

    assert read.status_code == 200 and read.json()["content"] == "A memory whose key is batch."
    assert deleted.status_code == 204
    assert active(member) == {}


# --------------------------------------------------------------------------- bad input


def raw_post(agent: Agent, body: bytes, content_type: str = "application/json") -> Any:
    return agent.client.generic("POST", agent.url("memories/batch/"), body, content_type=content_type)


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (b"[]", 400, "invalid"),
        (b'[{"key": "a", "content": "b"}]', 400, "invalid"),
        (b'{"entries": {"key": "a", "content": "b"}}', 400, "invalid"),
        (b'{"entries": "a"}', 400, "invalid"),
        (b'{"entries": []}', 400, "invalid"),
        (b"{}", 400, "invalid"),
        (b'{"entries": [{"key": "a", "content": "b"}], "extra": 1}', 400, "invalid"),
        (b'{"entries": [{"key": "a", "content": "b"}', 400, "malformed_json"),
        (b'{"entries": [{"key": "a", "content": "b\\u0000"}]}', 400, "invalid_characters"),
        (b"\xff\xfe", 400, "malformed_json"),
        (b'{"entries": [{"key": "a", "content": 1e999}]}', 400, "malformed_json"),
    ],
)
def test_bad_bodies_are_4xx_in_the_one_error_shape(
    member: Agent, body: bytes, status: int, code: str
) -> None:
    response = raw_post(member, body)

    assert response.status_code == status, response.content
    assert response.json()["error"] == code
    assert_error_shape(response.json())
    assert active(member) == {}


def test_more_than_500_entries_is_400_and_nothing_is_stored(member: Agent) -> None:
    response = post_batch(member, [{"key": f"k{i}", "content": "x"} for i in range(501)])

    assert response.status_code == 400
    assert response.json()["error"] == "invalid" and "entries" in response.json()["fields"]
    assert active(member) == {}


def test_500_entries_are_accepted(member: Agent) -> None:
    response = post_batch(member, [{"key": f"k{i:03d}", "content": f"text number {i}"} for i in range(500)])

    assert response.status_code == 200
    assert response.json()["counts"]["created"] == 500


def test_an_oversized_body_is_413(member: Agent, settings: Any) -> None:
    settings.MAX_REQUEST_BODY_BYTES = 10_000
    entries = [{"key": f"k{i}", "content": "x" * 1000} for i in range(20)]

    response = raw_post(member, json.dumps({"entries": entries}).encode())

    assert response.status_code == 413
    assert response.json()["error"] == "body_too_large"
    assert active(member) == {}


def test_if_match_is_refused_on_a_batch(member: Agent) -> None:
    response = post_batch(member, [{"key": "a", "content": "b"}], HTTP_IF_MATCH='"x"')

    assert response.status_code == 400
    assert response.json()["fields"] == {"If-Match": [response.json()["detail"]]}


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        (5, "non_field_errors"),
        ("a string", "non_field_errors"),
        (None, "non_field_errors"),
        ([1, 2], "non_field_errors"),
        ({"key": "a", "content": 7}, "content"),
        ({"key": ["a"], "content": "b"}, "key"),
        ({"key": "a", "content": "b", "metadata": "tags"}, "metadata"),
        ({"key": "a", "content": "b", "allow_duplicate": "yes"}, "allow_duplicate"),
        ({"key": "a", "content": "b", "expected_version": "not-a-uuid"}, "expected_version"),
        ({"key": "a", "content": "b", "anchor": 3}, "anchor"),
        ({"key": "a", "content": "b", "supersede_reson": "typo"}, "supersede_reson"),
        ({"key": "bad key/with slash", "content": "b"}, "key"),
        ({"key": "a", "content": "   "}, "content"),
        ({"key": "a", "content": "b" * 70_000}, "content"),
    ],
)
def test_a_bad_entry_is_an_error_of_its_own(member: Agent, entry: Any, field: str, settings: Any) -> None:
    settings.MAX_REQUEST_BODY_BYTES = 1024 * 1024
    response = post_batch(member, [entry, {"key": "good", "content": "A good entry."}])

    assert response.status_code == 200, response.content
    bad, good = response.json()["results"]
    assert bad["status"] == "error"
    assert_error_shape(bad["error"])
    assert field in bad["error"]["fields"], bad
    assert good["status"] == "created"
    assert set(active(member)) == {"good"}


# --------------------------------------------------------------------------- quotas


def test_the_memory_quota_holds_for_every_entry_of_a_batch(
    member: Agent, outsider: Agent, save: Any, settings: Any
) -> None:
    save(member, "existing", "An existing entry.")
    settings.MEMORYHUB_QUOTA_MEMORIES = 3

    response = post_batch(
        member,
        [
            {"key": "n1", "content": "new one"},
            {"key": "n2", "content": "new two"},
            {"key": "n3", "content": "new three"},
            {"key": "existing", "content": "A new version is not one more.", "supersede_reason": "r"},
        ],
    )

    results = response.json()["results"]
    assert [r["status"] for r in results] == ["created", "created", "error", "superseded"]
    assert results[2]["error"]["error"] == "quota_exceeded" and results[2]["error"]["limit"] == 3
    assert len(active(member)) == 3
    assert post_batch(outsider, [{"key": "n3", "content": "new three"}]).json()["counts"]["created"] == 1


def test_a_batch_is_one_write_against_the_tokens_rate_budget(member: Agent, settings: Any) -> None:
    settings.MEMORYHUB_THROTTLE_WRITE = "2/min"

    first = post_batch(member, [{"key": f"a{i}", "content": f"text {i}"} for i in range(10)])
    second = post_batch(member, [{"key": f"b{i}", "content": f"text b {i}"} for i in range(10)])
    third = post_batch(member, [{"key": "c", "content": "text c"}])

    assert first.status_code == second.status_code == 200
    assert third.status_code == 429 and third.json()["error"] == "rate_limited"
    assert len(active(member)) == 20


# --------------------------------------------------------------------------- one embedding call

PROFILES = """
profiles:
  remote:
    provider: openai
    base_url: {base_url}
    api_key_env: MEMORYHUB_TEST_EMBEDDINGS_KEY
    model: fake-minilm
    dimensions: 384
    batch_size: 256
"""


@pytest.fixture
def server() -> Iterator[EmbeddingServer]:
    """An OpenAI-compatible embedding endpoint (tests/search/embedding_server.py)."""
    local = provider_for("local")
    local.embed_documents(["warm up"])  # type: ignore[union-attr]
    embedding_server = EmbeddingServer(local, port=free_port())  # type: ignore[arg-type]
    yield embedding_server
    embedding_server.stop()


@pytest.fixture
def remote_team(
    member: Agent, server: EmbeddingServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Agent]:
    """The member's team on an embedding profile served by a real local HTTP server."""
    profiles = tmp_path / "profiles.yaml"
    profiles.write_text(PROFILES.format(base_url=server.base_url))
    monkeypatch.setenv("MEMORYHUB_TEST_EMBEDDINGS_KEY", API_KEY)
    member.team.embedding_profile = "remote"
    member.team.save()
    server.start()
    with override_settings(MEMORYHUB_EMBEDDING_PROFILES_FILE=str(profiles)):
        reset_providers()
        yield member
    reset_providers()


def test_the_request_embeds_nothing_and_the_worker_embeds_the_new_texts_in_one_call(
    remote_team: Agent, server: EmbeddingServer, save: Any, django_capture_on_commit_callbacks: Any
) -> None:
    save(remote_team, "tests", "Run the full test suite with make test before pushing.")
    server.requests.clear()
    entries = [
        {"key": "tests-again", "content": "Before pushing, run make test to run the whole test suite."},
        {"key": "lunch", "content": "The team has lunch together on Thursdays at noon."},
        {"key": "backups", "content": "Database backups run nightly at 02:00 UTC and are kept 30 days."},
        {"key": "oncall", "content": "The on-call engineer this week is Ada Lovelace."},
        {"key": "exact", "content": "Run the full test suite with make test before pushing."},
        {"key": "forced", "content": "A text saved with allow_duplicate.", "allow_duplicate": True},
    ]

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = post_batch(remote_team, entries)

    results = response.json()["results"]
    assert [r["status"] for r in results] == [
        "created",
        "created",
        "created",
        "created",
        "duplicate",
        "created",
    ]
    assert results[4]["duplicate_of"]["matched_by"] == "content_hash"
    assert server.requests == []  # the exact check needs no embedding

    for callback in callbacks:
        callback()
    # The worker embeds the five stored texts in one call, then the near check finds the
    # longer near duplicate with the vectors indexing stored: a soft supersede.
    assert len(server.requests) == 1
    assert len(server.requests[0]["input"]) == 5
    assert "tests" not in active(remote_team) and "tests-again" in active(remote_team)
    with team_scope(remote_team.team.id):
        assert (
            ChunkEmbedding.objects.filter(team=remote_team.team, model__startswith="fake-minilm").count() == 6
        )


def test_the_worker_embeds_a_batch_of_entries_in_one_provider_call(
    remote_team: Agent, server: EmbeddingServer, save: Any, django_capture_on_commit_callbacks: Any
) -> None:
    save(remote_team, "seed", "The seed memory that gives the team vectors.")
    long_text = "\n\n".join(
        f"Paragraph {n} about the release process and its many checks." * 12 for n in range(8)
    )
    entries = [
        {"key": f"forced-{i}", "content": f"{long_text} Variant {i}.", "allow_duplicate": True}
        for i in range(3)
    ]
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = post_batch(remote_team, entries)
    assert response.json()["counts"]["created"] == 3
    server.requests.clear()

    for callback in callbacks:
        callback()

    # Every chunk of the three multi-chunk entries in one request, not one per entry.
    assert len(server.requests) == 1
    assert len(server.requests[0]["input"]) > 3
    with operator_view():
        states = Memory.objects.filter(team=remote_team.team, key__startswith="forced-").values_list(
            "index_state", flat=True
        )
        assert list(states) == ["indexed"] * 3
